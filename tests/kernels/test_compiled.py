"""``CL_PLUGINS_COMPILE``: the per-pair maps compiled into one loop give the eager maps' values and gradients on
the fused and streaming kernels; a backend that fails falls back to the eager maps with one warning."""

from __future__ import annotations

import warnings

import pytest
import torch

import cl_plugins as clp
from cl_plugins.kernels import compiled, fused, halves, streaming
from cl_plugins.kernels.statement import statement_closed, statement_terms
from cl_plugins.kernels.tiles import chunk_forward

CASES = [
    ("temperature_free", {}),
    ("dystress", {}),
    ("dystress", {"profile": "shifted", "shift": -0.4, "scale": 0.7}),
]


@pytest.fixture
def restore():
    yield
    compiled.set_compile(None)


def _loss_and_grads(name, kwargs, kernel, dtype, labels=None, loss_fn=None):  # type: ignore[no-untyped-def]
    """(per-anchor losses, their gradients), stats: of ``loss_fn``, or of a new loss ``name`` with ``kwargs``; a
    loss whose map failed to compile is refused (``torch.compile`` must work where these tests run)."""
    g = torch.Generator().manual_seed(0)
    z1, z2 = (torch.randn(12, 6, generator=g, dtype=dtype, requires_grad=True) for _ in range(2))
    if loss_fn is None:
        loss_fn = clp.build_loss(name, kernel=kernel, reduction="none", **kwargs).to(dtype)
    extra = {} if labels is None else {"labels": labels}
    loss = loss_fn(z1, z2, **extra)
    return (loss, *torch.autograd.grad(loss.sum(), (z1, z2))), loss_fn.stats


@pytest.mark.parametrize("kernel", ["fused", "stream"])
@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_compiled_maps_equal_the_eager_ones(name, kwargs, kernel, restore):
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-6)):
        compiled.set_compile(False)
        eager, eager_stats = _loss_and_grads(name, kwargs, kernel, dtype)
        compiled.set_compile(True)
        ours, ours_stats = _loss_and_grads(name, kwargs, kernel, dtype)
        for a, b in zip(ours, eager):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)
        assert ours_stats.keys() == eager_stats.keys()
        for key in eager_stats:
            assert ours_stats[key] == pytest.approx(eager_stats[key], rel=tol)


@pytest.mark.parametrize("kernel", ["stream", "fused"])
@pytest.mark.parametrize("layout", ["simclr", "cross_view"])
@pytest.mark.parametrize("labelled", [False, True], ids=["unlabelled", "same_label"])
@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_whole_tiles_compiled_equal_the_eager_ones(name, kwargs, layout, labelled, kernel, restore, monkeypatch):
    """The kernels compile whole tiles (map, masks, exp, sums, statistics; the gradient backward): the symmetric
    SimCLR kernel and the plain streaming one over tiles that do not divide the block, the one-buffer kernel over
    row chunks."""
    def small(rows: int, cols: int, device: object = None) -> tuple[int, int]:
        return min(rows, 5), min(cols, 5)

    monkeypatch.setattr(streaming, "tile_sizes", small)
    monkeypatch.setattr(halves, "tile_sizes", small)
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 50)
    used: list[str] = []
    original = compiled.maybe_compiled
    for module in (streaming, fused):
        monkeypatch.setattr(module, "maybe_compiled", lambda fn, on=None, health=None: used.append(fn.__name__)
                            or original(fn, on, health))
    expected = {"forward_sums", "gradient_tile"} if kernel == "stream" else {"chunk_forward"}
    options = {**kwargs, "layout": layout, **({"label_policy": "exclude"} if labelled else {})}
    labels = torch.arange(12) % 4 if labelled else None
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):  # float32: the kernel tests' tolerance
        compiled.set_compile(False)
        eager, eager_stats = _loss_and_grads(name, options, kernel, dtype, labels)
        assert not used
        compiled.set_compile(True)
        ours, ours_stats = _loss_and_grads(name, options, kernel, dtype, labels)
        assert set(used) == expected
        used.clear()
        for a, b in zip(ours, eager):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)
        assert ours_stats.keys() == eager_stats.keys()
        for key in eager_stats:
            assert ours_stats[key] == pytest.approx(eager_stats[key], rel=tol)


def test_the_switch_follows_the_environment_unless_set(monkeypatch, restore):
    monkeypatch.setenv(compiled.ENV, "1")
    assert compiled.compile_enabled()
    monkeypatch.setenv(compiled.ENV, "0")
    assert not compiled.compile_enabled()
    compiled.set_compile(True)
    assert compiled.compile_enabled()


