"""Streaming log-sum-exp over negatives: tiles of the [A, M] logit matrix, never the matrix itself.

The loss of every non-AMCL strategy needs, per anchor a, ``LSE_{n in neg(a)} l_an`` (see
:mod:`cl_plugins.extension`), where ``l_an = phi(x_an)`` and ``x = anchors @ candidates.T``: ``phi`` is the identity
for scalar temperatures (the anchors come pre-scaled by 1/tau) and an elementwise logit map for per-pair
strategies (DySTreSS's ``s / tau(s)``, temperature-free's ``2 atanh(s)``). The forward pass walks row blocks of
the anchors and column tiles of the candidates, keeping a running max and sum of exponentials per row (the
flash-attention / Inf-CL recurrence); backward recomputes each tile from the embeddings. Peak memory is
O((A + M) D + R T) for tiles of R rows and T columns, never O(A M). Where every logit is bounded well inside the
dtype's range (:func:`sums_fit`: a temperature above 0.015 in float32, any per-pair map of this library) the sums
go without the running maximum, whose passes (a max, a subtraction) then cost nothing; a block of anchors against
themselves then computes each tile once for both directions (:mod:`cl_plugins.kernels.halves`).

Per tile, the non-negatives of a row (its positive and itself, :mod:`cl_plugins.layouts`) are set to -inf after
``phi``, and a per-row bias may be added to one column (SimCSE's ``hard_negative_weight``). Extra log-sum-exps at
other scales ``r`` (dual temperature's tau_alpha / tau_beta) ride along without gradient, and a map may ask for
the sum, min and max of a statistic over the negatives (DySTreSS's tau).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .autocast import autocast_off
from .compiled import maybe_compiled
from .contract import KernelHealth, LogitMap, Request
from .negatives import NonNegatives, at_listed
from .tiles import forward_sums, gradient_tile

if TYPE_CHECKING:
    from ..labels import BlockLabels

NEG_INF = float("-inf")
#: elements of one tile (R x T, 4 MiB of float32) and columns per tile; rows per block follow. Measured on 2 CPU
#: cores at N = 16384: 1024 x 1024 tiles 6.1 s, 512 x 512 tiles 6.7 s (docs/benchmarks.md)
TILE_ELEMENTS = 1 << 20
TILE_COLUMNS = 1024
#: on a GPU a tile costs a few kernel launches whatever its size, so tiles grow with the free memory: up to
#: 1 << 28 elements (1 GiB of float32), a tile and its temporaries within 1 / GPU_MEMORY_SHARE of what is free
GPU_TILE_ELEMENTS = 1 << 28
GPU_TILE_COLUMNS = 16384
GPU_MEMORY_SHARE = 16
#: distance kept from the dtype's overflow and underflow (in log space) by sums of exponentials without a maximum
SUM_MARGIN = 8.0


def sums_fit(bound: float | None, count: int, dtype: torch.dtype) -> bool:
    """Whether ``count`` terms exp(l) with every |l| <= ``bound`` can be summed without a running maximum: the sum
    stays below the dtype's largest number and every term above its smallest normal one (float32: bound + log count
    <= 79.3, e.g. a temperature down to 0.015 at N = 65,536), so its rounding is that of the max-shifted sum. Then
    the kernels drop the maximum's passes (a max, a subtraction)."""
    if bound is None or not math.isfinite(bound):
        return False
    info = torch.finfo(dtype)
    limit = min(math.log(info.max), -math.log(info.tiny)) - SUM_MARGIN
    return bound + math.log(max(count, 1)) <= limit


Pair = tuple[torch.Tensor, torch.Tensor]


