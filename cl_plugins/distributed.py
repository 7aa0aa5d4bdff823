"""Small, explicit distributed helpers (gather with gradient, reductions).

All helpers are no-ops when ``torch.distributed`` is not initialised or the world has one
process, so single-process code pays nothing. They work underneath Hugging Face Accelerate,
which initialises a plain ``torch.distributed`` process group.

Gradient convention
-------------------
:func:`gather_with_grad` sums the incoming gradients of all ranks in backward (the
``GatherLayer`` convention of SimCLR, open_clip and lightly). A loss built from local anchors
against gathered candidates and scaled by the world size (see
:meth:`cl_plugins.base.ContrastiveLoss.forward`) then gives, after DDP's gradient averaging,
exactly the gradient of the single-process loss over the global batch.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = [
    "is_distributed",
    "world_size",
    "rank",
    "gather_with_grad",
    "gather_no_grad",
    "all_reduce_sum",
    "scale_gradient",
    "check_agreement",
    "ProcessesDisagree",
]


class ProcessesDisagree(ValueError):
    """Raised on every rank at once when the ranks' calls disagree, or when one rank refused its own input (so no
    rank may then send the refusal marker: every one is already past the first gather)."""


def is_distributed() -> bool:
    """True when a process group with more than one process is active."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


_DTYPES = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3, torch.float64: 4}
_AGREED = ("width", "dtype", "call (strategy, layout, queue or hard negatives)")


def _gather_sizes(x: torch.Tensor, tag: int = 0) -> list[int]:
    """Every rank's row count, from one small all-gather that also carries what the ranks must agree on: the
    width, the dtype and ``tag`` (which call this is: strategy, layout, queue). A disagreement raises the same
    ValueError on every rank, before the gather it would abort (gloo) or hang (a different sequence of
    collectives) in."""
    width = x.shape[1] if x.dim() == 2 else -x.dim()
    rows = _exchange([x.shape[0], width, _DTYPES.get(x.dtype, 0), tag], x.device)
    for column, what in enumerate(_AGREED, start=1):
        values = [r[column] for r in rows]
        if len(set(values)) > 1:
            shown = [_shown(what, v) for v in values]
            raise ProcessesDisagree(f"the processes disagree on the {what}: {shown} on ranks 0..{len(rows) - 1}; every "
                             "process must call the loss with the same embedding width, dtype, strategy and layout")
    return [r[0] for r in rows]


#: the tag of a rank that refused its own input: it joins the first gather only to stop the others with it
REFUSED = -1


def _exchange(descriptor: list[int], device: torch.device) -> list[list[int]]:
    """Every rank's descriptor (one small all-gather); a rank that refused its input makes every rank raise."""
    mine = torch.tensor(descriptor, device=device, dtype=torch.long)
    table = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(table, mine)
    rows = [t.tolist() for t in table]
    refused = [r for r, row in enumerate(rows) if row[3] == REFUSED]
    if refused and descriptor[3] != REFUSED:
        raise ProcessesDisagree(
            f"rank {refused[0]} refused its input (its own error says why); every process stops with it"
        )
    return rows


def check_agreement(x: torch.Tensor, tag: int = 0) -> None:
    """The agreement check of :func:`gather_with_grad` alone (one all-gather of four integers), for a call that
    gathers nothing (``layout="queue"``): it is that call's first collective, so a refusal reaches it."""
    if is_distributed():
        _gather_sizes(x, tag)


def refuse_on_every_rank() -> None:
    """Called by a rank whose input failed a local check, in place of the first gather the others are waiting
    in: they raise too (a one-line error) instead of waiting until the process-group timeout."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    _exchange([0, 0, 0, REFUSED], device)


def _shown(what: str, value: int) -> str | int:
    if what == "dtype":
        return next((str(d).removeprefix("torch.") for d, code in _DTYPES.items() if code == value), "other")
    if what == "width" and value < 0:
        return f"{-value}-D tensor"
    return value


def _gather_padded(x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    # all_gather needs equal shapes (gloo raises, NCCL may hang): pad to the largest
    # local batch, gather, then drop the padding rows again.
    longest = max(sizes)
    if x.shape[0] < longest:
        pad = x.new_zeros((longest - x.shape[0], *x.shape[1:]))
        x = torch.cat([x, pad], dim=0)
    parts = [torch.empty_like(x) for _ in sizes]
    dist.all_gather(parts, x.contiguous())
    return torch.cat([p[:n] for p, n in zip(parts, sizes)], dim=0)


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, sizes: list[int], start: int) -> torch.Tensor:  # type: ignore[override]
        ctx.start, ctx.stop = start, start + x.shape[0]
        return _gather_padded(x, sizes)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.start : ctx.stop], None, None


def gather_with_grad(x: torch.Tensor, tag: int = 0) -> tuple[torch.Tensor, int]:
    """Concatenate ``x`` [n_r, ...] of every rank along dim 0, keeping the autograd graph.

    Ranks may hold different ``n_r``. Returns the gathered tensor [sum_r n_r, ...] and the
    row offset of this rank's rows inside it. Backward sums the gradient of every rank and
    returns this rank's slice. Ranks that disagree on the width, dtype or ``tag`` (the caller's identity of
    the call) all raise the same ValueError instead of aborting or hanging.

    Example::

        z_all, offset = gather_with_grad(z)       # z_all[offset : offset + len(z)] is z
    """
    if not is_distributed():
        return x, 0
    sizes = _gather_sizes(x, tag)
    start = sum(sizes[: dist.get_rank()])
    return _GatherWithGrad.apply(x, sizes, start), start


def gather_no_grad(x: torch.Tensor, tag: int = 0) -> torch.Tensor:
    """Concatenate ``x`` of every rank along dim 0 without gradient (e.g. queue keys); agreement as
    :func:`gather_with_grad`."""
    if not is_distributed():
        return x
    with torch.no_grad():
        return _gather_padded(x.detach(), _gather_sizes(x, tag))


def all_reduce_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum a (detached) tensor over all ranks; returns a new tensor."""
    if not is_distributed():
        return x
    out = x.detach().clone().contiguous()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, factor: float) -> torch.Tensor:  # type: ignore[override]
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        return grad * ctx.factor, None


def scale_gradient(x: torch.Tensor, factor: float) -> torch.Tensor:
    """``x`` unchanged in value, its gradient multiplied by ``factor`` in backward.

    Example: a host codebase that gathers embeddings without gradient trains at 1/W of the
    global-batch gradient; ``scale_gradient(loss, 1 / world_size())`` reproduces that scale.
    """
    if factor == 1.0:
        return x
    return _ScaleGradient.apply(x, float(factor))
