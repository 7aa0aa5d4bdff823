"""The loss table of the GPU check: every strategy and kernel against a hand-written ``F.cross_entropy`` loss,
open_clip's ``ClipLoss`` and the four matrix products of the same shape (the lower bound of any exact kernel).

The shape is CLIP's: two views [N, D], each row's positive the same row of the other view, both directions
(``layout="cross_view", symmetric=True``). The four products are the forward logits A Bᵀ, their recomputation
(the streaming kernel's backward), and the gradients G B and Gᵀ A. Each row is one forward and backward from
float32 or bf16 inputs (our kernels accumulate in float32; the Triton kernel multiplies bf16 features as bf16): the
median of ``reps`` timed runs after a warm-up (CUDA events on a GPU, the wall clock on the CPU), and the peak memory
above the inputs.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import cl_plugins as clp
from cl_plugins.kernels import triton_lse

TAU = 0.07


def _timed(step: Callable[[], Any], device: torch.device, reps: int, warm: bool = True) -> tuple[float, float]:
    """(median milliseconds, peak MiB above what was allocated before) of ``step``; ``warm=False`` where the
    caller has run it already."""
    cuda = device.type == "cuda"
    if warm:
        step()  # warm-up: kernels chosen and compiled, buffers cached
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    for _ in range(reps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - t0))
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else float("nan")
    return statistics.median(times), peak


def _backward(loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], a: torch.Tensor, b: torch.Tensor):
    def step() -> None:
        a.grad = b.grad = None
        loss_of(a, b).backward()

    return step


def cross_entropy_loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """InfoNCE at τ written by hand, as most codebases have it."""
    a, b = F.normalize(a.float(), dim=1), F.normalize(b.float(), dim=1)
    logits = a @ b.T / TAU
    labels = torch.arange(a.shape[0], device=a.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def load_clip_loss(upstream: Path | None) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
    """open_clip's ``ClipLoss`` from its pinned ``loss.py`` (None when the file is not at hand)."""
    path = upstream / "open_clip" / "src" / "open_clip" / "loss.py" if upstream else None
    if path is None or not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("upstream_open_clip_loss", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    clip = module.ClipLoss()

    def loss_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor(1 / TAU, device=a.device)
        return clip(F.normalize(a.float(), dim=1), F.normalize(b.float(), dim=1), scale)

    return loss_of


def matmul_bound(a: torch.Tensor, b: torch.Tensor) -> Callable[[], None]:
    """The four [N, D] x [D, N] products, in float32 as our kernels compute them."""
    a, b = a.detach().float(), b.detach().float()

    def step() -> None:
        s = a @ b.T
        a @ b.T
        s @ b
        s.T @ a

    return step


CLIP = {"layout": "cross_view", "symmetric": True}


def our_loss(name: str, kernel: str, dim: int,
             layout: dict[str, Any] = CLIP) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:  # fmt: skip
    """Strategy ``name`` on ``kernel`` at τ = :data:`TAU` in ``layout``'s options (default: CLIP's, both
    directions); a strategy with its own feature heads (AMCL) gets two over ``dim``."""
    extra = {"dim": dim, "heads": 2} if clp.get_loss_class(name).feature_dim_arg else {}
    return clp.build_host_loss(name, host_tau=TAU, kernel=kernel, **layout, **extra)


def rows_for(dim: int, n: int, kernels: tuple[str, ...], clip_loss: Any) -> list[tuple[str, str, Any]]:
    """(strategy, kernel, what to run) of one shape; the dense kernel only where its [N, N] graph is small."""
    rows: list[tuple[str, str, Any]] = [("matmul x4", "-", None), ("F.cross_entropy", "-", cross_entropy_loss)]
    if clip_loss is not None:
        rows.append(("open_clip ClipLoss", "-", clip_loss))
    for name in clp.available_losses():
        for kernel in kernels:
            if kernel != "dense" or n <= 16384:
                rows.append((name, kernel, (name, kernel)))
    return rows


def measure(row: tuple[str, str, Any], a: torch.Tensor, b: torch.Tensor, reps: int) -> dict[str, Any]:
    """One row's time and memory, or what stopped it (out of memory, an error)."""
    name, kernel, what = row
    try:
        if what is None:
            step = matmul_bound(a, b)
        else:
            loss_of = our_loss(*what, dim=a.shape[1]).to(a.device) if isinstance(what, tuple) else what
            step = _backward(loss_of, a, b)
        ms, mib = _timed(step, a.device, reps)
        return {"ms": round(ms, 3), "peak_mib": round(mib, 1)}
    except torch.cuda.OutOfMemoryError:
        return {"error": "out of memory"}
    except Exception as exc:  # recorded, not raised: one failing row must not cost the rest of the table
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    finally:
        if a.device.type == "cuda":
            torch.cuda.empty_cache()


def table(device: torch.device, sizes: list[int], dims: list[int], dtypes: list[torch.dtype], deadline: float,
          upstream: Path | None, record: Callable[[dict[str, Any]], None], reps: int = 3,
          kernels: list[str] | None = None) -> None:  # fmt: skip
    """Measure every row of every shape, in the order of ``sizes``, until ``deadline`` (``time.monotonic()``); each
    result is handed to ``record`` as it comes. A kernel out of memory at one N is not tried at larger N.
    ``kernels`` (default: auto, dense, fused, stream, and triton where it runs) are our rows' kernels."""
    clip_loss, failed = load_clip_loss(upstream), set()
    if kernels is None:
        kernels = ["auto", "dense", "fused", "stream"]
        if device.type == "cuda" and triton_lse.available():  # the rows: the Triton kernels beside the others
            kernels.append("triton")
    for n in sizes:
        for dim in dims:
            for dtype in dtypes:
                g = torch.Generator(device=device).manual_seed(0)
                a = torch.randn(n, dim, device=device, dtype=dtype, generator=g).requires_grad_()
                b = torch.randn(n, dim, device=device, dtype=dtype, generator=g).requires_grad_()
                for row in rows_for(dim, n, tuple(kernels), clip_loss):
                    key = (row[0], row[1], dim, dtype)
                    base = {"strategy": row[0], "kernel": row[1], "n": n, "d": dim, "dtype": str(dtype)[6:]}
                    if time.monotonic() > deadline:
                        return record({**base, "error": "not measured: the check's time box ran out"})
                    if key in failed:
                        continue
                    result = measure(row, a, b, reps)
                    if "error" in result:
                        failed.add(key)
                    record({**base, **result})


def tile_sweep(device: torch.device, n: int, dim: int, deadline: float,
               record: Callable[[dict[str, Any]], None], reps: int = 3) -> None:  # fmt: skip
    """The streaming kernel at fixed tile sizes and at the device's own choice (``tile_sizes``), for a scalar
    temperature (infonce) and a per-pair map (dystress): the measurement behind ``GPU_TILE_*``."""
    from cl_plugins.kernels import streaming

    chosen = streaming.tile_sizes
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, dim, device=device, generator=g).requires_grad_()
    b = torch.randn(n, dim, device=device, generator=g).requires_grad_()
    fixed = [(1024, 1024), (4096, 4096), (8192, 8192), (16384, 16384), None]
    try:
        for tiles in fixed:
            rows, cols = chosen(n, n, device) if tiles is None else tiles
            size = f"{'auto ' if tiles is None else ''}{rows}x{cols}"
            if tiles is not None:
                streaming.tile_sizes = lambda r, c, d=None, t=tiles: (min(r, t[0]), min(c, t[1]))
            for name in ("infonce", "dystress"):
                base = {"strategy": f"{name} tiles {size}", "kernel": "stream", "n": n, "d": dim, "dtype": "float32"}
                if time.monotonic() > deadline:
                    return record({**base, "error": "not measured: the check's time box ran out"})
                record({**base, **measure((name, "stream", (name, "stream")), a, b, reps)})
    finally:
        streaming.tile_sizes = chosen