class NegativeStats:
    """Sum, min and max of a logit map's statistic over the negatives, accumulated tile by tile (or chunk by
    chunk): the excluded entries are subtracted from the sum and masked for the min and the max."""

    def __init__(self, like: torch.Tensor) -> None:
        self.values = [like.new_zeros(()), like.new_full((), float("inf")), like.new_full((), NEG_INF)]

    def merge(self, total: torch.Tensor, low: torch.Tensor, high: torch.Tensor, weight: int = 1) -> None:
        """A tile's (sum, min, max) over its negatives, its sum counted ``weight`` times."""
        low, high = torch.minimum(self.values[1], low), torch.maximum(self.values[2], high)
        self.values = [self.values[0] + weight * total, low, high]

    def add(self, stat: torch.Tensor, skip: NonNegatives, weight: int = 1) -> None:
        """``stat`` of one tile [R, T] and the tile's non-negatives ``skip``; ``stat`` is overwritten. ``weight``:
        how often the tile counts in the sum (2 for a tile that stands for its transpose too)."""
        mask = skip.mask()
        if mask is not None:
            total = stat.masked_fill(mask, 0.0).sum()
            low = stat.masked_fill(mask, float("inf")).amin()
            high = stat.masked_fill_(mask, NEG_INF).amax()
        else:
            total = stat.sum() - skip.excluded_sum(stat)
            low = skip.fill_(stat, float("inf")).amin()
            high = skip.fill_(stat, NEG_INF).amax()
        self.merge(total, low, high, weight)


@dataclass(frozen=True)
class _Plan:
    """What every tile needs besides the embeddings."""

    exclude: torch.Tensor | None  # [A, k] columns that are not negatives
    bias_cols: torch.Tensor | None  # [A] column receiving ``bias``
    bias: float
    logit_map: LogitMap | None
    ratios: tuple[float, ...]
    rows: int
    cols: int
    labels: BlockLabels | None = None  # a candidate sharing its anchor's label is no negative
    bounded: bool = False  # every logit (at every ratio) small enough for sums without a maximum (:func:`sums_fit`)
    health: KernelHealth | None = None  # the loss's: a whole tile that fails to compile runs eagerly for it

    @property
    def tile_form(self) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """The map's whole-tile form (:mod:`cl_plugins.kernels.tiles`; set when compiling) where it applies: a
        bounded plan without a bias or extra scales."""
        m = self.logit_map
        usable = self.bounded and self.bias_cols is None and not self.ratios
        return m.tile_form if usable and m is not None else None

    @property
    def closed(self) -> bool:
        """Bounded, the map's exponential has a closed form and no statistic is asked for."""
        m = self.logit_map
        return self.bounded and m is not None and m.exp_form is not None and m.with_stat is None and not self.ratios


def make_plan(request: Request, anchors: torch.Tensor | None = None) -> _Plan:
    """The plan of ``request``'s block, whose anchors as the tiles see them are ``anchors`` (default: the request's,
    scaled); ``request.bound`` (the largest |logit| before any bias; None: unknown) decides whether the sums keep a
    maximum."""
    anchors = request.scaled_anchors() if anchors is None else anchors
    logit_map, bias, bound = request.logit_map, request.bias, request.bound
    if request.ratios and logit_map is not None:
        raise ValueError("extra scales (ratios) apply to scalar temperatures only")
    ratios = tuple(float(r) for r in request.ratios)
    largest = None if bound is None else (bound + abs(bias)) * max((1.0, *(abs(r) for r in ratios)))
    bounded = sums_fit(largest, request.candidates.shape[0], anchors.dtype)
    return _Plan(request.exclude, request.bias_cols, float(bias), logit_map, ratios, anchors.shape[0],
                 request.candidates.shape[0], request.labels, bounded, request.health)  # fmt: skip


