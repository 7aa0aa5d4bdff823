"""Fast path for scalar temperatures: logits that are never materialised twice.

For a scalar temperature the logits of a block are ``(a / tau) @ c.T`` with L2-normalised
anchors ``a`` and candidates ``c``. :class:`cl_plugins.extension.LazyLogits` represents them without computing
them; ``sim / tau`` on it only rescales. :class:`NegativeLSE` then computes the log-sum-exp
over each anchor's negatives in one [A, M] buffer: matmul, mask, row max, ``exp`` in place,
row sum. The buffer holds the softmax numerators that backward needs and is overwritten in
place there, so the whole loss stores one [A, M] tensor (F.cross_entropy keeps several) and
makes three passes over it forward and one backward; bounded logits (``streaming.sums_fit``) skip the row maximum.

Extra no-grad log-sum-exps at other scales (dual temperature's tau_beta) reuse the same
buffer before it is overwritten.
"""

from __future__ import annotations

import math

import torch

from . import streaming
from .autocast import autocast_off
from .compiled import maybe_compiled
from .contract import Request
from .negatives import NonNegatives
from .streaming import NegativeStats
from .tiles import chunk_forward

NEG_INF = float("-inf")
# elements of one row chunk (1 MiB of float32): small enough to stay in a core's cache
CHUNK_ELEMENTS = 1 << 18


class NegativeLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, plan):  # type: ignore[override]
        with autocast_off(a.device.type):
            return NegativeLSE._forward(ctx, a, c, plan)

    @staticmethod
    def _forward(ctx, a, c, plan):  # type: ignore[no-untyped-def]
        exclude_cols, logit_map, ratios = plan.exclude, plan.logit_map, plan.ratios
        x = a @ c.T
        n_rows = x.shape[0]
        sums: list[torch.Tensor] = []
        maxima: list[torch.Tensor] = []  # none where the plan is bounded: it sums without a maximum (m = 0)
        extras: list[list[torch.Tensor]] = [[] for _ in ratios]
        stats = NegativeStats(x) if logit_map is not None and logit_map.reports else None
        for start, rows, chunk in _chunks(x):
            if plan.tile_form is not None:  # compiled: map, masks, exp, sums and statistics in one loop
                sums.append(_compiled_chunk(chunk, start, plan, stats))
                continue
            # the chunk's non-negatives, the label mask from the two label vectors while the chunk is in cache
            skip = NonNegatives.of(exclude_cols, plan.labels, start, chunk)
            if plan.closed:  # exp(phi) and exp(phi) phi' in closed form: no maximum, no exp
                e, factor = _chunk_exp(chunk, rows, skip, logit_map, plan.bias_cols, plan.bias)
                sums.append(e.sum(dim=1, keepdim=True))
                chunk.copy_(factor)  # the buffer keeps exp(l - m) * phi'(x) with m = 0, all that backward needs
                continue
            xc, derivative = _chunk_logits(chunk, rows, skip, logit_map, plan.bias_cols, plan.bias, stats)
            # finite: every row keeps at least one negative
            mc = None if plan.bounded else xc.amax(dim=1, keepdim=True)
            for out, r in zip(extras, ratios):
                out.append(_scaled_lse(xc, mc, r))
            if mc is not None:
                maxima.append(mc)
                xc.sub_(mc)
            sums.append(xc.exp_().sum(dim=1, keepdim=True))
            if derivative is not None:  # the buffer keeps exp(l - m) * phi'(x), all that backward needs
                torch.mul(xc, derivative, out=chunk)
        s, m = _joined(sums, x, (n_rows, 1)), (_joined(maxima, x, (n_rows, 1)) if maxima else None)
        extras = [_joined(parts, x, (n_rows,)) for parts in extras]  # type: ignore[misc]
        if stats is not None:  # an output: the caller hands it to on_stats (no side effect in here)
            extras.append(torch.stack(stats.values))
        ctx.save_for_backward(a, c, x, s)
        ctx.consumed = False
        ctx.mark_non_differentiable(*extras)
        return (s.log() if m is None else m + s.log()).squeeze(1), *extras

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        _refuse_second_backward(ctx)
        a, c, x, s = ctx.saved_tensors
        with autocast_off(a.device.type):  # also when backward runs under autocast
            g = x.mul_(grad[:, None] / s)  # softmax over the negatives, times the incoming gradient
            grad_a = g @ c if ctx.needs_input_grad[0] else None
            grad_c = g.T @ a if ctx.needs_input_grad[1] else None
        return grad_a, grad_c, None


