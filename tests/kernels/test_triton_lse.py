"""``kernel="triton"`` under Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest on the CPU): equal to the
dense path (on the same float32 inputs) for every registered strategy but AMCL x every layout, over several blocks
with ragged edges: values, every input gradient and the learned temperatures' gradients, to 1e-5; bf16/fp16
autocast, similarities of exactly +-1, rows with no negative, labels, two processes; and where it does not apply,
the streaming kernel."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

import cl_plugins as clp
from cl_plugins.extension import LogitMap, TritonMap, tl, triton_map
from cl_plugins.kernels import dispatch, streaming, triton_bonded, triton_jit, triton_kernels, triton_lse
from tests.dist_utils import run_distributed, split
from tests.kernels.test_streaming import LAYOUTS, STREAMABLE, _assert_same, _inputs, _run, negative_lse

pytestmark = pytest.mark.skipif(not triton_lse.available(), reason="triton is not installed")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """16-row blocks (the smallest tl.dot takes): the 18 rows of a SimCLR block make two, the second ragged; counts
    the kernels' launches (one direction, both of a block and its transpose, or a block against itself)."""
    calls: list[int] = []
    for function in (triton_lse._TritonNegativeLSE, triton_bonded._TritonPairLSE, triton_bonded._TritonSelfLSE):
        original = function.apply
        monkeypatch.setattr(function, "apply", lambda *a, original=original: calls.append(1) or original(*a))
    with triton_lse.using(triton_lse.TritonConfig(block_a=16, block_m=16)):
        yield calls


