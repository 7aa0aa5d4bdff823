"""The Triton kernel's configurations on the GPU: precision, blocks, warps, stages and chunks of D, each timed and
checked against float64, beside the losses users would pick instead, in one time-boxed pass.

Every row is InfoNCE at τ = 0.07 in CLIP's layout (two views [N, D], both directions; ``one_direction`` rows: the
anchors' direction only), one forward and backward: the median of ``reps`` CUDA-event timed runs after a warm-up,
the peak memory above the inputs, and the error of the loss (and, where the float64 graph fits, of the input
gradients) relative to the same loss in float64. The stages run in order, each taking the fastest configuration
of the one before that is exact (loss within 1e-5 of float64) and the fastest one of any precision:

1. N = 16,384, D = 128, float32 features: the precisions, then blocks × warps × stages for the best of them;
2. D = 512: chunks of D (``block_d``) and the backward's column split (``out_d``) for the two chosen;
3. N = 65,536, D = 128, and one direction at N = 262,144 and 1,048,576: the chosen ones against the streaming
   kernel, ``F.cross_entropy`` (where its [N, N] logits fit) and Inf-CL's ``cal_flash_loss`` (where installed).

The floors (``floor_ms``), printed for each shape before its rows: the four N×N×D products of an exact flash-style
kernel (forward, recomputation, two gradients) at the measured matrix rate of float32 (cuBLAS,
``torch.backends.cuda.matmul.allow_tf32 = False``) and of bf16, and its compulsory memory traffic (the features read
forward and again backward, their gradients written: 24 N D bytes in float32) at the measured copy bandwidth, all
measured in the same call. A row's ``x_floor_*`` is its time over each.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import cl_plugins as clp
from benchmarks.gpu_loss_table import _backward, _timed
from cl_plugins.kernels import triton_lse

TAU = 0.07
EXACT = 1e-5  # loss and gradients within this of float64 count as exact (float32's own: ~1e-7)
Config = triton_lse.TritonConfig


def _normalized(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return F.normalize(a.float(), dim=1), F.normalize(b.float(), dim=1)


def cross_entropy_loss(one_direction: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def loss_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = _normalized(a, b)
        logits = a @ b.T / TAU
        labels = torch.arange(a.shape[0], device=a.device)
        if one_direction:
            return F.cross_entropy(logits, labels)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2

    return loss_of


def inf_cl_loss(one_direction: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
    """Inf-CL's ``cal_flash_loss`` (TF32 products, heads of at most 256 features), or None where not installed."""
    try:
        from inf_cl import cal_flash_loss
    except ImportError:
        return None

    def loss_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = _normalized(a, b)
        head = min(a.shape[1], 256)
        forward = cal_flash_loss(a, b, scale=1 / TAU, head_dim=head).mean()
        return forward if one_direction else (forward + cal_flash_loss(b, a, scale=1 / TAU, head_dim=head).mean()) / 2

    return loss_of