def test_a_failing_compilation_falls_back_to_the_eager_map_for_that_loss_only(monkeypatch, restore):
    """One warning, the eager map from then on for the loss whose compilation failed, the same values; another
    loss in the process keeps compiling."""
    failing = {"now": True}
    calls: list[str] = []

    def flaky(fn, **kwargs):  # type: ignore[no-untyped-def]
        def call(*args):  # type: ignore[no-untyped-def]
            calls.append(fn.__name__)
            if failing["now"]:
                raise RuntimeError("no C++ compiler here\ncompiler output follows")
            return fn(*args)

        return call

    compiled.compiled_form.cache_clear()
    monkeypatch.setattr(torch, "compile", flaky)
    first = clp.build_loss("temperature_free", kernel="fused", reduction="none", compile_maps=True).double()
    with pytest.warns(RuntimeWarning, match="compiled map kernel failed") as record:
        ours, _ = _loss_and_grads("", {}, "", torch.float64, loss_fn=first)
    assert len(record) == 1 and "\n" not in str(record[0].message)
    assert not first.kernel_health.usable("compiled map")
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning: the eager maps from now on
        again, _ = _loss_and_grads("", {}, "", torch.float64, loss_fn=first)
    assert not calls  # this loss no longer tries
    failing["now"] = False
    second = clp.build_loss("temperature_free", kernel="fused", reduction="none", compile_maps=True).double()
    other, _ = _loss_and_grads("", {}, "", torch.float64, loss_fn=second)
    assert calls and second.kernel_health.usable("compiled map")  # the other loss still compiles
    compiled.compiled_form.cache_clear()  # the real torch.compile for the tests after this one
    eager, _ = _loss_and_grads("temperature_free", {"compile_maps": False}, "fused", torch.float64)
    for a, b, c, d in zip(ours, again, other, eager):
        for value in (a, b, c):
            torch.testing.assert_close(value, d, rtol=0, atol=0)


def test_a_loss_can_ask_for_its_own_choice(restore, monkeypatch):
    """``compile_maps=True`` compiles that loss's map with the switch off; ``False`` keeps it eager with it on."""
    compiled.set_compile(False)
    compiled.compiled_form.cache_clear()
    _loss_and_grads("temperature_free", {"compile_maps": False}, "fused", torch.float64)
    assert compiled.compiled_form.cache_info().currsize == 0
    compiled.set_compile(True)
    _loss_and_grads("temperature_free", {"compile_maps": False}, "fused", torch.float64)
    assert compiled.compiled_form.cache_info().currsize == 0
    compiled.set_compile(False)
    used: list[object] = []
    original = compiled.compiled_form
    monkeypatch.setattr(compiled, "compiled_form", lambda fn: used.append(fn) or original(fn))
    _loss_and_grads("temperature_free", {"compile_maps": True}, "fused", torch.float64)
    # the map's terms and closed form, and the fused kernel's chunk
    assert set(used) == {statement_terms, statement_closed, chunk_forward}


@pytest.mark.parametrize("symmetric", [False, True], ids=["one direction", "both directions"])
def test_dystress_cross_view_compiles_as_a_user_compiles_it(symmetric, restore):
    """``torch.compile(loss)`` in SimCSE's layout: DySTreSS's statistic leaves the kernel as an output, not as a
    side effect inside its autograd function (which dynamo refused), so the loss compiles; values, gradients and
    stats equal the eager loss's."""
    loss_fn = clp.build_loss("dystress", layout="cross_view", symmetric=symmetric).double()
    g = torch.Generator().manual_seed(0)
    z1, z2 = (torch.randn(8, 4, generator=g, dtype=torch.float64) for _ in range(2))
    out = []
    for run in (torch.compile(loss_fn), loss_fn):
        a = z1.clone().requires_grad_()
        value = run(a, z2)
        out.append((value.detach(), torch.autograd.grad(value, a)[0], dict(loss_fn.stats)))
    torch.testing.assert_close(out[0][0], out[1][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out[0][1], out[1][1], rtol=1e-12, atol=1e-12)
    assert out[0][2].keys() == out[1][2].keys() and {"tau_mean", "tau_min", "tau_max"} <= out[0][2].keys()
    for key, value in out[1][2].items():
        assert out[0][2][key] == pytest.approx(value, rel=1e-12), key
