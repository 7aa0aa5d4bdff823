"""The symmetric streaming kernel (each tile of a SimCLR block stands for its transpose) and sums without a running
maximum: equal to the dense path and to the plain streaming kernel for every strategy (from the registry), with
learnable temperatures, labels, many tiles and tiles that do not divide the block; taken exactly where it applies."""

from __future__ import annotations

import math

import pytest
import torch

import cl_plugins as clp
from cl_plugins.kernels import dispatch, halves, streaming
from cl_plugins.labels import BlockLabels, LabelPolicy
from tests.kernels.test_streaming import STREAMABLE

N, D = 9, 6


@pytest.fixture(params=["many-tiles", "one-tile"])
def side(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "many-tiles":  # 4 x 4 tiles over an [18, 18] block: the last is a partial one
        monkeypatch.setattr(halves, "tile_sizes", lambda rows, cols, device=None: (min(rows, 4), min(cols, 5)))
    return request.param


def _run(name: str, kernel: str, dtype: torch.dtype, **kwargs) -> tuple:  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(1)
    z1, z2 = (torch.randn(N, D, generator=g, dtype=dtype).requires_grad_() for _ in range(2))
    loss_fn = clp.build_host_loss(name, host_tau=0.2, kernel=kernel, layout="simclr", **kwargs).to(dtype)
    extra = {"labels": torch.tensor([0, 1, 2, 0, 1, 2, 3, 3, 4])} if loss_fn.uses_labels else {}
    loss = loss_fn(z1, z2, **extra)
    grads = torch.autograd.grad(loss.sum(), [z1, z2, *loss_fn.parameters()])
    return loss.detach(), grads, loss_fn.stats


def _assert_same(a: tuple, b: tuple, rtol: float, atol: float) -> None:
    torch.testing.assert_close(a[0], b[0], rtol=rtol, atol=atol)
    for x, y in zip(a[1], b[1], strict=True):
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol)
    assert a[2].keys() == b[2].keys()
    for k in a[2]:
        assert a[2][k] == pytest.approx(b[2][k], rel=max(rtol, 1e-9), abs=atol), k


def _count_symmetric(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = halves._HalvesNegativeLSE.apply
    monkeypatch.setattr(halves._HalvesNegativeLSE, "apply", lambda *a: calls.append(1) or original(*a))
    return calls


OPTIONS = [{}, {"label_policy": "exclude"}, {"label_policy": "positives_out"}, {"label_policy": "positives_in"}]


@pytest.mark.parametrize("options", OPTIONS, ids=["plain", "exclude", "supcon-out", "supcon-in"])
@pytest.mark.parametrize("name", STREAMABLE)
def test_symmetric_kernel_equals_dense_float64(name: str, options: dict, side: str, monkeypatch) -> None:
    if options.get("label_policy", "").startswith("positives") and name == "amcl":
        pytest.skip("AMCL takes no labels as positives")
    calls = _count_symmetric(monkeypatch)
    streamed = _run(name, "stream", torch.float64, **options)
    assert calls, "the SimCLR block in one process streams by halves"
    _assert_same(streamed, _run(name, "dense", torch.float64, **options), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", STREAMABLE)
def test_symmetric_kernel_equals_plain_streaming_float32(name: str, side: str, monkeypatch) -> None:
    by_halves = _run(name, "stream", torch.float32)
    monkeypatch.setattr(halves, "mirrored", lambda *args: False)
    _assert_same(by_halves, _run(name, "stream", torch.float32), rtol=1e-5, atol=1e-6)


def test_auto_streams_by_halves_only_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_symmetric(monkeypatch)
    monkeypatch.setattr(dispatch, "HALVES_FROM_ELEMENTS", 1)
    z1, z2 = torch.randn(N, D), torch.randn(N, D)
    clp.build_loss("infonce")(z1, z2)
    assert len(calls) == 1
    clp.build_loss("infonce", layout="cross_view")(z1, z2)  # anchors are not their candidates
    clp.build_loss("infonce", tau=0.001)(z1, z2)  # logits up to 1000: sums keep a running maximum
    clp.build_loss("infonce", kernel="fused")(z1, z2)  # asked for
    assert len(calls) == 1
    monkeypatch.setattr(dispatch, "HALVES_FROM_ELEMENTS", 10**9)
    clp.build_loss("infonce")(z1, z2)  # small blocks: the one-buffer kernel
    assert len(calls) == 1


def test_tiny_temperatures_keep_the_running_maximum() -> None:
    """tau = 0.001 puts logits at +-1000: summed without a maximum they would overflow; the kernels see it from the
    bound and keep it, equal to the dense path."""
    g = torch.Generator().manual_seed(2)
    z1, z2 = torch.randn(N, D, generator=g), torch.randn(N, D, generator=g)
    values = [clp.build_loss("infonce", tau=0.001, kernel=k)(z1, z2) for k in ("dense", "fused", "stream")]
    assert all(torch.isfinite(v) for v in values)
    torch.testing.assert_close(values[1], values[0], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(values[2], values[0], rtol=1e-5, atol=1e-4)


def test_sums_fit_the_dtype() -> None:
    assert streaming.sums_fit(1 / 0.05, 131072, torch.float32)
    assert streaming.sums_fit(1 / 0.015, 131072, torch.float32)  # 66.7 + 11.8 <= 79.3
    assert not streaming.sums_fit(1 / 0.0125, 8, torch.float32)  # 80 + 2.1 > 79.3
    assert streaming.sums_fit(1 / 0.0125, 131072, torch.float64)
    assert not streaming.sums_fit(None, 8, torch.float32)
    assert not streaming.sums_fit(math.inf, 8, torch.float64)
    info = torch.finfo(torch.float32)
    limit = min(math.log(info.max), -math.log(info.tiny)) - streaming.SUM_MARGIN
    assert streaming.sums_fit(limit - math.log(1000), 1000, torch.float32)
    assert not streaming.sums_fit(limit - math.log(1000) + 0.01, 1000, torch.float32)


def _symmetric_on_the_data(exclude: torch.Tensor) -> bool:
    """Column j excluded from row i exactly when i is from j, read from the exclusions themselves."""
    rows = torch.arange(exclude.shape[0])
    return bool((exclude[exclude] == rows[:, None, None]).any(dim=2).all())


@pytest.mark.parametrize("layout", ["simclr", "grace", "cross_view"])
@pytest.mark.parametrize("labelled", [False, True])
def test_a_block_is_mirrored_exactly_where_its_layout_built_it_symmetric(layout: str, labelled: bool) -> None:
    """The kernels trust the layout's word (``mirrored``: no read of the device); the word is checked here against
    the exclusions, and the labels' against theirs."""
    y = torch.tensor([0, 1, 0, 1, 2]) if labelled else None
    loss = clp.build_loss("infonce", layout=layout, label_policy="exclude" if labelled else None)
    z1, z2 = torch.randn(5, 4), torch.randn(5, 4)
    for block in loss.blocks(z1, z2, labels=y):
        lazy = block.lazy()
        assert lazy.mirrored == (lazy.anchors is lazy.candidates) == (layout != "cross_view")
        if lazy.mirrored:
            assert _symmetric_on_the_data(block.exclude_cols) and (not labelled or block.labels.mirrored)


def test_labels_that_differ_by_side_are_not_mirrored() -> None:
    y = torch.tensor([0, 1, 0, 1])
    policy = LabelPolicy("exclude")
    assert BlockLabels(y, y, policy).mirrored and not BlockLabels(y, y.clone(), policy).mirrored
