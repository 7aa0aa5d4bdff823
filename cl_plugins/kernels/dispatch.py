"""Which kernel computes a block's negatives' log-sum-exp: decided here only.

:func:`choose` reads the thresholds below, the rows' device and width and whether Triton can run, and gives a
block's :class:`~cl_plugins.kernels.contract.KernelChoice` (every strategy, AMCL's too, asks it); :func:`backends`
turns a choice and a :class:`~cl_plugins.kernels.contract.Request` into the ordered backends that may serve it, and
:func:`run` runs the first that accepts: one that declines (Triton for a map it has no form of; the symmetric
kernel where its plan does not apply) or fails (a Triton kernel that cannot compile here, then off for that loss
only, :class:`~cl_plugins.kernels.contract.KernelHealth`) hands the request on, with the same values. The thresholds
come from measurements: docs/benchmarks.md on the CPU, docs/gpu.md on a GPU; ``kernel="auto"`` takes a kernel on a
kind of device only where it was measured faster there.
"""

from __future__ import annotations

import torch

from . import fused, halves, pair_network, streaming, triton_bonded, triton_lse
from .contract import Backend, KernelChoice, KernelHealth, Request
from .triton_jit import refuse_unusable, usable_on

#: the values of every strategy's ``kernel=``
KERNELS = ("auto", "dense", "fused", "stream", "triton")
#: ``kernel="auto"`` streams a block from this many [A, M] entries on (a 1 GiB float32 buffer: N = 8192 in the
#: SimCLR layout); below, the one-buffer kernel is a few percent faster on CPU (docs/benchmarks.md)
STREAM_FROM_ELEMENTS = 1 << 28
#: on the CPU, ``kernel="auto"`` runs a block of anchors against themselves (SimCLR's within one process) on the
#: streaming kernel by halves from this many entries on, where it applies: measured faster than the one-buffer kernel
#: from N = 2048 (a [4096, 4096] block; docs/benchmarks.md)
HALVES_FROM_ELEMENTS = 1 << 24
#: on a GPU, ``kernel="auto"`` runs the dense path below this many entries; the one-buffer kernel is 3 to 15 times
#: slower than both there (H100, docs/gpu.md: at N = 16384 in CLIP's layout, dense 30 ms, streaming 26 ms with a
#: sixth of the memory, fused 110 to 1100 ms; at N = 4096, dense 3.7 ms, streaming 6 ms)
CUDA_STREAM_FROM_ELEMENTS = 1 << 26
#: ... and the Triton kernel (bf16x3 products) from there for rows this wide or narrower, the streaming kernel for
#: wider ones: on one H200 (docs/gpu.md), CLIP layout, D = 128, float32, Triton took 5.6 ms at N = 8,192 (streaming
#: 8.4, dense 7.9) and 13.9 at 16,384 (23.1, 25.5) on 2026-11-27; with both directions from one backward, 9.5 at
#: 16,384 (24.1) and 115 at 65,536 (315) on 2026-11-28, exact to 3e-7; at N = 4,096 dense and Triton are level.
#: At D = 512 Triton was faster for every strategy but dual temperature (77.5 against streaming's 59.8), so it stays
#: at 128 for float32 features
CUDA_TRITON_MAX_DIM = 128
#: ... and this wide for half-precision features (bf16 products, :func:`triton_lse.features_dtype`): at N = 16,384,
#: D = 512 on the H200 (2026-11-28) every strategy faster than streaming, InfoNCE 15.4 ms against 56.9 and
#: ``F.cross_entropy``'s 25.8
HALF_TRITON_MAX_DIM = 512


def auto(rows: torch.Tensor, size: int, features: torch.dtype = torch.float32) -> str:
    """``kernel="auto"``'s kernel for a block of ``size`` logits whose anchors are ``rows``: on the CPU the
    one-buffer kernel, streaming from :data:`STREAM_FROM_ELEMENTS`; on a GPU the dense path below
    :data:`CUDA_STREAM_FROM_ELEMENTS`, from there Triton for rows of at most :data:`CUDA_TRITON_MAX_DIM` features
    (:data:`HALF_TRITON_MAX_DIM` for half-precision features) where it can run, else streaming."""
    if rows.device.type == "cuda":
        if size < CUDA_STREAM_FROM_ELEMENTS:
            return "dense"
        half = triton_lse.features_dtype(rows, rows, features) in triton_lse.HALF_PRECISIONS
        narrow = rows.shape[-1] <= (HALF_TRITON_MAX_DIM if half else CUDA_TRITON_MAX_DIM)
        return "triton" if narrow and usable_on(rows.device) else "stream"
    return "stream" if size >= STREAM_FROM_ELEMENTS else "fused"


def choose(requested: str, rows: torch.Tensor, size: int, lazy: bool = True, *,
           features: torch.dtype = torch.float32, health: KernelHealth | None = None) -> KernelChoice:  # fmt: skip
    """The kernel of a block of ``size`` logits whose anchors are ``rows`` (unit rows of features of ``features``),
    for a strategy built with ``kernel=requested`` whose record of failed backends is ``health``; ``lazy=False``
    where the strategy has no lazy form (neither a scalar temperature nor a per-pair map): the dense path then,
    whatever was asked. ``"triton"`` where it cannot run is refused in one line."""
    health = KernelHealth() if health is None else health
    if requested == "dense" or not lazy:
        return KernelChoice("dense", features=features, health=health)
    if requested == "triton":
        refuse_unusable(rows.device)
    if requested != "auto":
        return KernelChoice(requested, features=features, health=health)
    name = auto(rows, size, features)
    by_halves = name == "fused" and size >= HALVES_FROM_ELEMENTS
    return KernelChoice(name, halves=by_halves, features=features, health=health)


def backends(request: Request) -> list[Backend]:
    """The backends that may serve ``request``, in the order its choice tries them: a temperature network's own
    kernel for its logits (any choice); Triton as a block against itself, a bonded block or one direction, then the
    streaming kernels (a map without a derivative by halves first); the one buffer (a bonded block's both
    directions at once first, then by halves first where ``auto`` chose that); streaming (by halves first)."""
    choice = request.choice
    if request.network is not None:  # logits with a per-pair temperature network: its kernel alone
        return [pair_network.BACKEND]
    if choice.name == "triton":
        return [triton_bonded.SELF, triton_bonded.PAIR, triton_lse.BACKEND,
                *([] if request.fusable else [halves.BACKEND]), streaming.BACKEND]  # fmt: skip
    if choice.name == "fused":
        order = [halves.BACKEND, fused.BACKEND] if choice.halves else [fused.BACKEND, halves.BACKEND]
        return [fused.PAIR, *order, streaming.BACKEND]
    return [halves.BACKEND, streaming.BACKEND]


def run(request: Request) -> list[torch.Tensor]:
    """[LSE, *LSE at each ratio] of ``request`` from the first of its :func:`backends` that is on for the loss,
    accepts it and does not decline it at run time; a backend that may fail and does is off for that loss from then
    on (one warning) and the next one runs."""
    health = request.health
    for backend in backends(request):
        if not health.usable(backend.name) or not backend.accepts(request):
            continue
        try:
            out = backend.run(request)
        except Exception as error:
            if not backend.may_fail:
                raise
            health.fail(backend.name, error)
            continue
        if out is not None:
            return out
    raise AssertionError(f"no kernel served {request.choice}")  # streaming accepts every request
