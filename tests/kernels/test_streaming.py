"""The streaming kernel (and the one-buffer fused kernel, which now also runs per-pair maps and hard-negative
biases) equals the dense path: every strategy (from the registry) x every layout, many tiles or one, float64 to
1e-10, float32 to 1e-5, under autocast, at similarities of exactly +-1; and streaming never stores an [A, M]
tensor."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import cl_plugins as clp
from cl_plugins.base import ContrastiveLoss
from cl_plugins.kernels import dispatch, fused, streaming
from cl_plugins.kernels.contract import Backend, KernelChoice, Request

STREAMABLE = [n for n in clp.available_losses()
              if clp.get_loss_class(n).scalar_temperature
              or clp.get_loss_class(n).logit_map is not ContrastiveLoss.logit_map]  # fmt: skip
LAYOUTS = {
    "simclr": ({"layout": "simclr"}, {}),
    "grace": ({"layout": "grace"}, {}),
    "cross_view": ({"layout": "cross_view"}, {}),
    "cross_view-symmetric": ({"layout": "cross_view", "symmetric": True}, {}),
    "cross_view-hard": ({"layout": "cross_view", "hard_negative_weight": 0.3}, {"hard": True}),
    "queue": ({"layout": "queue"}, {"queue": True}),
    "queue-symmetric": ({"layout": "queue", "symmetric": True}, {"queue": True}),
}
N, D, K = 9, 6, 7


def _inputs(dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    rows = (("z1", N), ("z2", N), ("hard", N), ("queue", K))
    return {k: torch.randn(n, D, generator=g, dtype=dtype) for k, n in rows}


def _run(name: str, kernel: str, layout: str, data: dict[str, torch.Tensor], autocast: torch.dtype | None = None,
         **kwargs):  # type: ignore[no-untyped-def]  # fmt: skip
    options, call = LAYOUTS[layout]
    loss_fn = clp.build_host_loss(name, host_tau=0.2, kernel=kernel, **options, **kwargs).to(data["z1"].dtype)
    z1, z2, hard = (data[k].clone().requires_grad_() for k in ("z1", "z2", "hard"))
    extra = {}
    if call.get("hard"):
        extra["hard_negatives"] = hard
    if call.get("queue"):
        extra["queue"] = data["queue"]
    with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        loss = loss_fn(z1, z2, **extra)  # backward outside autocast, as torch's AMP recipe has it
    inputs = [z1, z2] + ([hard] if call.get("hard") else []) + list(loss_fn.parameters())
    grads = torch.autograd.grad(loss.sum(), inputs)
    return loss.detach(), grads, loss_fn.stats


def negative_lse(backend: Backend, a: torch.Tensor, c: torch.Tensor, exclude: torch.Tensor | None = None,
                 kernel: str = "triton", **fields: object) -> list[torch.Tensor] | None:  # fmt: skip
    """``backend`` run on the request of ``a`` against ``c`` with ``exclude`` and ``fields`` (None: declined)."""
    request = Request(a, c, exclude, choice=KernelChoice(kernel), **fields)  # type: ignore[arg-type]
    return backend.run(request) if backend.accepts(request) else None


def _assert_same(a, b, rtol: float, atol: float) -> None:  # type: ignore[no-untyped-def]
    (l1, g1, s1), (l2, g2, s2) = a, b
    torch.testing.assert_close(l1, l2, rtol=rtol, atol=atol)
    for x, y in zip(g1, g2, strict=True):
        torch.testing.assert_close(x, y, rtol=rtol, atol=atol)
    assert s1.keys() == s2.keys()
    for k in s1:
        assert s1[k] == pytest.approx(s2[k], rel=max(rtol, 1e-9), abs=atol), k


@pytest.fixture(params=["many-tiles", "one-tile"])
def tiles(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "many-tiles":  # 4-row blocks x 5-column tiles: exclusions and positives cross tile edges
        monkeypatch.setattr(streaming, "tile_sizes", lambda rows, cols, device=None: (min(rows, 4), min(cols, 5)))
    return request.param


@pytest.fixture(params=["bounded", "running-max"])
def sums(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Bounded logits are summed without a maximum (every case here, at tau = 0.2); "running-max" takes the path
    of large logits (tiny temperatures, large biases) instead."""
    if request.param == "running-max":
        monkeypatch.setattr(streaming, "sums_fit", lambda bound, count, dtype: False)
    return request.param


