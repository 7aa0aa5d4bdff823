"""The streaming kernel for a block whose candidates are its anchors (SimCLR's [2N, 2N] within one process).

There the logits ``l_ij = phi(k u_i . u_j)`` are symmetric (``k`` = 1 / tau, or 1 under a per-pair map), and so are
the non-negatives (each row's own column and its partner's) and the same-label masks. Each off-diagonal tile
``(I, J)``, ``I < J``, is computed once for both directions: its row sums go to the rows ``I``, its column sums to
the rows ``J``. Backward, the two directions' gradients of a tile are one matrix,

    S_ij = dL/dl_ij + dL/dl_ji = e_ij phi'_ij (v_i + v_j),    v_i = g_i exp(-LSE_i),

so ``dL/du = k S u`` takes two products per unordered tile where two per ordered tile were needed: the products
and the exponentials of the whole loss are halved. The sums go without a running maximum (a maximum over the
columns would need a second pass), so this applies to bounded plans (:func:`cl_plugins.kernels.streaming.sums_fit`);
any other block runs :func:`cl_plugins.kernels.streaming.streaming_negative_lse`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .autocast import autocast_off
from .contract import Request
from .streaming import (
    _Plan,
    finish_forward,
    make_plan,
    plan_stats,
    refuse_second_derivative,
    tile_gradient,
    tile_sizes,
    tile_sums,
)

if TYPE_CHECKING:
    from ..labels import BlockLabels


def mirrored(request: Request) -> bool:
    """Whether a block of anchors against themselves is its own transpose: column j excluded from row i exactly
    when i is from j (as the layout declared it built them: ``request.mirrored``), and the anchors' labels the
    candidates'. From what the host knows: no read of the exclusions."""
    labels: BlockLabels | None = request.labels
    return request.mirrored and (labels is None or labels.mirrored)


class Halves:
    """The backend of a block of anchors against themselves by halves: bounded sums, a mirrored block."""

    name = "halves"
    may_fail = False

    def accepts(self, request: Request) -> bool:
        return request.own

    def run(self, request: Request) -> list[torch.Tensor] | None:
        """:meth:`Streaming.run <cl_plugins.kernels.streaming.Streaming.run>` of the block, each tile computed once
        for both directions; None where a tile may not stand for its transpose (unbounded sums, unsymmetric
        exclusions or labels).

        Shapes:
            anchors = candidates: [A, D] unit rows; scale: a float or a 0-dim tensor (a learnable 1 / tau gets its
            gradient). Returns ``1 + len(ratios)`` tensors [A].
        """
        units = request.candidates
        plan = make_plan(request, units)
        if not (plan.bounded and mirrored(request)):
            return None
        return request.reported(_HalvesNegativeLSE.apply(units, request.scale_tensor(), plan))


BACKEND = Halves()


def _side(plan: _Plan, device: torch.device) -> int:
    return min(tile_sizes(plan.rows, plan.cols, device))


class _HalvesNegativeLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, scale, plan):  # type: ignore[override]
        with autocast_off(u.device.type), torch.no_grad():
            a, side = u * scale.to(u.dtype), _side(plan, u.device)
            stats = plan_stats(plan, u)
            sums = [u.new_zeros(plan.rows) for _ in (1.0, *plan.ratios)]
            for r0 in range(0, plan.rows, side):
                for t0 in range(r0, plan.rows, side):
                    off = t0 != r0  # an off-diagonal tile stands for its transpose too: its columns are rows
                    parts = tile_sums(a[r0 : r0 + side], u[t0 : t0 + side], r0, t0, plan, stats, 1 + off, off)
                    for total, (rows, cols) in zip(sums, parts):
                        total[r0 : r0 + side] += rows
                        if cols is not None:
                            total[t0 : t0 + side] += cols
        return finish_forward(ctx, plan, stats, [total.log_() for total in sums], u, scale)

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        refuse_second_derivative()
        u, scale, lse = ctx.saved_tensors
        plan: _Plan = ctx.plan
        with autocast_off(u.device.type):
            a, side = u * scale.to(u.dtype), _side(plan, u.device)
            v = grad * torch.exp(-lse)  # dL/dl_ij = e_ij v_i for the row direction
            out = torch.zeros_like(u)  # S u, with S the symmetrised dL/dx
            for r0 in range(0, plan.rows, side):
                for t0 in range(r0, plan.rows, side):
                    g = tile_gradient(a[r0 : r0 + side], u[t0 : t0 + side], r0, t0, plan, v[r0 : r0 + side],
                                      v[t0 : t0 + side])  # fmt: skip
                    out[r0 : r0 + side].addmm_(g, u[t0 : t0 + side])
                    if t0 != r0:
                        out[t0 : t0 + side].addmm_(g.T, u[r0 : r0 + side])
            grad_u = out * scale.to(u.dtype) if ctx.needs_input_grad[0] else None
            # x = k u u^T: dL/dk = sum_ij G_ij u_i . u_j = (S u) . u / 2
            grad_scale = (out * u).sum().div_(2).to(scale.dtype) if ctx.needs_input_grad[1] else None
        return grad_u, grad_scale, None