def _close(ours: tuple, reference: tuple) -> None:
    """Against the dense path on the same float32 inputs, to the kernels' float32 tolerance."""
    _assert_same(ours, reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", STREAMABLE)
def test_triton_equals_dense(name: str, layout: str, small_blocks: list[int]) -> None:
    if LAYOUTS[layout][0]["layout"] not in clp.get_loss_class(name).layouts:
        pytest.skip(f"{name} does not support {layout}")
    data = _inputs(torch.float32)
    ours = _run(name, "triton", layout, data, reduction="none")
    assert small_blocks, "the Triton kernel ran"
    _close(ours, _run(name, "dense", layout, data, reduction="none"))


@pytest.mark.parametrize("options", [{"label_policy": "exclude"}, {"label_policy": "positives_out"},
                                     {"label_policy": "positives_in"}], ids=str)  # fmt: skip
@pytest.mark.parametrize("name", ["infonce", "macl", "dual_temperature", "dystress", "temperature_free"])
def test_triton_with_labels(name: str, options: dict, small_blocks: list[int]) -> None:
    g = torch.Generator().manual_seed(4)
    z1, z2 = torch.randn(9, 6, generator=g), torch.randn(9, 6, generator=g)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 3, 3, 4])
    out = []
    for kernel, dtype in (("triton", torch.float32), ("dense", torch.float32)):
        a, b = z1.to(dtype).requires_grad_(), z2.to(dtype).requires_grad_()
        loss = clp.build_loss(name, kernel=kernel, **options).to(dtype)(a, b, labels=y)
        out.append((loss.detach().float(), [t.float() for t in torch.autograd.grad(loss, [a, b])]))
    assert small_blocks
    torch.testing.assert_close(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
    for x, y_ in zip(out[0][1], out[1][1]):
        torch.testing.assert_close(x, y_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("profile,extra", [("cosine", {}), ("shifted", {"shift": -0.4, "scale": 0.7}),
                                           ("linear", {}), ("exponential", {}), ("monotone", {})])  # fmt: skip
def test_every_dystress_profile(profile: str, extra: dict, small_blocks: list[int]) -> None:
    data = _inputs(torch.float32)
    for layout in ("simclr", "cross_view-hard"):
        ours = _run("dystress", "triton", layout, data, profile=profile, **extra)
        _close(ours, _run("dystress", "dense", layout, data, profile=profile, **extra))
    assert small_blocks


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["infonce", "dual_temperature", "dystress", "temperature_free"])
def test_under_autocast(name: str, dtype: torch.dtype) -> None:
    data = _inputs(torch.float32)
    out = _run(name, "triton", "simclr", data, autocast=dtype)
    assert out[0].dtype == torch.float32
    _assert_same(out, _run(name, "dense", "simclr", data, autocast=dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["infonce", "dystress", "temperature_free", "learnable"])
def test_similarities_of_exactly_plus_and_minus_one(name: str) -> None:
    rows = torch.eye(9, 6)
    rows[6:] = torch.randn(3, 6, generator=torch.Generator().manual_seed(1))
    data = {"z1": rows, "z2": rows.clone(), "hard": -rows, "queue": -rows[:7]}
    for layout in ("simclr", "cross_view-hard", "queue"):
        out = _run(name, "triton", layout, data)
        assert torch.isfinite(out[0]).all() and all(torch.isfinite(g).all() for g in out[1])
        _close(out, _run(name, "dense", layout, data))


def test_a_row_with_no_negative_gets_minus_infinity_and_no_gradient() -> None:
    a = torch.randn(3, 6, requires_grad=True)
    c = torch.randn(2, 6, requires_grad=True)
    exclude = torch.tensor([[0, 1], [0, 0], [1, 1]])  # row 0 excludes both candidates
    lse = negative_lse(triton_lse.BACKEND, a, c, exclude)[0]
    assert lse[0] == float("-inf") and torch.isfinite(lse[1:]).all()
    lse[1:].sum().backward()
    expected = torch.stack([a[1] @ c[1], a[2] @ c[0]])  # one negative each: its logit
    torch.testing.assert_close(lse[1:], expected.detach())
    assert torch.isfinite(a.grad).all() and torch.isfinite(c.grad).all() and a.grad[0].abs().max() == 0


def test_auto_takes_triton_on_a_gpu_where_it_was_measured_faster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy: dense below 2^26 logits, from there Triton for D <= 128 (D <= 512 for half-precision
    features; measured faster on an H200), the streaming kernel for wider rows or where Triton cannot run; the CPU
    never takes it."""
    assert triton_lse.available()

    def rows(dim: int, device: str = "cuda") -> SimpleNamespace:
        return SimpleNamespace(device=torch.device(device), shape=(8, dim), dtype=torch.float32)

    monkeypatch.setattr(dispatch, "usable_on", lambda device: True)
    cases = {(1 << 20, 128): "dense", (1 << 26, 128): "triton", (1 << 30, 96): "triton", (1 << 30, 129): "stream"}
    for (size, dim), expected in cases.items():
        assert dispatch.auto(rows(dim), size) == expected, (size, dim)  # type: ignore[arg-type]
    half = {(1 << 20, 512): "dense", (1 << 26, 512): "triton", (1 << 30, 513): "stream"}
    for dtype in (torch.bfloat16, torch.float16):
        for (size, dim), expected in half.items():
            assert dispatch.auto(rows(dim), size, dtype) == expected, (size, dim, dtype)  # type: ignore[arg-type]
    assert dispatch.auto(rows(512), 1 << 30) == "stream"  # type: ignore[arg-type]
    monkeypatch.setattr(dispatch, "usable_on", lambda device: False)
    assert dispatch.auto(rows(128), 1 << 30) == "stream"  # type: ignore[arg-type]
    assert dispatch.auto(rows(128, "cpu"), 1 << 30) == "stream"  # type: ignore[arg-type]


def test_the_loss_tells_the_kernels_its_features_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels see float32 unit rows; the features' own dtype reaches the kernel choice and configuration."""
    seen = []

    def auto(rows: torch.Tensor, size: int, features: torch.dtype = torch.float32) -> str:
        seen.append((rows.dtype, triton_lse.features_dtype(rows, rows, features)))
        return "stream"

    monkeypatch.setattr(dispatch, "auto", auto)
    for dtype in (torch.bfloat16, torch.float32):
        z = torch.randn(2, 6, 8).to(dtype)
        clp.build_loss("dystress")(z[0], z[1])
    assert seen == [(torch.float32, torch.bfloat16), (torch.float32, torch.float32)]
    assert triton_lse.features_dtype(torch.ones(1), torch.ones(1)) == torch.float32
    half = torch.ones(1, dtype=torch.float16)
    assert triton_lse.features_dtype(half, half) == torch.float16  # half rows: their own products


def test_refused_in_one_line_where_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(ValueError, match="kernel='triton' runs on CUDA tensors") as info:
        clp.build_loss("infonce", kernel="triton")(torch.randn(4, 3), torch.randn(4, 3))
    assert "\n" not in str(info.value)
    monkeypatch.setattr(triton_jit, "triton", None)
    with pytest.raises(ValueError, match=r"pip install 'cl-plugins\[triton\]'"):
        clp.build_loss("infonce", kernel="triton")(torch.randn(4, 3), torch.randn(4, 3))


def test_a_failing_kernel_streams_instead_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("no GPU driver\ndetails")

    monkeypatch.setattr(triton_lse._TritonNegativeLSE, "forward", staticmethod(broken))
    data = _inputs(torch.float32)
    with pytest.warns(RuntimeWarning, match="the triton kernel failed") as record:  # one direction's kernel
        ours = _run("dystress", "triton", "cross_view", data)
    assert len(record) == 1 and "\n" not in str(record[0].message)
    _assert_same(ours, _run("dystress", "stream", "cross_view", data), rtol=1e-6, atol=1e-7)


def test_a_failing_kernel_is_off_for_that_loss_only(monkeypatch: pytest.MonkeyPatch, small_blocks: list[int]) -> None:
    """The loss whose Triton kernel failed streams from then on, without another warning; a loss built before or
    after it keeps its Triton kernel."""
    forward = triton_lse._TritonNegativeLSE.forward
    failing = {"now": False}

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        if failing["now"]:
            raise RuntimeError("no GPU driver")
        return forward(*args, **kwargs)

    monkeypatch.setattr(triton_lse._TritonNegativeLSE, "forward", staticmethod(flaky))
    z = torch.randn(2, 9, 6)
    first, other = (clp.build_loss("dystress", layout="cross_view", kernel="triton") for _ in range(2))
    failing["now"] = True
    with pytest.warns(RuntimeWarning, match="the triton kernel failed"):
        first(z[0], z[1])
    failing["now"] = False
    small_blocks.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first(z[0], z[1])
        assert not small_blocks and not first.kernel_health.usable("triton")  # streamed, silently
        other(z[0], z[1])
    assert small_blocks and other.kernel_health.usable("triton")  # the other loss: still Triton


def test_a_failing_backward_takes_the_streaming_kernels_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def __getitem__(self, grid):  # type: ignore[no-untyped-def]
            def launch(*args, **options):  # type: ignore[no-untyped-def]
                raise RuntimeError("out of resources: shared memory")

            return launch

    monkeypatch.setattr(triton_kernels, "backward_anchors_kernel", Broken())
    data = _inputs(torch.float32)
    with pytest.warns(RuntimeWarning, match="out of resources"):
        ours = _run("dual_temperature", "triton", "cross_view-hard", data)
    _assert_same(ours, _run("dual_temperature", "stream", "cross_view-hard", data), rtol=1e-6, atol=1e-7)


def test_float64_keeps_its_precision_on_the_streaming_kernel(small_blocks: list[int]) -> None:
    data = _inputs(torch.float64)
    ours = _run("dystress", "triton", "simclr", data)
    assert not small_blocks
    _assert_same(ours, _run("dystress", "dense", "simclr", data), rtol=1e-10, atol=1e-12)


def test_maps_without_a_triton_form_stream(small_blocks: list[int]) -> None:
    data = _inputs(torch.float32)
    ours = _run("dystress", "triton", "simclr", data, detach=False)  # its derivative has no Triton form
    assert not small_blocks
    _assert_same(ours, _run("dystress", "dense", "simclr", data, detach=False), rtol=1e-5, atol=1e-6)


@triton_map
def _sine_form(x, params, unused):  # type: ignore[no-untyped-def]
    """A map no strategy has, written outside the package: phi(x) = p0 sin(x), statistic x^2."""
    return params[0] * tl.sin(x), params[0] * tl.cos(x), x * x


def test_a_map_written_outside_the_package_runs_on_the_kernel(small_blocks: list[int]) -> None:
    """A new per-pair strategy brings its Triton form from its own file: the kernels take it as given."""
    stats: list[tuple[float, ...]] = []

    def sine(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 3.0 * torch.sin(s), s * s

    def record(total: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> None:
        stats.append((float(total), float(low), float(high)))

    logit_map = LogitMap(lambda s: 3.0 * torch.sin(s), with_derivative=lambda s: (3.0 * torch.sin(s),
                         3.0 * torch.cos(s)), with_stat=sine, on_stats=record, triton=TritonMap.of(_sine_form, (3.0,)))
    g = torch.Generator().manual_seed(2)
    unit = torch.nn.functional.normalize(torch.randn(2, 19, 8, generator=g), dim=-1)
    exclude = torch.arange(19)[:, None]
    grads = []
    for backend in (triton_lse.BACKEND, streaming.BACKEND):
        a, c = unit[0].clone().requires_grad_(), unit[1].clone().requires_grad_()
        lse = negative_lse(backend, a, c, exclude, logit_map=logit_map)[0]
        grads.append((lse.detach(), *torch.autograd.grad(lse.square().sum(), (a, c))))
    assert small_blocks, "the Triton kernel ran"
    for ours, reference in zip(grads[0], grads[1], strict=True):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(stats[0]), torch.tensor(stats[1]), rtol=1e-5, atol=1e-5)


CASES = [("infonce", "simclr"), ("macl", "cross_view"), ("dystress", "simclr"), ("dual_temperature", "queue")]


def _rank(rank: int, world: int) -> list:
    import os

    os.environ["TRITON_INTERPRET"] = "1"  # (inherited too; said here for a worker that starts afresh)
    g = torch.Generator().manual_seed(0)
    z1, z2, queue = torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g), torch.randn(6, 5, generator=g)
    rows = split(8, world, False)[rank]
    out = []
    for name, layout in CASES:
        a, b = z1[rows].clone().requires_grad_(), z2[rows].clone().requires_grad_()
        extra = {"queue": queue} if layout == "queue" else {}
        loss = clp.build_loss(name, layout=layout, kernel="triton")(a, b, **extra)
        loss.backward()
        out.append((float(loss.detach()), a.grad, b.grad))
    return out


@pytest.mark.distributed
def test_two_processes_equal_one_on_the_global_batch() -> None:
    results = run_distributed(_rank)
    g = torch.Generator().manual_seed(0)
    z1, z2, queue = torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g), torch.randn(6, 5, generator=g)
    for i, (name, layout) in enumerate(CASES):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        extra = {"queue": queue} if layout == "queue" else {}
        loss = clp.build_loss(name, layout=layout, kernel="dense")(a, b, **extra)
        loss.backward()
        for rank, rows in enumerate(split(8, 2, False)):
            value, ga, gb = results[rank][i]
            assert value == pytest.approx(float(loss.detach()), rel=1e-5), name
            torch.testing.assert_close(ga, 2 * a.grad[rows], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(gb, 2 * b.grad[rows], rtol=1e-5, atol=1e-6)


CONFIGS = {
    "chunked-d": triton_lse.TritonConfig(block_a=16, block_m=32, block_d=16, out_d=16),
    "wide-blocks": triton_lse.TritonConfig(block_a=32, block_m=16, warps=8, stages=2),
    "tf32x3": triton_lse.TritonConfig(precision="tf32x3", block_a=16, block_m=16, block_d=32),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name,layout", [("infonce", "simclr"), ("dystress", "cross_view-hard"),
                                         ("dual_temperature", "queue"), ("temperature_free", "grace")])  # fmt: skip
def test_every_configuration_computes_the_same_loss(name: str, layout: str, config: str) -> None:
    """Blocks, chunks of D (40 features: three chunks of 16, the last ragged) and the backward's column split change
    how the kernels run, never the result."""
    g = torch.Generator().manual_seed(7)
    data = {k: torch.randn(n, 40, generator=g) for k, n in (("z1", 37), ("z2", 37), ("hard", 37), ("queue", 21))}
    with triton_lse.using(CONFIGS[config]):
        ours = _run(name, "triton", layout, data, reduction="none")
    _close(ours, _run(name, "dense", layout, data, reduction="none"))


def test_half_products(monkeypatch: pytest.MonkeyPatch) -> None:
    """precision="fp16": rows multiplied as fp16 (float32 accumulation), within fp16's rounding of the float32
    loss. (Triton 3.9's interpreter multiplies bf16 blocks wrongly, 1e10 off; "bf16" is checked on the GPU, in
    ``benchmarks/gpu_kernel_sweep.py`` against float64.)"""
    seen: list[torch.dtype] = []
    operands = triton_lse._operands
    monkeypatch.setattr(triton_lse, "_operands", lambda *a: seen.append(operands(*a)[0].dtype) or operands(*a))
    g = torch.Generator().manual_seed(8)
    data = {k: torch.randn(37, 40, generator=g) for k in ("z1", "z2", "hard")}
    with triton_lse.using(triton_lse.TritonConfig(precision="fp16", block_a=16, block_m=16)):
        loss, grads, _ = _run("infonce", "triton", "cross_view", data, reduction="none")
    assert seen == [torch.float16] * 2  # the forward launch's rows and the backward's
    ref_loss, ref_grads, _ = _run("infonce", "dense", "cross_view", data, reduction="none")
    torch.testing.assert_close(loss.float(), ref_loss, rtol=3e-2, atol=3e-2)
    for ours, ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(ours.float(), ref, rtol=5e-2, atol=5e-3)


def test_half_features_lose_nothing_forward_with_half_products() -> None:
    """fp16 features multiplied as fp16 (the default for them on a GPU) give the loss of the same features multiplied
    in float32, up to the fp16 rounding of the per-row LSEs the kernel returns (the products of two fp16 numbers are
    exact in float32; the interpreter accumulates them in another order than the tensor cores, so exact equality is
    the GPU check's). The gradients' blocks are rounded to fp16."""
    g = torch.Generator().manual_seed(9)
    z1, z2 = (torch.randn(37, 40, generator=g).half() for _ in range(2))
    out = []
    for precision in ("fp16", "ieee"):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with triton_lse.using(triton_lse.TritonConfig(precision=precision, block_a=16, block_m=16)):
            loss = clp.build_loss("infonce", kernel="triton")(a, b)
        out.append((loss.float(), *(t.float() for t in torch.autograd.grad(loss, (a, b)))))
    torch.testing.assert_close(out[0][0], out[1][0], rtol=1e-4, atol=1e-6)
    for ours, reference in zip(out[0][1:], out[1][1:], strict=True):
        torch.testing.assert_close(ours, reference, rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize("field,value", [("precision", "fp8"), ("block_a", 24), ("block_d", 8), ("warps", 3)])
def test_a_configuration_that_cannot_run_is_refused_in_one_line(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"TritonConfig: {field}=") as info:
        triton_lse.TritonConfig(**{field: value})
    assert "\n" not in str(info.value)


def test_the_default_configuration_by_width_and_device() -> None:
    cuda = torch.device("cuda")
    with triton_lse.using(None):  # not the fixture's small blocks
        assert triton_lse.config_for(128, cuda) == triton_lse.DEFAULTS[128]
        assert triton_lse.config_for(100, cuda).precision == "bf16x3"
        assert triton_lse.config_for(129, cuda) == triton_lse.DEFAULTS[0] and triton_lse.DEFAULTS[0].block_d < 256
        assert triton_lse.config_for(128, torch.device("cpu")).precision == "ieee"  # the interpreter: no bf16x3
        # half-precision features: products in their own dtype, the blocks of the default for their width
        assert triton_lse.config_for(128, cuda, torch.bfloat16) == replace(triton_lse.DEFAULTS[128], precision="bf16")
        assert triton_lse.config_for(512, cuda, torch.float16).precision == "fp16"
        assert triton_lse.config_for(128, torch.device("cpu"), torch.float16).precision == "ieee"
    with triton_lse.using(triton_lse.TritonConfig(precision="tf32x3")):
        assert triton_lse.config_for(512, cuda).precision == "tf32x3"
        assert triton_lse.config_for(512, cuda, torch.bfloat16).precision == "tf32x3"  # a set one is kept


def test_a_map_the_operators_cannot_find_is_refused_in_one_line() -> None:
    """The operators take a map by the module and name that hold it: one defined inside a function is not there."""

    @triton_map
    def local(x, params, constant):  # type: ignore[no-untyped-def]
        return x, x * 0.0 + 1.0, x * 0.0

    assert triton_jit.registered_map(triton_jit.map_key(_sine_form)) is _sine_form
    with pytest.raises(ValueError, match="top level of a module") as info:
        triton_jit.registered_map(triton_jit.map_key(local))
    assert "\n" not in str(info.value)
