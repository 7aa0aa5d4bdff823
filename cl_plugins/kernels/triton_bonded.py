"""CLIP's two directions on the Triton kernels, both gradients from one backward.

Where a loss's two blocks are each other's transpose (``layout="cross_view", symmetric=True`` in one process: the
anchors of one are the candidates of the other, each positive on the diagonal, the same labels on both sides) and
run the same map at the same scale, direction 2's logits are direction 1's transposed, and so are its negatives.
The LSEs of both come from two forward launches (the rows', then the columns': one product each); the gradients of
both from one backward that recomputes each block once,

    G = (exp(l - LSE_i) g_i + exp(l - LSE'_j) g'_j) phi'(x),   dA = G B,   dB = G^T A,

four products where the two directions apart take eight (:func:`~cl_plugins.kernels.triton_kernels._gradient`'s
``TWO``).

:class:`TritonPair` serves a block with a :class:`~cl_plugins.kernels.contract.Bond` (the layout bonds both
directions): the first to ask for its LSE computes both and leaves its partner's in the bond, which the partner
takes if it asks with the same map and scale; else the partner runs on its own, and the columns' LSE, never used,
adds nothing to the backward.

A block that is its own transpose (SimCLR's anchors against themselves in one process, with symmetric exclusions
and labels: :func:`~cl_plugins.kernels.halves.mirrored`) needs no second forward: its columns' LSE is its
rows'. With H = G + G^T its gradient is dU = s H U for the logits s U U^T, and one backward kernel gives H U: three
products where the anchors and candidates apart take five (:func:`triton_self_negative_lse`, the Triton form of the
CPU's block by halves), :class:`TritonSelf`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from .autocast import autocast_off
from .contract import LogitMap, Request
from .halves import mirrored
from .streaming import refuse_second_derivative
from .triton_lse import Launch, Triton, backward_launch, forward_lse, streamed_gradients, supports

if TYPE_CHECKING:
    from ..labels import BlockLabels

#: the name the three Triton backends share: one that fails turns all of them off for its loss
NAME = Triton.name


def _transposed(labels: BlockLabels | None) -> BlockLabels | None:
    return None if labels is None else replace(labels, anchor=labels.candidate, candidate=labels.anchor)


class _TritonPairLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, request):  # type: ignore[override]
        launch, stat = Launch.of(request), request.reports
        with autocast_off(a.device.type), torch.no_grad():
            lse, _, stats = forward_lse(a, c, launch, stat=stat)
            lse2, _, stats2 = forward_lse(c, a, launch.transposed(), stat=stat)
        ctx.save_for_backward(a, c, lse, lse2, *launch.tensors)
        ctx.values, ctx.request = launch.values, request
        ctx.set_materialize_grads(False)  # a partner that took no columns' LSE: no second term in the backward
        # both directions' statistics as outputs, for the callers' on_stats (no side effect in here)
        reported = [stats, stats2] if stat else []
        ctx.mark_non_differentiable(*reported)
        return (lse.to(a.dtype), lse2.to(c.dtype), *reported)

    @staticmethod
    def backward(ctx, grad, grad2, *unused):  # type: ignore[override]
        refuse_second_derivative("Triton")
        a, c, lse, lse2, *tensors = ctx.saved_tensors
        g = torch.zeros_like(lse) if grad is None else grad.float().contiguous()
        columns = None if grad2 is None else (lse2, grad2.float().contiguous())
        try:
            grad_a, grad_c = backward_launch(a, c, Launch(tuple(tensors), ctx.values), (lse, g), columns)
        except Exception as error:  # noqa: BLE001 - a backward kernel that cannot compile here: streamed, exact
            ctx.request.health.fail(NAME, error)
            transposed = None if columns is None else (_transposed(ctx.request.labels), columns[1])
            grad_a, grad_c = streamed_gradients(a, c, g, ctx.request, transposed=transposed)
        return grad_a.to(a.dtype), grad_c.to(c.dtype), None


class _TritonSelfLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, scale, request):  # type: ignore[override]
        launch = Launch.of(request)
        with autocast_off(u.device.type), torch.no_grad():
            a = u * scale.to(u.dtype)
            lse, _, stats = forward_lse(a, u, launch, stat=request.reports)
        ctx.save_for_backward(a, u, lse, scale, *launch.tensors)
        ctx.values, ctx.request = launch.values, request
        reported = [stats] if request.reports else []  # for Request.reported, outside this function
        ctx.mark_non_differentiable(*reported)
        return (lse.to(u.dtype), *reported)

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        refuse_second_derivative("Triton")
        a, u, lse, scale, *tensors = ctx.saved_tensors
        g = grad.float().contiguous()
        try:  # H U from the anchors' kernel alone: the rows' and the columns' terms are the same vectors
            hu, hu_u = backward_launch(a, u, Launch(tuple(tensors), ctx.values), (lse, g), (lse, g), candidates=False)
        except Exception as error:  # noqa: BLE001 - a backward kernel that cannot compile here: streamed, exact
            ctx.request.health.fail(NAME, error)
            grad_a, grad_c = streamed_gradients(a, u, g, ctx.request)
            hu = grad_a + grad_c / scale.float()  # G U + G^T (s U) / s = (G + G^T) U
            hu_u = (hu * u.float()).sum(dim=1)
        # dL/dU = s H U; dL/ds = sum_ij G_ij u_i . u_j = (H U) . U / 2 (H's two halves count each pair twice)
        grad_scale = hu_u.sum() / 2 if ctx.needs_input_grad[1] else None
        return (hu * scale.float()).to(u.dtype), grad_scale, None


class TritonSelf:
    """The Triton backend of a block of anchors against themselves (SimCLR's, one process) whose non-negatives are
    symmetric: one forward and one backward kernel.

    Shapes:
        anchors = candidates: [A, D] unit rows; scale: a float or a 0-dim tensor (a learned 1 / tau gets its
        gradient); exclude: [A, k]. Returns [LSE [A]].
    """

    name = NAME
    may_fail = True

    def accepts(self, request: Request) -> bool:
        return request.own and not request.ratios and supports(request, request.anchors.dtype)

    def run(self, request: Request) -> list[torch.Tensor] | None:
        if not mirrored(request):
            return None
        return request.reported(_TritonSelfLSE.apply(request.candidates, request.scale_tensor(), request))


def _same_map(first: LogitMap | None, second: LogitMap | None) -> bool:
    if first is None or second is None:
        return first is second
    return first.triton is not None and first.triton == second.triton


def _partners(first: Request, second: Request) -> bool:
    """``second``'s block is ``first``'s transposed, at the same scale under the same map."""
    return first.transposed_by(second) and _same_map(first.logit_map, second.logit_map)


class TritonPair:
    """The Triton backend of a block bonded with its transpose (CLIP's two directions in one process): the first
    of the two to ask computes both LSEs and leaves the second's in the bond (the bond's ``slot["triton"]``), whose
    gradients then come from the first's backward.

    Shapes:
        anchors: [A, D], candidates: [A, D]; exclude: [A, k], the same columns for both directions (the diagonal).
        Returns [LSE [A]].
    """

    name = NAME
    may_fail = True

    def accepts(self, request: Request) -> bool:
        plain = request.bond is not None and request.bias_cols is None and not request.ratios
        return plain and request.anchors.shape == request.candidates.shape and supports(request, request.anchors.dtype)

    def run(self, request: Request) -> list[torch.Tensor] | None:
        slot = request.bond.slot  # type: ignore[union-attr]
        left = slot.pop(NAME, None)
        if left is not None:  # the second to ask: the leftover if it is its transpose's, else on its own
            first, lse, stats = left
            if not _partners(first, request):
                return None
            if stats is not None and request.reports:  # the columns' statistic, left by the partner
                request.logit_map.on_stats(*stats.unbind(0))  # type: ignore[union-attr]
            return [lse]
        anchors = request.scaled_anchors()
        lse, lse2, *stats = _TritonPairLSE.apply(anchors, request.candidates_beside(anchors), request)
        slot[NAME] = (request, lse2, stats[1] if stats else None)
        return request.reported((lse, stats[0]) if stats else (lse,))


SELF = TritonSelf()
PAIR = TritonPair()
