"""Both CLIP directions from one Triton backward, and SimCLR's block from one backward kernel
(``cl_plugins.kernels.triton_bonded``), under Triton's interpreter: the same losses and gradients as the dense path
and as the directions apart, taken only where a block is its own or its bonded block's transpose with the same map
and scale."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch

import cl_plugins as clp
from cl_plugins import layouts
from cl_plugins.extension import LazyLogits
from cl_plugins.kernels import lazy, streaming, triton_bonded, triton_lse
from cl_plugins.kernels.contract import Bond, KernelChoice
from tests.kernels.test_streaming import STREAMABLE, negative_lse

SYMMETRIC = [n for n in STREAMABLE if "cross_view" in clp.get_loss_class(n).layouts]
OWN = [(n, layout) for n in STREAMABLE for layout in ("simclr", "grace") if layout in clp.get_loss_class(n).layouts]


@pytest.fixture(autouse=True)
def launches(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """16-row blocks; counts the one-direction and the two-direction launches."""
    counts = {"one": 0, "two": 0, "own": 0}
    for key, function in (("one", triton_lse._TritonNegativeLSE), ("two", triton_bonded._TritonPairLSE),
                          ("own", triton_bonded._TritonSelfLSE)):  # fmt: skip
        original = function.apply

        def counted(*args, key=key, original=original):  # type: ignore[no-untyped-def]
            counts[key] += 1
            return original(*args)

        monkeypatch.setattr(function, "apply", counted)
    with triton_lse.using(triton_lse.TritonConfig(block_a=16, block_m=16)):
        yield counts


def _loss_and_grads(name: str, kernel: str, dtype: torch.dtype, labels: bool = False,
                    layout: str = "cross_view"):  # type: ignore[no-untyped-def]  # fmt: skip
    """The loss and the gradients of both views and every parameter, CLIP's layout (21 rows: two blocks of 16, the
    second ragged) or ``layout``; with ``labels``, three classes and the exclude policy."""
    g = torch.Generator().manual_seed(3)
    z1, z2 = (torch.randn(21, 8, generator=g, dtype=torch.float64).to(dtype).requires_grad_() for _ in range(2))
    options = {"label_policy": "exclude"} if labels else {}
    options |= {"symmetric": True} if layout == "cross_view" else {}
    loss_fn = clp.build_host_loss(name, host_tau=0.2, layout=layout, kernel=kernel, **options)
    loss_fn = loss_fn.to(dtype)
    loss = loss_fn(z1, z2, **({"labels": torch.arange(21) % 3} if labels else {}))
    grads = torch.autograd.grad(loss, [z1, z2, *loss_fn.parameters()])
    return [loss.double(), *(x.double() for x in grads)]


@pytest.mark.parametrize("labels", [False, True], ids=["no-labels", "labels"])
@pytest.mark.parametrize("name", SYMMETRIC)
def test_both_directions_from_one_backward_equal_float64(name: str, labels: bool, launches: dict) -> None:
    ours = _loss_and_grads(name, "triton", torch.float32, labels)
    reference = _loss_and_grads(name, "dense", torch.float64, labels)
    for x, y in zip(ours, reference, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=2e-6)
    ratios = name == "dual_temperature"  # its second LSE at r * l: the directions apart
    assert launches == ({"one": 2, "two": 0, "own": 0} if ratios else {"one": 0, "two": 1, "own": 0})


@pytest.mark.parametrize("labels", [False, True], ids=["no-labels", "labels"])
@pytest.mark.parametrize("name,layout", OWN)
def test_a_block_against_itself_from_one_backward_kernel(name: str, layout: str, labels: bool, launches: dict) -> None:
    ours = _loss_and_grads(name, "triton", torch.float32, labels, layout)
    reference = _loss_and_grads(name, "dense", torch.float64, labels, layout)
    for x, y in zip(ours, reference, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=2e-6)
    ratios = name == "dual_temperature"
    assert launches == ({"one": 1, "two": 0, "own": 0} if ratios else {"one": 0, "two": 0, "own": 1})


def test_a_block_against_itself_with_unsymmetric_exclusions_runs_apart(launches: dict) -> None:
    u = torch.nn.functional.normalize(torch.randn(20, 8), dim=1).requires_grad_()
    exclude = ((torch.arange(20) + 1) % 20)[:, None]  # row i excludes i + 1, which does not exclude i
    assert negative_lse(triton_bonded.SELF, u, u, exclude, scale=5.0) is None
    ours = LazyLogits(u, u, kernel=KernelChoice("triton")).__truediv__(0.2).negative_lse(exclude)[0]
    assert launches == {"one": 1, "two": 0, "own": 0}
    reference = negative_lse(streaming.BACKEND, u * 5.0, u, exclude)[0]
    torch.testing.assert_close(ours, reference.detach(), rtol=1e-6, atol=1e-6)


def _lazy(a: torch.Tensor, c: torch.Tensor, bond: Bond, scale: float = 1.0) -> LazyLogits:
    return LazyLogits(a, c, kernel=KernelChoice("triton"), bond=bond) / (1.0 / scale)


def _streamed(a: torch.Tensor, c: torch.Tensor, scale: float) -> torch.Tensor:
    exclude = torch.arange(a.shape[0])[:, None]
    return negative_lse(streaming.BACKEND, a * scale, c, exclude)[0]


@pytest.mark.parametrize("second_scale,expected", [(5.0, {"one": 0, "two": 1, "own": 0}),
                                                   (4.0, {"one": 1, "two": 1, "own": 0})],
                         ids=["the partner takes the columns", "another scale: its own launch"])  # fmt: skip
def test_a_bonded_pair_equals_the_two_directions_apart(second_scale: float, expected: dict, launches: dict) -> None:
    g = torch.Generator().manual_seed(6)
    a, c = (torch.nn.functional.normalize(torch.randn(20, 8, generator=g), dim=1).requires_grad_() for _ in range(2))
    bond, exclude = Bond(), torch.arange(20)[:, None]
    first = _lazy(a, c, bond, 5.0).negative_lse(exclude)[0]
    second = _lazy(c, a, bond, second_scale).negative_lse(exclude)[0]
    assert launches == expected
    assert not bond.slot  # a leftover is taken once, then gone (or dropped by a partner at another scale)
    weights = torch.linspace(0.5, 1.5, 20)

    def total(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x * weights).sum() + (y * weights.flip(0)).sum()

    total(first, second).backward()
    ours = (first.detach(), second.detach(), a.grad.clone(), c.grad.clone())
    a.grad = c.grad = None
    reference = (_streamed(a, c, 5.0), _streamed(c, a, second_scale))
    total(*reference).backward()
    for x, y in zip(ours, (*(r.detach() for r in reference), a.grad, c.grad), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout,target", [("cross_view", "backward_launch"), ("simclr", "backward_launch")])
def test_a_failing_backward_takes_the_streaming_kernels_gradients(layout: str, target: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    reference = _loss_and_grads("learnable", "dense", torch.float64, layout=layout)

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("out of resource: shared memory")

    monkeypatch.setattr(triton_bonded, target, broken)
    with pytest.warns(RuntimeWarning, match="the triton kernel failed"):
        ours = _loss_and_grads("learnable", "triton", torch.float32, layout=layout)
    for x, y in zip(ours, reference, strict=True):  # the temperature's gradient too
        torch.testing.assert_close(x, y, rtol=1e-5, atol=2e-6)


def test_only_a_block_and_its_own_transpose_are_bonded() -> None:
    z1, z2, hard = torch.randn(3, 6, 4).unbind(0)
    both = layouts._cross_view(z1, z2, True, None, layouts._local, None)
    assert both[0].bond is not None and both[0].bond is both[1].bond
    assert layouts._cross_view(z1, z2, False, None, layouts._local, None)[0].bond is None
    assert all(b.bond is None for b in layouts._cross_view(z1, z2, False, hard, layouts._local, None))
    gathered = layouts._cross_view(z1, z2, True, None, lambda x: (torch.cat([x, x]), 0), None)  # other ranks' rows
    assert all(b.bond is None for b in gathered)
    assert lazy.LazyLogits(z1, z2).bond is None  # built by hand: no bond


def test_rows_of_4096_features_in_the_wide_default_chunks() -> None:
    """D = 4,096 in the blocks the GPU runs for D > 128 (chunks of 128 features, 256 gradient columns a program;
    the GPU targets ask for D up to 4,096): the same loss and gradients as float64."""
    config = replace(triton_lse.DEFAULTS[0], precision="ieee", block_a=16, block_m=16)  # the interpreter's precision
    g = torch.Generator().manual_seed(9)
    z = torch.randn(2, 10, 4096, generator=g, dtype=torch.float64)
    out = []
    for kernel, dtype in (("triton", torch.float32), ("dense", torch.float64)):
        z1, z2 = (x.to(dtype).requires_grad_() for x in z)
        with triton_lse.using(config):  # CLIP's bonded pair: both backward kernels, both directions' terms
            loss = clp.build_loss("dystress", layout="cross_view", symmetric=True, kernel=kernel)(z1, z2)
        out.append([loss.double(), *(x.double() for x in torch.autograd.grad(loss, [z1, z2]))])
    for x, y in zip(*out, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-7)
