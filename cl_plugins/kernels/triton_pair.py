"""CLIP's two directions on the Triton kernels, both gradients from one backward.

Where a loss's two blocks are each other's transpose (``layout="cross_view", symmetric=True`` in one process: the
anchors of one are the candidates of the other, each positive on the diagonal, the same labels on both sides) and
run the same map at the same scale, direction 2's logits are direction 1's transposed, and so are its negatives.
The LSEs of both come from two forward launches (the rows', then the columns': one product each); the gradients of
both from one backward that recomputes each block once,

    G = (exp(l - LSE_i) g_i + exp(l - LSE'_j) g'_j) phi'(x),   dA = G B,   dB = G^T A,

four products where the two directions apart take eight (:func:`~cl_plugins.kernels.triton_lse._gradient`'s
``TWO``).

:class:`Mirror` is what the layout hands both blocks (:class:`~cl_plugins.layouts.PairBlock`): the first to ask for
its LSE on the Triton kernel computes both and leaves its partner's, which the partner takes if it asks with the
same map and scale; else the partner computes its own direction, and the columns' LSE, never used, adds nothing to
the backward.

A block that is its own transpose (SimCLR's anchors against themselves in one process, with symmetric exclusions
and labels: :func:`~cl_plugins.kernels.symmetric.is_symmetric`) needs no second forward: its columns' LSE is its
rows'. With H = G + G^T its gradient is dU = s H U for the logits s U U^T, and one backward kernel gives H U: three
products where the anchors and candidates apart take five (:func:`triton_self_negative_lse`, the Triton form of the
CPU's block by halves).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from .streaming import refuse_second_derivative
from .symmetric import is_symmetric
from .triton_lse import _fail, _Spec, backward_launch, forward_lse, prepare, streamed_gradients, supports

if TYPE_CHECKING:
    from ..labels import BlockLabels
    from .lazy import LazyLogits, LogitMap


def _transposed(labels: BlockLabels | None) -> BlockLabels | None:
    return None if labels is None else replace(labels, anchor=labels.candidate, candidate=labels.anchor)


class _TritonPairLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, plan):  # type: ignore[override]
        exclude_cols, labels, logit_map, out = plan
        with torch.autocast(device_type=a.device.type, enabled=False), torch.no_grad():
            a_in, c_in, spec = prepare(a, c, exclude_cols, labels, logit_map)
            lse, _, stats = forward_lse(a_in, c_in, spec)
            columns = _Spec(c_in, a_in, exclude_cols, _transposed(labels), None, 0.0, logit_map, spec.config)
            lse2, _, out["stats"] = forward_lse(c_in, a_in, columns)
            if stats is not None:
                logit_map.on_stats(*stats)
        ctx.save_for_backward(a_in, c_in, lse, lse2)
        ctx.spec, ctx.dtypes, ctx.plan = spec, (a.dtype, c.dtype), plan
        ctx.set_materialize_grads(False)  # a partner that took no columns' LSE: no second term in the backward
        return lse.to(a.dtype), lse2.to(c.dtype)

    @staticmethod
    def backward(ctx, grad, grad2):  # type: ignore[override]
        refuse_second_derivative("Triton")
        a_in, c_in, lse, lse2 = ctx.saved_tensors
        g = torch.zeros_like(lse) if grad is None else grad.float().contiguous()
        columns = None if grad2 is None else (lse2, grad2.float().contiguous())
        try:
            grad_a, grad_c = backward_launch(a_in, c_in, ctx.spec, (lse, g), columns)
        except Exception as error:  # noqa: BLE001 - a backward kernel that cannot compile here: streamed, exact
            _fail(error)
            exclude_cols, labels, logit_map, _ = ctx.plan
            transposed = None if columns is None else (_transposed(labels), columns[1])
            grad_a, grad_c = streamed_gradients(a_in, c_in, g, exclude_cols, labels, logit_map, transposed=transposed)
        return grad_a.to(ctx.dtypes[0]), grad_c.to(ctx.dtypes[1]), None


def triton_pair_negative_lse(
    anchors: torch.Tensor,
    candidates: torch.Tensor,
    exclude_cols: torch.Tensor | None,
    *,
    logit_map: LogitMap | None = None,
    labels: BlockLabels | None = None,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...] | None] | None:
    """(the rows' LSE [A], the columns' LSE [A], the columns' statistic or None) of a square block that is also its
    transpose's, or None where the Triton kernels do not apply (:func:`~cl_plugins.kernels.triton_lse.supports`)
    or a launch failed (warned about once).

    Shapes:
        anchors: [A, D] (pre-scaled by 1/tau for a scalar temperature); candidates: [A, D]; exclude_cols: [A, k],
        the same columns for both directions (the diagonal: each row's positive).
    """
    if not supports(logit_map, (), anchors.dtype) or anchors.shape != candidates.shape:
        return None
    out: dict[str, Any] = {}
    try:
        lse, lse2 = _TritonPairLSE.apply(anchors, candidates, (exclude_cols, labels, logit_map, out))
    except Exception as error:  # noqa: BLE001 - a kernel that cannot compile here: the streaming kernel is exact
        _fail(error)
        return None
    return lse, lse2, out["stats"]


class _TritonSelfLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, scale, plan):  # type: ignore[override]
        exclude_cols, labels, logit_map = plan
        with torch.autocast(device_type=u.device.type, enabled=False), torch.no_grad():
            a_in, u_in, spec = prepare(u * scale.to(u.dtype), u, exclude_cols, labels, logit_map)
            lse, _, stats = forward_lse(a_in, u_in, spec)
            if stats is not None:
                logit_map.on_stats(*stats)
        ctx.save_for_backward(a_in, u_in, lse, scale)
        ctx.spec, ctx.dtype, ctx.plan = spec, u.dtype, plan
        return lse.to(u.dtype)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        refuse_second_derivative("Triton")
        a_in, u_in, lse, scale = ctx.saved_tensors
        g = grad.float().contiguous()
        try:  # H U from the anchors' kernel alone: the rows' and the columns' terms are the same vectors
            hu = backward_launch(a_in, u_in, ctx.spec, (lse, g), (lse, g), candidates=False)[0]
        except Exception as error:  # noqa: BLE001 - a backward kernel that cannot compile here: streamed, exact
            _fail(error)
            grad_a, grad_c = streamed_gradients(a_in, u_in, g, *ctx.plan)
            hu = grad_a + grad_c / scale.float()  # G U + G^T (s U) / s = (G + G^T) U
        u = u_in.float()
        # dL/dU = s H U; dL/ds = sum_ij G_ij u_i . u_j = (H U) . U / 2 (H's two halves count each pair twice)
        grad_scale = (hu * u).sum() / 2 if ctx.needs_input_grad[1] else None
        return (hu * scale.float()).to(ctx.dtype), grad_scale, None


def triton_self_negative_lse(
    units: torch.Tensor,
    scale: float | torch.Tensor,
    exclude_cols: torch.Tensor | None,
    *,
    logit_map: LogitMap | None = None,
    labels: BlockLabels | None = None,
) -> torch.Tensor | None:
    """The negatives' LSE [A] of ``scale * units`` against ``units`` (a block of anchors against themselves) from
    one forward and one backward kernel, or None where the Triton kernels do not apply or the block's non-negatives
    are not symmetric.

    Shapes:
        units: [A, D] unit rows; scale: a float or a 0-dim tensor (a learned 1 / tau gets its gradient);
        exclude_cols: [A, k].
    """
    if not supports(logit_map, (), units.dtype) or not is_symmetric(exclude_cols, labels):
        return None
    scale_t = scale if isinstance(scale, torch.Tensor) else units.new_tensor(float(scale))
    try:
        return _TritonSelfLSE.apply(units, scale_t, (exclude_cols, labels, logit_map))
    except Exception as error:  # noqa: BLE001 - a kernel that cannot compile here: the streaming kernel is exact
        _fail(error)
        return None


def _same_scale(first: float | torch.Tensor, second: float | torch.Tensor) -> bool:
    if first is second:
        return True
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor):  # one sync: a learned or adapted tau
        return first.shape == second.shape and bool(torch.equal(first.detach(), second.detach()))
    return not isinstance(first, torch.Tensor) and not isinstance(second, torch.Tensor) and first == second


def _same_map(first: LogitMap | None, second: LogitMap | None) -> bool:
    if first is None or second is None:
        return first is second
    return first.triton is not None and first.triton == second.triton


@dataclass(eq=False)
class Mirror:
    """The bond of two blocks that are each other's transpose, made by the layout that built them; holds the
    columns' LSE the first block left for the second until the second takes it."""

    left: tuple[LazyLogits, torch.Tensor, tuple[torch.Tensor, ...] | None] | None = None

    def negative_lse(self, lazy: LazyLogits, exclude_cols: torch.Tensor | None) -> list[torch.Tensor] | None:
        """``lazy``'s negatives' LSE [A] on the Triton kernels: its partner's leftover where it is its partner's
        transpose, else both directions' (leaving the columns' for the partner); None where they do not apply."""
        if self.left is not None:  # the second to ask: the leftover if it is its transpose's, else on its own
            if not self._partners(self.left[0], lazy):
                return None
            _, lse, stats = self.left
            self.left = None
            if stats is not None and lazy.logit_map is not None and lazy.logit_map.on_stats is not None:
                lazy.logit_map.on_stats(*stats)
            return [lse]
        pair = triton_pair_negative_lse(lazy.scaled_anchors(), lazy.candidates, exclude_cols,
                                        logit_map=lazy.logit_map, labels=lazy.labels)  # fmt: skip
        if pair is None:
            return None
        self.left = (lazy, pair[1], pair[2])
        return [pair[0]]

    @staticmethod
    def _partners(first: LazyLogits, second: LazyLogits) -> bool:
        transposed = second.anchors is first.candidates and second.candidates is first.anchors
        return transposed and _same_scale(first.scale, second.scale) and _same_map(first.logit_map, second.logit_map)