def our_loss(kernel: str, one_direction: bool, config: Config | None) -> Callable[..., torch.Tensor]:
    loss = clp.build_host_loss("infonce", host_tau=TAU, layout="cross_view", symmetric=not one_direction,
                               kernel=kernel)  # fmt: skip

    def loss_of(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if config is None:
            return loss(a, b)
        with triton_lse.using(config):
            return loss(a, b)

    return loss_of


def reference_loss(a: torch.Tensor, b: torch.Tensor, one_direction: bool) -> float:
    """The loss in float64, a block of rows at a time (at most 2**28 logits: no [N, N] float64 matrix)."""
    a64, b64 = F.normalize(a.detach().double(), dim=1), F.normalize(b.detach().double(), dim=1)
    total, n = 0.0, a.shape[0]
    chunk = max(1, min(4096, 2**28 // n))
    for x, y in ((a64, b64),) if one_direction else ((a64, b64), (b64, a64)):
        for i in range(0, n, chunk):
            logits = x[i : i + chunk] @ y.T / TAU
            pos = (x[i : i + chunk] * y[i : i + chunk]).sum(dim=1) / TAU
            total += float((torch.logsumexp(logits, dim=1) - pos).sum())
    return total / (n if one_direction else 2 * n)


def reference_gradients(a: torch.Tensor, b: torch.Tensor, one_direction: bool) -> torch.Tensor:
    """d loss / d (a, b) in float64 through autograd on the dense graph, concatenated."""
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    x, y = F.normalize(a64, dim=1), F.normalize(b64, dim=1)
    logits = x @ y.T / TAU
    labels = torch.arange(a.shape[0], device=a.device)
    loss = F.cross_entropy(logits, labels)
    if not one_direction:
        loss = (loss + F.cross_entropy(logits.T, labels)) / 2
    return torch.cat(torch.autograd.grad(loss, (a64, b64)))


def errors(loss_of: Callable[..., torch.Tensor], a: torch.Tensor, b: torch.Tensor, ref: float,
           ref_grad: torch.Tensor | None) -> dict[str, float]:  # fmt: skip
    """The loss's (and gradients') error relative to float64, on the same inputs as the timing. Forward and
    backward run even where no float64 gradient is at hand: this is the warm-up of the rows timed once, and a
    backward first run inside the timing would time Triton's compilation (it did, 2026-11-28, docs/gpu.md)."""
    a, b = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    loss = loss_of(a, b)
    out = {"loss_err": abs(float(loss.detach()) - ref) / abs(ref)}
    grads = torch.autograd.grad(loss, (a, b))
    if ref_grad is not None:
        grad = torch.cat(grads).double()
        out["grad_err"] = float((grad - ref_grad).norm() / ref_grad.norm())
    del grads
    if not math.isfinite(float(loss.detach())):
        out["loss_err"] = float("inf")
    return {k: float(f"{v:.3g}") for k, v in out.items()}


def matrix_rates(device: torch.device) -> dict[str, float]:
    """TFLOP/s of one square product in float32 (IEEE, no TF32) and in bf16, measured here: the floors' rates."""
    n, out = (8192 if device.type == "cuda" else 256), {}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            x, y = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
            ms, _ = _timed(lambda x=x, y=y: x @ y, device, 5)
            out[name] = 2 * n**3 / (ms * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return out


def memory_rate(device: torch.device) -> float:
    """GB/s of a device-to-device copy (each byte read once and written once), measured here: the byte floor's rate."""
    x = torch.empty((1 << 28) if device.type == "cuda" else (1 << 24), device=device)
    ms, _ = _timed(lambda: x.clone(), device, 5)
    return 2 * x.numel() * x.element_size() / (ms * 1e-3) / 1e9


def floors(n: int, d: int, rates: dict[str, float]) -> dict[str, float]:
    """The milliseconds below which no exact kernel gets at N = ``n``, D = ``d``: ``floor_ms_fp32`` and
    ``floor_ms_bf16`` from the four products' 8 N^2 D operations, ``floor_ms_bytes`` from the 24 N D bytes of
    float32 features read twice and their gradients written once (``rates``: TFLOP/s by dtype, ``gb_s``)."""
    out = {f"floor_ms_{k}": round(8 * n * n * d / (rates[k] * 1e12) * 1e3, 3) for k in ("fp32", "bf16")}
    out["floor_ms_bytes"] = round(24 * n * d / (rates["gb_s"] * 1e9) * 1e3, 4)
    return out


def label(config: Config) -> str:
    chunks = (f" bd{config.block_d}" if config.block_d else "") + (f" do{config.out_d}" if config.out_d else "")
    return f"triton {config.precision} {config.block_a}x{config.block_m} w{config.warps} s{config.stages}{chunks}"


class Shape:
    """One shape's inputs, float64 answers and floors; measures rows on it and hands each to ``record``."""

    def __init__(self, stage: str, n: int, d: int, one_direction: bool, device: torch.device,
                 rates: dict[str, float], record: Callable[[dict[str, Any]], None], reps: int) -> None:  # fmt: skip
        g = torch.Generator(device=device).manual_seed(n + d)
        self.a, self.b = (torch.randn(n, d, device=device, generator=g).requires_grad_() for _ in range(2))
        self.one_direction, self.record, self.reps = one_direction, record, reps
        self.ref = reference_loss(self.a, self.b, one_direction)
        fits = device.type != "cuda" or 3 * n * n * 8 < 0.3 * torch.cuda.get_device_properties(device).total_memory
        self.ref_grad = reference_gradients(self.a, self.b, one_direction) if fits else None
        self.base = {"stage": stage, "n": n, "d": d, "direction": "one" if one_direction else "both",
                     **floors(n, d, rates)}  # fmt: skip
        print(f"floors at N = {n}, D = {d}: {8 * n * n * d / 1e9:.1f} GFLOP -> {self.base['floor_ms_fp32']} ms in "
              f"float32, {self.base['floor_ms_bf16']} ms in bf16; {24 * n * d / 2**20:.1f} MiB -> "
              f"{self.base['floor_ms_bytes']} ms at {rates['gb_s']:.0f} GB/s", flush=True)  # fmt: skip

    def measure(self, name: str, loss_of: Callable[..., torch.Tensor] | None, deadline: float) -> dict[str, Any]:
        row = {**self.base, "row": name}
        need = 90 if self.a.shape[0] >= 1 << 20 else 0  # a row at N = 2^20 takes about a minute
        if loss_of is None:
            row["error"] = "not installed"
        elif time.monotonic() + need > deadline:
            row["error"] = "not measured: the check's time box ran out"
        else:
            row.update(self._run(loss_of))
        self.record(row)
        return row

    def _run(self, loss_of: Callable[..., torch.Tensor]) -> dict[str, Any]:
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message=".*the triton kernel failed", category=RuntimeWarning)
                out = errors(loss_of, self.a, self.b, self.ref, self.ref_grad)
            big = self.a.shape[0] >= 262144  # seconds a run: the error's run was the warm-up, one timed run
            ms, mib = _timed(_backward(loss_of, self.a, self.b), self.a.device, 1 if big else self.reps, not big)
            out.update(ms=round(ms, 3), peak_mib=round(mib, 1))
            for k in ("fp32", "bf16", "bytes"):
                out[f"x_floor_{k}"] = round(ms / self.base[f"floor_ms_{k}"], 2)
            return out
        except torch.cuda.OutOfMemoryError:
            return {"error": "out of memory"}
        except Exception as exc:  # recorded, not raised: one failing row must not cost the rest of the sweep
            return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc) else ''}"}
        finally:
            if self.a.device.type == "cuda":
                torch.cuda.empty_cache()

    def references(self, deadline: float, dense: bool) -> None:
        """The rows to beat: the streaming kernel, Inf-CL, and where the [N, N] logits fit (``dense``),
        ``F.cross_entropy`` (and our dense kernel up to N = 16,384)."""
        self.measure("stream", our_loss("stream", self.one_direction, None), deadline)
        self.measure("Inf-CL cal_flash_loss", inf_cl_loss(self.one_direction), deadline)
        if dense:
            self.measure("F.cross_entropy", cross_entropy_loss(self.one_direction), deadline)
        if dense and self.a.shape[0] <= 16384:
            self.measure("dense", our_loss("dense", self.one_direction, None), deadline)

    def configs(self, configs: list[Config], deadline: float) -> dict[str, Config]:
        """Measure each configuration; the fastest exact one and the fastest of all (``exact``, ``any``)."""
        timed = []
        for config in configs:
            row = self.measure(label(config), our_loss("triton", self.one_direction, config), deadline)
            if "ms" in row:
                timed.append((row["ms"], max(row["loss_err"], row.get("grad_err", 0.0)) <= EXACT, config))
        chosen = {}
        if timed:
            chosen["any"] = min(timed, key=lambda t: t[0])[2]
            exact = [t for t in timed if t[1]]
            if exact:
                chosen["exact"] = min(exact, key=lambda t: t[0])[2]
        return chosen


def _grid(precision: str, shapes: tuple[tuple[int, int, int, int], ...]) -> list[Config]:
    return [Config(precision=precision, block_a=ba, block_m=bm, warps=w, stages=st) for ba, bm, w, st in shapes]


#: stage 1's configurations. The first H200 sweeps (2026-11-27, docs/results/gpu/) found float32 operands at
#: 64 x 64 x 3 stages and anything at 128 x 128 over the 227 KiB of shared memory, tf32x3 half as fast as
#: bf16x3, bf16 fastest at 64 x 64, 4 warps, 2 stages, and bf16x3 exact and fastest at 128 x 64, 8 warps: what
#: stays is each precision's best and its nearest neighbours
CANDIDATES = (
    _grid("bf16x3", ((64, 64, 4, 2), (128, 64, 8, 2), (64, 128, 4, 2)))
    + _grid("tf32x3", ((64, 64, 4, 2),))
    + _grid("bf16", ((64, 64, 4, 2), (128, 64, 8, 2)))
)  # fmt: skip
#: the exact configuration whose chunks of D are tried at D = 512 beside the chosen ones' (bf16x3 at 128 x 64 ran
#: out of shared memory at every chunking there; this is ``triton_lse.DEFAULTS[0]``'s block shape)
WIDE_EXACT = Config(precision="bf16x3", block_a=64, block_m=64, warps=4, stages=2)
#: (block_d, out_d, stages) tried at D = 512 for the chosen configurations (the gradient's [block, out_d]
#: accumulator lives in registers: out_d of 512 spills)
CHUNKS = ((64, 128, 2), (128, 128, 2), (64, 64, 2), (128, 256, 1))


def _variants(chosen: dict[str, Config], chunks: tuple[tuple[int, int, int], ...]) -> list[Config]:
    out: list[Config] = []
    for config in chosen.values():
        for bd, do, stages in chunks:
            variant = Config(**{**config.__dict__, "block_d": bd, "out_d": do, "stages": stages})
            if variant not in out:
                out.append(variant)
    return out


def stage_blocks(shape: Shape, deadline: float, quick: bool) -> dict[str, Config]:
    """Stage 1: every candidate; the fastest exact one and the fastest of all."""
    shape.references(deadline, dense=True)
    shape.measure(label(Config()) + " (today's default)", our_loss("triton", False, Config()), deadline)
    interpretable = [c for c in CANDIDATES if c.precision == "tf32x3"][:2]  # what Triton's interpreter takes
    return shape.configs(interpretable if quick else list(CANDIDATES), deadline)


def sweep(device: torch.device, deadline: float, record: Callable[[dict[str, Any]], None], quick: bool = False,
          reps: int = 3, max_n: int = 1 << 20, refs_max_n: int = 1 << 20) -> None:  # fmt: skip
    """All stages, until ``deadline`` (``time.monotonic()``); each row is handed to ``record`` as it comes. Stage 3
    stops at N = ``max_n``; the rows to beat are measured up to ``refs_max_n``."""
    rates = {**matrix_rates(device), "gb_s": memory_rate(device)}
    record({"stage": "0 rates", "row": "matrix TFLOP/s, copy GB/s", **{k: round(v, 1) for k, v in rates.items()}})

    def shape_of(stage: str, n: int, d: int, one_direction: bool) -> Shape:
        return Shape(stage, n, d, one_direction, device, rates, record, reps)

    small, dim = (48, 32) if quick else (16384, 128)
    chosen = stage_blocks(shape_of("1 configurations", small, dim, False), deadline, quick)
    if not chosen:
        return
    wide = shape_of("2 chunks of D", small, 64 if quick else 512, False)
    wide.references(deadline, dense=True)
    wide_configs = chosen if quick else {**chosen, "wide": WIDE_EXACT}
    wide.configs(_variants(wide_configs, CHUNKS[:2] if quick else CHUNKS), deadline)
    del wide
    sizes = [(32, False), (96, False)] if quick else [(4096, False), (8192, False), (65536, False), (262144, True),
                                                       (1048576, True)]  # fmt: skip
    for n, one_direction in [(n, one) for n, one in sizes if n <= max_n]:
        if time.monotonic() + (120 if n >= 1 << 20 else 0) > deadline:  # its float64 answer alone takes seconds
            return
        shape = shape_of("3 N", n, dim, one_direction)
        shape.configs(list(dict.fromkeys(chosen.values())), deadline)
        if n <= refs_max_n or n < small:
            shape.references(deadline, dense=n <= 65536)
        del shape
