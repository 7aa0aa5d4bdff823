"""The backend of a per-pair temperature from a network of both rows (AMCL's per-pair forms): the negatives' LSE
computed chunk by chunk without any [A, M] tensor kept.

With L2-normalised anchors ``a`` [A, D] and candidates ``c`` [M, D], first-layer halves ``pa`` [A, H] and ``pb``
[M, H] of the temperature network, its output weights ``w`` [H] and bias ``w0``
(:class:`~cl_plugins.kernels.contract.PairNetwork`)::

    s_ij   = a_i . c_j
    u_ij   = w . relu(pa_i + pb_j) + w0
    tau_ij = eta + iota * sigmoid(u_ij)     (eta: floor, iota: span, the paper's roles)
    l_ij   = s_ij / tau_ij - beta * ((d'/2) log tau_ij + 1 / tau_ij)
    out_i  = log sum_{j not excluded} exp(l_ij)

Forward walks over row chunks and keeps only ``out`` (plus diagnostics); backward recomputes
each chunk and accumulates the gradients, like flash attention. Peak memory is one chunk of
[rows, M, H] hidden activations (``chunk_elements``) plus O((A + M)(D + H)).
"""

from __future__ import annotations

import torch

from .contract import Request
from .negatives import NonNegatives

NEG_INF = float("-inf")


def _chunk(a, c, pa, pb, w, w0, exclude, start, stop, consts, labels=None, kept=None):  # type: ignore[no-untyped-def]
    """Similarities, relu'd hidden layer, sigmoid, temperatures and masked logits of rows [start, stop);
    ``labels`` (:class:`~cl_plugins.labels.BlockLabels`): a candidate of the anchor's label is no term, except
    the column ``kept`` [A] of its row (the positive of a loss that is not decoupled; None: none kept)."""
    floor, span, beta, half_d = consts
    s = a[start:stop] @ c.T
    hidden = (pa[start:stop, None, :] + pb[None]).relu_()  # [r, M, H], the only large temporary
    u = hidden @ w + w0
    sig = torch.sigmoid(u)
    tau = floor + span * sig
    logits = s / tau - beta * (half_d * torch.log(tau) + 1.0 / tau)
    NonNegatives.of(exclude, labels, start, logits, kept=kept).fill_(logits, NEG_INF)
    return s, hidden, sig, tau, logits


class _PairNetworkLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, pa, pb, w, w0, exclude, consts, chunk_elements,  # type: ignore[override]
                labels=None, kept=None):
        rows = max(1, chunk_elements // max(1, c.shape[0] * pa.shape[1]))
        out = a.new_empty(a.shape[0])
        tau_sum = a.new_zeros(())
        tau_min = a.new_full((), float("inf"))
        tau_max = a.new_full((), float("-inf"))
        for start in range(0, a.shape[0], rows):
            stop = start + rows
            _, _, _, tau, logits = _chunk(a, c, pa, pb, w, w0, exclude, start, stop, consts, labels, kept)
            out[start:stop] = torch.logsumexp(logits, dim=1)
            keep = torch.isfinite(logits)
            tau_sum += torch.where(keep, tau, 0.0).sum()
            tau_min = torch.minimum(tau_min, torch.where(keep, tau, torch.inf).amin())
            tau_max = torch.maximum(tau_max, torch.where(keep, tau, -torch.inf).amax())
        ctx.save_for_backward(a, c, pa, pb, w, w0, exclude, out)
        ctx.consts, ctx.rows, ctx.labels, ctx.kept = consts, rows, labels, kept
        stats = torch.stack([tau_sum, tau_min, tau_max])
        ctx.mark_non_differentiable(stats)
        return out, stats

    @staticmethod
    def backward(ctx, grad, _):  # type: ignore[override]
        a, c, pa, pb, w, w0, exclude, out = ctx.saved_tensors
        _, span, beta, half_d = ctx.consts
        grads = [torch.zeros_like(t) for t in (a, c, pa, pb, w, w0)]
        g_a, g_c, g_pa, g_pb, g_w, g_w0 = grads
        for start in range(0, a.shape[0], ctx.rows):
            stop = start + ctx.rows
            s, hidden, sig, tau, logits = _chunk(a, c, pa, pb, w, w0, exclude, start, stop, ctx.consts, ctx.labels,
                                                 ctx.kept)  # fmt: skip
            q = torch.exp(logits - out[start:stop, None]).mul_(grad[start:stop, None])  # 0 where excluded
            g_s = q / tau
            # d l / d tau = -s / tau^2 - beta * (d'/2 / tau - 1 / tau^2)
            g_u = q.mul_(-s / tau**2 - beta * (half_d / tau - 1.0 / tau**2)).mul_(span * sig * (1 - sig))
            g_w0 += g_u.sum()
            g_w += torch.einsum("rmh,rm->h", hidden, g_u)
            # relu'(x) is 1 exactly where relu(x) > 0: turn the buffer into that mask, in place
            g_hidden = hidden.sign_().mul_(g_u[..., None]).mul_(w)
            g_pa[start:stop] = g_hidden.sum(dim=1)
            g_pb += g_hidden.sum(dim=0)
            g_a[start:stop] = g_s @ c
            g_c += g_s.T @ a[start:stop]
        return g_a, g_c, g_pa, g_pb, g_w, g_w0, None, None, None, None, None


class PairNetworkKernel:
    """The one backend of a request with a :class:`~cl_plugins.kernels.contract.PairNetwork`: whatever the loss's
    ``kernel=``, these logits have no other kernel.

    Shapes:
        anchors: [A, D]; candidates: [M, D]; the network's pa: [A, H], pb: [M, H], w: [H], w0: []; exclude: [A, k]
        or None -> [LSE [A]]; [sum, min, max] of the terms' tau to the network's ``on_stats``.
    """

    name = "pair network"
    may_fail = False

    def accepts(self, request: Request) -> bool:
        return request.network is not None

    def run(self, request: Request) -> list[torch.Tensor]:
        net = request.network
        assert net is not None
        consts = (net.floor, net.span, net.beta, 0.5 * net.proj_dim)
        lse, stats = _PairNetworkLSE.apply(request.anchors, request.candidates, net.pa, net.pb, net.w, net.w0,
                                           request.exclude, consts, net.chunk_elements, request.labels, net.kept)
        if net.on_stats is not None:
            net.on_stats(*stats.unbind(0))
        return [lse]


BACKEND = PairNetworkKernel()