@pytest.mark.parametrize("kernel", ["stream", "fused"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", STREAMABLE)
def test_kernels_equal_dense_float64(name: str, layout: str, kernel: str, tiles: str, sums: str, monkeypatch) -> None:
    if LAYOUTS[layout][0]["layout"] not in clp.get_loss_class(name).layouts:
        pytest.skip(f"{name} does not support {layout}")
    if tiles == "many-tiles":
        monkeypatch.setattr(fused, "CHUNK_ELEMENTS", 7)  # row chunks of the fused kernel
    data = _inputs(torch.float64)
    _assert_same(_run(name, kernel, layout, data), _run(name, "dense", layout, data), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("profile,extra", [("cosine", {}), ("shifted", {"shift": -0.4, "scale": 0.7}),
                                           ("linear", {}), ("exponential", {}), ("monotone", {})])  # fmt: skip
@pytest.mark.parametrize("detach", [True, False])
def test_every_dystress_profile_streams_exactly(profile: str, extra: dict, detach: bool, tiles: str) -> None:
    data = _inputs(torch.float64)
    kwargs = {"profile": profile, "detach": detach, **extra}
    for layout in ("simclr", "cross_view-hard"):
        for kernel in ("stream", "fused"):
            _assert_same(_run("dystress", kernel, layout, data, **kwargs),
                         _run("dystress", "dense", layout, data, **kwargs), rtol=1e-10, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("name", STREAMABLE)
def test_stream_equals_dense_float32_and_reduction_none(name: str, tiles: str, sums: str) -> None:
    data = _inputs(torch.float32)
    for layout in ("simclr", "cross_view-symmetric"):
        for kernel in ("stream", "fused"):
            _assert_same(_run(name, kernel, layout, data, reduction="none"),
                         _run(name, "dense", layout, data, reduction="none"), rtol=1e-5, atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", STREAMABLE)
def test_under_autocast(name: str, dtype: torch.dtype) -> None:
    data = _inputs(torch.float32)
    dense = _run(name, "dense", "simclr", data, autocast=dtype)
    for kernel in ("stream", "fused"):
        out = _run(name, kernel, "simclr", data, autocast=dtype)
        assert out[0].dtype == torch.float32
        _assert_same(out, dense, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", STREAMABLE)
def test_similarities_of_exactly_plus_and_minus_one(name: str) -> None:
    """Positives identical to their anchors (s = 1) and negatives opposite to them (s = -1)."""
    base_rows = torch.eye(N, D, dtype=torch.float64)[:, :D]
    base_rows[D:] = torch.randn(N - D, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    data = {"z1": base_rows, "z2": base_rows.clone(), "hard": -base_rows, "queue": -base_rows[:K]}
    for layout in ("simclr", "cross_view-hard", "queue"):
        dense = _run(name, "dense", layout, data)
        for kernel in ("stream", "fused"):
            out = _run(name, kernel, layout, data)
            assert torch.isfinite(out[0]).all() and all(torch.isfinite(g).all() for g in out[1])
            _assert_same(out, dense, rtol=1e-10, atol=1e-12)


def test_double_backward_is_refused_and_retain_graph_works() -> None:
    z1 = torch.randn(5, 4, requires_grad=True)
    loss = clp.build_loss("dystress", kernel="stream")(z1, torch.randn(5, 4))
    with pytest.raises(RuntimeError, match="no second derivative.*kernel='dense'"):
        torch.autograd.grad(loss, z1, create_graph=True)
    loss = clp.build_loss("infonce", kernel="stream")(z1, torch.randn(5, 4))
    loss.backward(retain_graph=True)
    loss.backward()  # the tiles are recomputed, nothing was consumed


def test_no_saved_tensor_is_as_large_as_the_logit_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming, "tile_sizes", lambda rows, cols, device=None: (min(rows, 16), min(cols, 16)))
    n, dim = 64, 8  # simclr: A = M = 128, so [A, M] has 16384 entries
    for name in ("infonce", "dystress", "temperature_free", "dual_temperature"):
        sizes: list[int] = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t, seen=sizes: seen.append(t.numel()) or t, lambda t: t):
            loss = clp.build_loss(name, kernel="stream")(torch.randn(n, dim, requires_grad=True), torch.randn(n, dim))
        loss.backward()
        assert max(sizes) < (2 * n) ** 2 // 4, (name, max(sizes))


def test_kernel_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    block = clp.build_loss("infonce").blocks(torch.randn(8, 4), torch.randn(8, 4))[0]

    def kernel(name: str, on: object = block, **kwargs: object) -> str:
        return clp.build_loss(name, **kwargs).block_kernel(on).name

    assert kernel("infonce") == "fused"
    monkeypatch.setattr(dispatch, "STREAM_FROM_ELEMENTS", block.size)
    assert kernel("infonce") == "stream"
    assert kernel("infonce", kernel="fused") == "fused"
    assert kernel("dystress") == "stream"  # above the (patched) threshold
    monkeypatch.setattr(dispatch, "STREAM_FROM_ELEMENTS", block.size + 1)
    assert kernel("dystress") == "fused"
    assert kernel("temperature_free", kernel="dense") == "dense"
    assert kernel("amcl", dim=4) == "dense"  # AMCL runs its own kernel
    # on a GPU: dense below CUDA_STREAM_FROM_ELEMENTS (the one-buffer kernel is slow there), streaming from it for
    # rows wider than CUDA_TRITON_MAX_DIM (narrower ones take Triton: tests/kernels/test_triton_lse.py)
    for size, expected in ((dispatch.CUDA_STREAM_FROM_ELEMENTS - 1, "dense"),
                           (dispatch.CUDA_STREAM_FROM_ELEMENTS, "stream")):  # fmt: skip
        rows = SimpleNamespace(device=torch.device("cuda", 0), shape=(8, 2 * dispatch.CUDA_TRITON_MAX_DIM),
                               dtype=torch.float32)  # fmt: skip
        on_gpu = SimpleNamespace(size=size, anchors=rows)
        assert kernel("macl", on_gpu) == expected
        assert kernel("dystress", on_gpu) == expected
        assert kernel("macl", on_gpu, kernel="fused") == "fused"  # asked for: given
    with pytest.raises(TypeError, match="unexpected argument"):  # fused= was never released: gone
        clp.build_loss("infonce", fused=False)
    with pytest.raises(ValueError, match="kernel"):
        clp.build_loss("infonce", kernel="flash")


def test_tiles_are_sized_for_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert streaming.tile_sizes(16384, 32768, cpu) == (1024, 1024)
    assert streaming.tile_sizes(100, 30, cpu) == (100, 30)
    gpu = torch.device("cuda", 0)
    for free, expected in ((80 << 30, (16384, 16384)), (4 << 30, (4096, 16384)), (1 << 20, (64, 16384))):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, f=free: (f, 80 << 30))
        assert streaming.tile_sizes(65536, 131072, gpu) == expected, free
    assert streaming.tile_sizes(8, 10, gpu) == (8, 10)  # never larger than the matrix


@pytest.mark.parametrize("kernel", ["fused", "stream"])
@pytest.mark.parametrize("bias", [0.3, 30.0, 1000.0])  # 1000: beyond float64's sums_fit, the log-sum-exp path instead
def test_temperature_frees_closed_form_equals_its_log_sum_exp(kernel, bias, monkeypatch):
    """exp(2 atanh s) = (1 + s) / (1 - s): the kernels sum it without a maximum (no atanh, no exp), equal to the
    dense path's 2 atanh(s) in float64 near and at s = +-1, with a hard negative's bias."""
    loss = clp.build_loss("temperature_free", kernel=kernel)
    assert loss.logit_map(None).exp_form is not None
    used = []
    original = streaming._exp_tile if kernel == "stream" else fused._chunk_exp
    monkeypatch.setattr(streaming if kernel == "stream" else fused, "_exp_tile" if kernel == "stream" else "_chunk_exp",
                        lambda *args: used.append(1) or original(*args))  # fmt: skip
    g = torch.Generator().manual_seed(3)
    z1 = torch.randn(6, 4, generator=g, dtype=torch.float64)
    z2 = z1 + 1e-7 * torch.randn(6, 4, generator=g, dtype=torch.float64)  # cosines within 1e-7 of 1
    z2[0] = z1[0]  # exactly 1
    hard = -z1.clone()
    hard[1] = z1[1]  # a hard negative at s = 1
    values = []
    for k in ("dense", kernel):
        a = z1.clone().requires_grad_()
        loss_fn = clp.build_loss("temperature_free", kernel=k, layout="cross_view", hard_negative_weight=bias).double()
        value = loss_fn(a, z2, hard_negatives=hard)
        values.append((value.detach(), torch.autograd.grad(value, a)[0]))
    torch.testing.assert_close(values[1][0], values[0][0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(values[1][1], values[0][1], rtol=1e-9, atol=1e-10)
    assert bool(used) == (bias < 1000)