def _chunks(x: torch.Tensor) -> list[tuple[int, slice, torch.Tensor]]:
    """(first row, rows, view) of each row chunk of the buffer ``x``: eagerly, chunks that stay in a core's cache
    (max, exp and sums then cost about one pass over x); compiled, the whole buffer, which the compiler fuses itself
    (each in-place pass over a chunk would become a copy of the whole buffer there: N 4,096 in CLIP's layout took 8
    times eager's time). A buffer of one chunk is its own view."""
    n_rows = x.shape[0]
    step = max(1, n_rows if torch.compiler.is_compiling() else CHUNK_ELEMENTS // max(1, x.shape[1]))
    if step >= n_rows:
        return [(0, slice(0, n_rows), x)] if n_rows else []
    return [(start, slice(start, start + step), x[start : start + step]) for start in range(0, n_rows, step)]


def _joined(parts: list[torch.Tensor], like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The row chunks' results as one tensor: the one chunk's itself (no copy), or zeros of ``shape`` for no rows."""
    if len(parts) == 1:
        return parts[0]
    return torch.cat(parts) if parts else like.new_zeros(shape)


def _compiled_chunk(x: torch.Tensor, start: int, plan: streaming._Plan, stats: NegativeStats | None) -> torch.Tensor:
    """Row sums [R, 1] of the chunk ``x`` (rows ``start:``, a view of the buffer, left holding exp(l) phi') through
    :func:`cl_plugins.kernels.tiles.chunk_forward`; the excluded columns go in as NaN, the labels as they are."""
    NonNegatives.of(plan.exclude, plan.labels, start, x, with_same=False).fill_(x, math.nan)
    rows = slice(start, start + x.shape[0])
    labels = (None, None) if plan.labels is None else (plan.labels.anchor[rows], plan.labels.candidate)
    assert plan.tile_form is not None
    sums, summary = maybe_compiled(chunk_forward, True, plan.health)(x, *labels, *plan.tile_form)
    if stats is not None and summary is not None:
        stats.merge(*summary)
    return sums[:, None]


def _scaled_lse(x: torch.Tensor, m: torch.Tensor | None, r: float) -> torch.Tensor:
    """LSE of each row of ``r * x`` given its maximum ``m`` [R, 1] (None: bounded, summed as they are)."""
    if m is None:
        return torch.mul(x, r).exp_().sum(dim=1).log_()
    return r * m.squeeze(1) + torch.sub(x, m).mul_(r).exp_().sum(dim=1).log_()


def _chunk_exp(x, rows, skip, logit_map, bias_cols, bias):  # type: ignore[no-untyped-def]
    """(exp of the chunk's logits, exp(l) phi') from the map's closed form, both 0 at the non-negatives ``skip``."""
    out = logit_map.exp_form(x, True)
    for t in out:
        if bias_cols is not None:  # exp(l + bias) = exp(l) * e^bias at each row's biased column
            cols = bias_cols[rows, None]
            t.scatter_(1, cols, t.gather(1, cols) * math.exp(bias))
        skip.fill_(t, 0.0)
    return out


def _chunk_logits(x, rows, skip, logit_map, bias_cols, bias, stats):  # type: ignore[no-untyped-def]
    """(logits of the chunk ``x`` with -inf at its non-negatives ``skip``, the map's derivative or None); without a
    map the logits are ``x`` itself, masked in place."""
    if logit_map is None:
        logits, derivative = x, None
    else:
        logits, derivative, stat = logit_map.evaluate_all(x)
        if stats is not None:
            stats.add(stat, skip)
    if bias_cols is not None:
        logits.scatter_add_(1, bias_cols[rows, None], logits.new_full((x.shape[0], 1), bias))
    return skip.fill_(logits, NEG_INF), derivative


class PairLSE(torch.autograd.Function):
    """Both directions' negative LSEs of a block bonded with its transpose (CLIP's) from one [A, A] buffer of
    bounded logits: exp(l) once, summed along its rows (direction 1) and its columns (direction 2); backward
    G = exp(l) (g_i / s_i + g'_j / s'_j), dA = G C, dC = G^T A: two products where the directions apart take four
    forward and four backward."""

    @staticmethod
    def forward(ctx, a, c, plan):  # type: ignore[override]
        with autocast_off(a.device.type):
            x = a @ c.T
            n_rows, rows_sums, cols_sum = x.shape[0], [], None
            for start, _, chunk in _chunks(x):
                e = NonNegatives.of(plan.exclude, plan.labels, start, chunk).fill_(chunk, NEG_INF).exp_()
                rows_sums.append(e.sum(dim=1))
                cols_sum = e.sum(dim=0) if cols_sum is None else cols_sum.add_(e.sum(dim=0))
            rows_sum = _joined(rows_sums, x, (n_rows,))
            cols_sum = x.new_zeros(x.shape[1]) if cols_sum is None else cols_sum
        ctx.save_for_backward(a, c, x, rows_sum, cols_sum)
        ctx.consumed = False
        return rows_sum.log(), cols_sum.log()

    @staticmethod
    def backward(ctx, grad_rows, grad_cols):  # type: ignore[override]
        _refuse_second_backward(ctx)
        a, c, e, rows_sum, cols_sum = ctx.saved_tensors
        with autocast_off(a.device.type):
            g = e.mul_((grad_rows / rows_sum)[:, None] + (grad_cols / cols_sum)[None, :])
            grad_a = g @ c if ctx.needs_input_grad[0] else None
            grad_c = g.T @ a if ctx.needs_input_grad[1] else None
        return grad_a, grad_c, None


def _refuse_second_backward(ctx: torch.autograd.function.FunctionCtx) -> None:
    """The one buffer is overwritten by the backward: neither a second derivative nor a second backward."""
    if torch.is_grad_enabled():  # backward with create_graph=True: this backward is not differentiable
        raise RuntimeError(
            "the fused loss path has no second derivative (create_graph=True, e.g. a gradient penalty); "
            "build the loss with kernel='dense' for that"
        )
    if ctx.consumed:
        raise RuntimeError(
            "the fused loss path frees its buffer in backward and cannot be differentiated twice "
            "(retain_graph=True); build the loss with kernel='dense' for that"
        )
    ctx.consumed = True


class FusedPair:
    """The one-buffer backend of a block bonded with its transpose (CLIP's two directions in one process) at a
    scalar temperature with bounded logits: the first direction to ask computes both LSEs (:class:`PairLSE`) and
    leaves the second's in the bond (``slot["fused"]``); declined otherwise (each direction then runs apart)."""

    name = "fused"
    may_fail = False

    def accepts(self, request: Request) -> bool:
        plain = request.bond is not None and request.logit_map is None and request.bias_cols is None
        return plain and not request.ratios and request.anchors.shape == request.candidates.shape

    def run(self, request: Request) -> list[torch.Tensor] | None:
        slot = request.bond.slot  # type: ignore[union-attr]
        left = slot.pop(self.name, None)
        if left is not None:  # the second to ask: its transpose's leftover, else on its own
            first, lse = left
            return [lse] if first.transposed_by(request) else None
        anchors = request.scaled_anchors()
        with autocast_off(anchors.device.type):
            plan = streaming.make_plan(request, anchors)
        if not plan.bounded:  # a maximum per row and per column would take two buffers: apart, as before
            return None
        lse, lse_columns = PairLSE.apply(anchors, request.candidates_beside(anchors), plan)
        slot[self.name] = (request, lse_columns)
        return [lse]


class Fused:
    """The one-buffer backend: a scalar temperature or a per-pair map with an explicit derivative."""

    name = "fused"
    may_fail = False

    def accepts(self, request: Request) -> bool:
        return request.fusable

    def run(self, request: Request) -> list[torch.Tensor]:
        anchors = request.scaled_anchors()
        with autocast_off(anchors.device.type):
            plan = streaming.make_plan(request, anchors)
        return request.reported(NegativeLSE.apply(anchors, request.candidates_beside(anchors), plan))


BACKEND = Fused()
PAIR = FusedPair()