def tile_sizes(n_rows: int, n_cols: int, device: torch.device | None = None) -> tuple[int, int]:
    """(rows per block R, columns per tile T): 1024 x 1024 on the CPU; on a GPU as large as the free memory
    allows (see ``GPU_TILE_ELEMENTS``), so that [A, M] logits of a few GiB take a handful of tiles."""
    elements, columns = TILE_ELEMENTS, TILE_COLUMNS
    if device is not None and device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        elements = max(TILE_ELEMENTS, min(GPU_TILE_ELEMENTS, free // (4 * GPU_MEMORY_SHARE)))
        columns = GPU_TILE_COLUMNS
    width = min(n_cols, columns)
    return min(n_rows, max(64, elements // width)), width


@dataclass
class _Tile:
    x: torch.Tensor  # cosines (or scaled cosines)
    logits: torch.Tensor  # masked: -inf at the non-negatives; may be ``x`` itself without a map
    companion: torch.Tensor | None  # the map's stat or derivative, if asked for
    skip: NonNegatives  # the tile's non-negatives


def _locate(x: torch.Tensor, r0: int, t0: int, plan: _Plan) -> tuple[Pair | None, NonNegatives]:
    """Where the tile ``x`` (rows ``r0:``, columns ``t0:``) holds special entries, in tile coordinates: (each
    row's biased hard negative as (column [R, 1], whether it is in the tile [R, 1]), or None without a bias; the
    non-negatives). From the [A] and [M] vectors of the plan: never an [A, M] mask, nor a read of the host."""
    n_rows, width = x.shape
    biased = None
    if plan.bias_cols is not None:
        biased = at_listed(plan.bias_cols[r0 : r0 + n_rows] - t0, width)
    return biased, NonNegatives.of(plan.exclude, plan.labels, r0, x, t0)


def _exp_tile(a: torch.Tensor, c: torch.Tensor, r0: int, t0: int, plan: _Plan, grad: bool) -> torch.Tensor:
    """The tile's exp(logits) (forward) or exp(logits) phi' (``grad``, backward) from the map's closed form,
    0 at its non-negatives."""
    assert plan.logit_map is not None and plan.logit_map.exp_form is not None
    x = a @ c.T
    e, factor = plan.logit_map.exp_form(x, grad)
    e = factor if grad else e
    biased, skip = _locate(x, r0, t0, plan)
    if biased is not None:  # exp(l + bias) = exp(l) e^bias
        col, inside = biased
        factor = torch.full(inside.shape, math.exp(plan.bias), dtype=e.dtype, device=e.device)
        e.scatter_(1, col, e.gather(1, col) * torch.where(inside, factor, 1.0))
    return skip.fill_(e, 0.0)


def tile_sums(a: torch.Tensor, c: torch.Tensor, r0: int, t0: int, plan: _Plan, stats: NegativeStats | None,
              weight: int = 1, columns: bool = False) -> list[tuple[torch.Tensor, torch.Tensor | None]]:  # fmt: skip
    """(row sums [R], column sums [T] if ``columns``) of exp(logits) over the tile's negatives, then of exp(r *
    logits) for each ratio (a bounded plan: no maximum); the map's statistic into ``stats``, ``weight`` times."""
    if plan.tile_form is not None:
        x, row_labels, col_labels = _marked_tile(a, c, r0, t0, plan)
        run = maybe_compiled(forward_sums, True, plan.health)
        rows, cols, summary = run(x, row_labels, col_labels, *plan.tile_form, columns)
        if stats is not None and summary is not None:
            stats.merge(*summary, weight)
        return [(rows, cols)]
    exps = tile_exps(a, c, r0, t0, plan, stats, weight)
    return [(e.sum(dim=1), e.sum(dim=0) if columns else None) for e in exps]


def _marked_tile(a: torch.Tensor, c: torch.Tensor, r0: int, t0: int,
                 plan: _Plan) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """(the tile's cosines with NaN at its non-negatives, its rows' labels, its columns' labels) for
    :mod:`cl_plugins.kernels.tiles`."""
    x = a @ c.T
    NonNegatives.of(plan.exclude, plan.labels, r0, x, t0, with_same=False).fill_(x, math.nan)
    if plan.labels is None:
        return x, None, None
    return x, plan.labels.anchor[r0 : r0 + x.shape[0]], plan.labels.candidate[t0 : t0 + x.shape[1]]


def tile_gradient(a: torch.Tensor, c: torch.Tensor, r0: int, t0: int, plan: _Plan, v_rows: torch.Tensor,
                  v_cols: torch.Tensor | None) -> torch.Tensor:  # fmt: skip
    """dL/dx of a bounded tile: exp(l) phi' (v_i, or v_i + v_j when it stands for its transpose too), 0 at the
    non-negatives; ``v`` = the incoming gradient times exp(-LSE)."""
    if plan.tile_form is not None:
        x, row_labels, col_labels = _marked_tile(a, c, r0, t0, plan)
        run = maybe_compiled(gradient_tile, True, plan.health)
        return run(x, row_labels, col_labels, *plan.tile_form, v_rows, v_cols)
    weight = v_rows[:, None] if v_cols is None else v_rows[:, None] + v_cols[None, :]
    if plan.closed:
        return _exp_tile(a, c, r0, t0, plan, True).mul_(weight)
    tile = _tile(a, c, r0, t0, plan, "derivative")
    g = tile.logits.exp_().mul_(weight)
    return g.mul_(tile.companion) if tile.companion is not None else _through_map(g, tile.x, plan.logit_map)


def tile_exps(a: torch.Tensor, c: torch.Tensor, r0: int, t0: int, plan: _Plan, stats: NegativeStats | None,
              weight: int = 1) -> list[torch.Tensor]:  # fmt: skip
    """exp of the tile's logits, then of the logits times each ratio, 0 at the non-negatives (a bounded plan: no
    maximum); the map's statistic into ``stats``, counted ``weight`` times in its sum."""
    if plan.closed:
        return [_exp_tile(a, c, r0, t0, plan, False)]
    tile = _tile(a, c, r0, t0, plan, "stat")
    if stats is not None:
        stats.add(tile.companion, tile.skip, weight)
    extras = [torch.mul(tile.logits, r).exp_() for r in plan.ratios]
    return [tile.logits.exp_(), *extras]


def _tile(a: torch.Tensor, c: torch.Tensor, r0: int, t0: int, plan: _Plan, want: str | None = None) -> _Tile:
    """Rows ``r0:`` of ``a`` against the candidate tile ``c`` starting at column ``t0``."""
    x = a @ c.T
    logits, companion = (x, None) if plan.logit_map is None else plan.logit_map.evaluate(x, want)
    biased, skip = _locate(x, r0, t0, plan)
    if biased is not None:  # out of place: without a map the logits are ``x``, which the tile keeps
        col, inside = biased
        bias = torch.full(inside.shape, plan.bias, dtype=logits.dtype, device=logits.device)
        logits = logits.scatter_add(1, col, torch.where(inside, bias, 0.0))
    return _Tile(x, skip.fill_(logits, NEG_INF), companion, skip)


def _row_block_forward(a: torch.Tensor, c: torch.Tensor, r0: int, width: int, plan: _Plan,
                       stats: NegativeStats | None) -> list[torch.Tensor]:  # fmt: skip
    """[lse, extras...] of one row block, streaming over column tiles (the map's statistic into ``stats``)."""
    n = a.shape[0]
    if plan.bounded:  # plain sums, no running maximum
        sums = [a.new_zeros(n) for _ in (1.0, *plan.ratios)]
        for t0 in range(0, plan.cols, width):
            for total, (rows, _) in zip(sums, tile_sums(a, c[t0 : t0 + width], r0, t0, plan, stats)):
                total += rows
        return [total.log_() for total in sums]
    m = a.new_full((n,), NEG_INF)
    s = a.new_zeros(n)
    extra_sums = [a.new_zeros(n) for _ in plan.ratios]
    for t0 in range(0, plan.cols, width):
        tile = _tile(a, c[t0 : t0 + width], r0, t0, plan, "stat")
        logits = tile.logits
        if stats is not None:
            stats.add(tile.companion, tile.skip)
        m_new = torch.maximum(m, logits.amax(dim=1))
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # rows with no negative yet
        centred = logits.sub_(shift[:, None])  # in place: x (or the map's output) is not needed any more
        for i, r in enumerate(plan.ratios):
            extra_sums[i] = extra_sums[i] * torch.exp(r * (m - shift)) + torch.exp(centred * r).sum(dim=1)
        s = s * torch.exp(m - shift) + centred.exp_().sum(dim=1)
        m = m_new
    return [m + s.log()] + [r * m + e.log() for r, e in zip(plan.ratios, extra_sums)]


def plan_stats(plan: _Plan, like: torch.Tensor) -> NegativeStats | None:
    """Accumulators for the map's statistic, if it has one."""
    return NegativeStats(like) if plan.logit_map is not None and plan.logit_map.reports else None


def finish_forward(ctx, plan: _Plan, stats: NegativeStats | None, outs: list[torch.Tensor],  # type: ignore[no-untyped-def]
                   *saved: torch.Tensor) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """Save ``saved`` and the LSE (``outs[0]``) for backward; the extra LSEs and the statistic (sum, min, max),
    appended as the last output for :meth:`Request.reported <cl_plugins.kernels.contract.Request.reported>`, have no
    grad."""
    if stats is not None:
        outs = [*outs, torch.stack(stats.values)]
    ctx.save_for_backward(*saved, outs[0])
    ctx.plan = plan
    ctx.mark_non_differentiable(*outs[1:])
    return tuple(outs)


def refuse_second_derivative(kernel: str = "streaming") -> None:
    """Backward under ``create_graph=True``: these kernels' backward is not differentiable."""
    if torch.is_grad_enabled():
        raise RuntimeError(
            f"the {kernel} loss kernel has no second derivative (create_graph=True, e.g. a gradient penalty); "
            "build the loss with kernel='dense' for that"
        )


class _StreamingNegativeLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, plan):  # type: ignore[override]
        with autocast_off(a.device.type), torch.no_grad():
            rows, width = tile_sizes(plan.rows, plan.cols, a.device)
            stats = plan_stats(plan, a)
            parts = [_row_block_forward(a[r0 : r0 + rows], c, r0, width, plan, stats)
                     for r0 in range(0, plan.rows, rows)]  # fmt: skip
            outs = [torch.cat(column) for column in zip(*parts)]
        return finish_forward(ctx, plan, stats, outs, a, c)

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        refuse_second_derivative()
        a, c, lse = ctx.saved_tensors
        plan: _Plan = ctx.plan
        with autocast_off(a.device.type):
            grad_a = torch.zeros_like(a) if ctx.needs_input_grad[0] else None
            grad_c = torch.zeros_like(c) if ctx.needs_input_grad[1] else None
            rows, width = tile_sizes(plan.rows, plan.cols, a.device)
            for r0 in range(0, plan.rows, rows):
                a_blk = a[r0 : r0 + rows]
                centre, weight = lse[r0 : r0 + rows, None], grad[r0 : r0 + rows, None]
                for t0 in range(0, plan.cols, width):
                    c_tile = c[t0 : t0 + width]
                    if plan.bounded and plan.logit_map is not None:  # exp(l) without a maximum: no overflow
                        g = tile_gradient(a_blk, c_tile, r0, t0, plan, torch.exp(-centre).mul_(weight).squeeze(1), None)
                    else:
                        tile = _tile(a_blk, c_tile, r0, t0, plan, "derivative")
                        g = tile.logits.sub_(centre).exp_().mul_(weight)
                        g = g.mul_(tile.companion) if tile.companion is not None else _through_map(
                            g, tile.x, plan.logit_map)  # fmt: skip
                    if grad_a is not None:
                        grad_a[r0 : r0 + rows].addmm_(g, c_tile)
                    if grad_c is not None:
                        grad_c[t0 : t0 + width].addmm_(g.T, a_blk)
        return grad_a, grad_c, None


def _through_map(g: torch.Tensor, x: torch.Tensor, logit_map: LogitMap | None) -> torch.Tensor:
    """dL/dx from dL/dlogits for a map without an explicit derivative: autograd on the tile."""
    if logit_map is None:
        return g
    with torch.enable_grad():
        leaf = x.detach().requires_grad_(True)
        (out,) = torch.autograd.grad(logit_map.value(leaf), leaf, grad_outputs=g)
    return out


class Streaming:
    """The streaming backend: any request, any batch size (the last a plan hands on to)."""

    name = "stream"
    may_fail = False

    def accepts(self, request: Request) -> bool:
        return True

    def run(self, request: Request) -> list[torch.Tensor]:
        """LSE over each anchor's negatives of ``phi(scale * anchors @ candidates.T)`` [A], then (no grad) at ``r *``
        the logits for each ratio r: ``1 + len(ratios)`` tensors [A]."""
        anchors = request.scaled_anchors()
        plan = make_plan(request, anchors)
        return request.reported(_StreamingNegativeLSE.apply(anchors, request.candidates_beside(anchors), plan))


BACKEND = Streaming()
