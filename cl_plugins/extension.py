"""The types a strategy author works with: :class:`Pairs`, :class:`LogitMap`, :class:`LazyLogits`.

A strategy (:class:`cl_plugins.ContrastiveLoss` subclass) computes its loss from a block's logits and its
:class:`Pairs`. The logits are either a dense [A, M] tensor or :class:`LazyLogits` (the cosines, computed only
inside the kernels of :mod:`cl_plugins.kernels`); a per-pair strategy hands the kernels its logits as an
elementwise :class:`LogitMap` of the cosine.

Every strategy in cl-plugins reduces to one number per (anchor a, positive p)::

    d_ap = LSE_{n in neg(a)} l_an  -  l_ap                                        (1)

where ``l`` are the strategy's logits (``s / tau``, ``2 atanh(s)``, ...). From ``d`` alone:

* InfoNCE (positive in the denominator):  -log P_ap = softplus(d_ap)
* decoupled (DCL, GraphCL):               d_ap
* P_ap = sigmoid(-d_ap) and the gradient-scaling factor W_ap = 1 - P_ap = sigmoid(d_ap).

All three are evaluated without ever forming ``1 - P`` by subtraction, so they stay exact when
P_ap rounds to 1 in floating point (the failure mode of ``1 / (1 - softmax)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from .kernels.fused import NegativeLSE
from .kernels.pairs import pair_cosines
from .kernels.streaming import streaming_negative_lse
from .kernels.symmetric import symmetric_negative_lse, symmetric_plan
from .kernels.triton_lse import triton_negative_lse

if TYPE_CHECKING:  # the layouts build LazyLogits
    from .layouts import PairBlock

NEG_INF = float("-inf")
Pair = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class LogitMap:
    """An elementwise logit ``phi(x)`` of the cosine ``x``, with its derivative.

    ``with_derivative(x) -> (phi(x), phi'(x))``; without it the kernels differentiate ``value`` with autograd
    inside each tile (exact, slower) and the one-buffer kernel of :mod:`cl_plugins.kernels.fused` does not apply.
    ``with_stat(x) -> (phi(x), stat(x))`` (optional): a per-pair quantity whose sum, min and max over the
    negatives are passed to ``on_stats(sum, min, max)`` after the forward pass. ``full(x) -> (phi(x), phi'(x),
    stat(x))`` computes all three at once where they share work (default: ``with_derivative`` and ``with_stat``).
    ``exp_form(x, grad) -> (exp(phi(x)), exp(phi(x)) phi'(x) or None)`` (optional): the exponential (and, with
    ``grad``, the softmax numerator's derivative factor) in closed form, for a map bounded enough that the
    kernels may sum ``exp(phi)`` without a running maximum (temperature-free: with r = 1 / (1 - s),
    ``exp(2 atanh s) = 2 r - 1`` and ``exp(phi) phi' = 2 r^2``: one reciprocal per pair, no transcendental
    function). ``exp_form`` needs ``bound``.
    """

    value: Callable[[torch.Tensor], torch.Tensor]
    with_derivative: Callable[[torch.Tensor], Pair] | None = None
    with_stat: Callable[[torch.Tensor], Pair] | None = None
    on_stats: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None
    full: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None
    exp_form: Callable[[torch.Tensor, bool], tuple[torch.Tensor, torch.Tensor | None]] | None = None
    #: the largest |phi(x)| over x in [-1, 1] (None: unknown); small enough, the kernels sum exp(phi) without a
    #: running maximum (:func:`cl_plugins.kernels.streaming.sums_fit`)
    bound: float | None = None
    #: ``(form, args)``: the whole-tile form of :mod:`cl_plugins.kernels.tiles`, ``form(x, *args, grad) ->
    #: (exp(phi), exp(phi) phi' or None, stat or None)``; set when the map is compiled, and then the streaming kernels
    #: compile each whole tile
    tile_form: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
    #: ``(map id, params)`` for ``kernel="triton"`` (:data:`cl_plugins.kernels.triton_lse.MAPS`; None: that kernel
    #: streams this map instead)
    triton: tuple[int, tuple[float, ...]] | None = None

    def evaluate(self, x: torch.Tensor, want: str | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(phi(x), the ``want``-ed companion: ``"stat"``, ``"derivative"`` or None)."""
        if want == "stat" and self.with_stat is not None:
            return self.with_stat(x)
        if want == "derivative" and self.with_derivative is not None:
            return self.with_derivative(x)
        return self.value(x), None

    def evaluate_all(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(phi(x), phi'(x), stat(x) or None): what the one-buffer kernel needs (``with_derivative`` required)."""
        if self.full is not None:
            return self.full(x)
        assert self.with_derivative is not None
        value, derivative = self.with_derivative(x)
        return value, derivative, None if self.with_stat is None else self.with_stat(x)[1]


@dataclass(frozen=True)
class LazyLogits:
    """``scale * (anchors @ candidates.T)`` (or ``logit_map`` of the cosines), plus a separate positive column
    for queues, plus ``bias`` on one column per row; computed only inside the loss kernels.

    ``stream=True`` uses :mod:`cl_plugins.kernels.streaming` (tiles, no [A, M] buffer); so does a logit map without an
    explicit derivative, which the one-buffer kernel of this module cannot apply.

    Shapes:
        anchors: [A, D] and candidates: [M, D], both L2-normalised; positives: [A, D] or None;
        bias_cols: [A] or None.
    """

    anchors: torch.Tensor
    candidates: torch.Tensor
    positives: torch.Tensor | None = None
    scale: float | torch.Tensor = 1.0
    stream: bool = False
    #: stream when the block's anchors are its candidates and each tile can stand for its transpose
    #: (:mod:`cl_plugins.kernels.symmetric`), else the one-buffer kernel: ``kernel="auto"`` on larger blocks
    stream_if_symmetric: bool = False
    #: the Triton kernels (:mod:`cl_plugins.kernels.triton_lse`) where they take the map, else streaming
    triton: bool = False
    logit_map: LogitMap | None = None
    bias_cols: torch.Tensor | None = None
    bias: float = 0.0
    #: (anchor labels [A], candidate labels [M]): a candidate sharing its anchor's label is no negative
    labels: tuple[torch.Tensor, torch.Tensor] | None = None
    # cosines of the positive pairs, shared by every rescaled copy (computed once per block)
    _positive_cache: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @property
    def dtype(self) -> torch.dtype:
        return self.anchors.dtype

    def __truediv__(self, tau: float | torch.Tensor) -> LazyLogits:
        if self.logit_map is not None:
            raise TypeError("mapped logits cannot be rescaled: put the temperature into the logit map")
        return replace(self, scale=self.scale / tau)

    def mapped(self, logit_map: LogitMap) -> LazyLogits:
        """Logits ``logit_map.value(cosine)`` (per-pair strategies)."""
        if not (isinstance(self.scale, float) and self.scale == 1.0):
            raise TypeError("a logit map applies to the cosines themselves, not to rescaled logits")
        return replace(self, logit_map=logit_map)

    def with_bias(self, cols: torch.Tensor, value: float) -> LazyLogits:
        """``value`` added to the logit at column ``cols[a]`` of every row a (a hard negative's bias)."""
        return replace(self, bias_cols=cols, bias=float(value))

    def scaled_anchors(self) -> torch.Tensor:
        if isinstance(self.scale, float) and self.scale == 1.0:
            return self.anchors
        return self.anchors * self.scale

    def positive(self, cols: torch.Tensor) -> torch.Tensor:
        """Logits of the positive pairs [A]."""
        cos = self._positive_cache.get("cos")
        if cos is None:
            p = self.positives if self.positives is not None else self.candidates.index_select(0, cols)
            cos = (self.anchors * p).sum(dim=1)
            if torch.is_grad_enabled():  # a no-grad result must not stand in for the graph later
                self._positive_cache["cos"] = cos
        return self._logits_of(cos)

    def pair_logits(self, rows: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        """Logits of the listed (anchor ``rows``, candidate ``cand``) pairs [P] (``cand`` indexes the candidates,
        not the columns: a queue's separate positive column is not among them); a block has one such list, whose
        cosines are computed once."""
        cos = self._positive_cache.get("pairs")
        if cos is None:
            cos = pair_cosines(self.anchors, self.candidates, rows, cand)
            if torch.is_grad_enabled():
                self._positive_cache["pairs"] = cos
        return self._logits_of(cos)

    def _logits_of(self, cos: torch.Tensor) -> torch.Tensor:
        if self.logit_map is not None:
            return self.logit_map.value(cos)
        if isinstance(self.scale, float) and self.scale == 1.0:
            return cos
        return cos * self.scale

    def negative_lse(self, exclude_cols: torch.Tensor | None, ratios: tuple[float, ...] = ()) -> list[torch.Tensor]:
        """LSE over negatives [A] at this scale, then (no grad) at ``scale * r`` for each r."""
        # with separate positives (queue) every candidate is a negative
        exclude = None if self.positives is not None else exclude_cols
        fusable = self.logit_map is None or self.logit_map.with_derivative is not None
        if self.triton:
            out = triton_negative_lse(self.scaled_anchors(), self.candidates, exclude, ratios=tuple(ratios),
                                      logit_map=self.logit_map, bias_cols=self.bias_cols, bias=self.bias,
                                      labels=self.labels)  # fmt: skip
            if out is not None:
                return out
        options = {"ratios": tuple(ratios), "logit_map": self.logit_map, "labels": self.labels, "bound": self.bound()}
        if self.stream or self.stream_if_symmetric or not fusable:
            own = self.positives is None and self.anchors is self.candidates and self.bias_cols is None
            plan = symmetric_plan(self.candidates, exclude, **options) if own else None
            if plan is not None:
                return symmetric_negative_lse(self.candidates, self.scale, plan)
        if self.stream or self.triton or not fusable:
            anchors = self.scaled_anchors()
            return streaming_negative_lse(anchors, self.candidates, exclude, bias_cols=self.bias_cols, bias=self.bias,
                                          **options)  # fmt: skip
        return list(NegativeLSE.apply(self.scaled_anchors(), self.candidates, exclude, tuple(ratios), self.logit_map,
                                      self.bias_cols, self.bias, self.labels, options["bound"]))  # fmt: skip

    def bound(self) -> float | None:
        """The largest |logit| before a bias: the map's (of unit cosines), else |scale| times the largest anchor and
        candidate norms (1 for unit rows; AMCL's anchors come divided by their own temperatures)."""
        if self.logit_map is not None:
            return self.logit_map.bound
        with torch.no_grad():
            norms = [x.detach().norm(dim=1).amax() for x in (self.anchors, self.candidates) if x.shape[0]]
            if len(norms) < 2:  # an empty side: nothing to sum, the kernels' own checks speak
                return None
            scale = self.scale.detach().abs().max() if isinstance(self.scale, torch.Tensor) else abs(self.scale)
            return float(scale * torch.stack(norms).prod())


@dataclass
class Pairs:
    """Which entries of an [A, M] matrix are positives and which are negatives.

    Shapes:
        rows, cols: [P] indices of the positive entries (``single``: rows = arange(A));
        exclude_cols: [A, k] columns that are not negatives (layouts), or
        neg_mask: [A, M] bool negatives (``from_similarity``); exactly one of the two is set.
    """

    rows: torch.Tensor
    cols: torch.Tensor
    n_rows: int
    n_cols: int
    single: bool
    exclude_cols: torch.Tensor | None = None
    neg_mask: torch.Tensor | None = None
    hard_cols: torch.Tensor | None = None
    #: "row": a row's positives are averaged, then the rows; "pair": every positive pair counts once
    average: str = "row"
    #: (anchor labels [A], candidate labels [M]) of a block whose same-label candidates are no negatives
    labels: tuple[torch.Tensor, torch.Tensor] | None = None
    #: ``positives="label"``: how an anchor's several positives make its loss (``"out"``, ``"in"``, ``"pair"``, see
    #: :class:`cl_plugins.ContrastiveLoss`); the first ``n_rows`` pairs are the anchors' own positives
    form: str | None = None
    #: the candidates start at this column (1 after a queue's separate positive column)
    col_offset: int = 0

    @classmethod
    def from_block(cls, block: PairBlock, form: str | None = None) -> Pairs:
        """The block's pairs; with ``form`` (``positives="label"``) every candidate of an anchor's label is a
        positive too."""
        n = block.anchors.shape[0]
        offset = 0 if block.positives is None else 1
        m = block.candidates.shape[0] + offset
        rows, cols = torch.arange(n, device=block.anchors.device), block.pos_cols
        if form is not None:
            extra_rows, extra_cand = block.label_pairs()
            rows, cols = torch.cat([rows, extra_rows]), torch.cat([cols, extra_cand + offset])
        return cls(rows, cols, n, m, form is None, exclude_cols=block.exclude_cols, hard_cols=block.hard_cols,
                   labels=block.labels, average="pair" if form == "pair" else "row", form=form,
                   col_offset=offset)  # fmt: skip

    @classmethod
    def from_masks(cls, pos_mask: torch.Tensor, neg_mask: torch.Tensor, average: str = "row") -> Pairs:
        rows, cols = pos_mask.nonzero(as_tuple=True)
        n, m = pos_mask.shape
        single = rows.numel() == n  # every row has >= 1 positive, so == n means exactly one each
        return cls(rows, cols, n, m, single, neg_mask=neg_mask, average=average)

    def negative_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` with every non-negative entry set to -inf (applied after any scaling)."""
        if self.neg_mask is not None:
            return logits.masked_fill(~self.neg_mask, NEG_INF)
        assert self.exclude_cols is not None
        masked = logits.scatter(1, self.exclude_cols, NEG_INF)
        if self.labels is not None:  # the dense path holds [A, M] anyway
            anchor, cand = self.labels
            same = anchor[:, None] == cand[None, :]
            if same.shape[1] < masked.shape[1]:  # a separate positive column first (queue): never a negative
                same = torch.cat([same.new_ones(same.shape[0], 1), same], dim=1)
            masked = masked.masked_fill(same, NEG_INF)
        return masked

    def negatives_per_row(self) -> torch.Tensor:
        """Each anchor's number of negatives [A], from the labels' counts (never an [A, M] mask)."""
        assert self.exclude_cols is not None
        k = self.exclude_cols.shape[1]
        if self.labels is None:
            return self.exclude_cols.new_full((self.n_rows,), self.n_cols - k)
        anchor, cand = self.labels
        _, inverse = torch.unique(torch.cat([cand, anchor]), return_inverse=True)
        same = torch.bincount(inverse[: cand.shape[0]], minlength=int(inverse.max()) + 1)[inverse[cand.shape[0] :]]
        if cand.shape[0] < self.n_cols:  # queue: the excluded column is the separate positive, no candidate
            return self.n_cols - k - same
        overlap = (cand[self.exclude_cols] == anchor[:, None]).sum(dim=1)  # excluded columns of the same label
        return self.n_cols - k - same + overlap

    def negative_count(self) -> int:
        if self.neg_mask is not None:
            return int(self.neg_mask.sum())
        return int(self.negatives_per_row().sum())

    def positive(self, x: torch.Tensor | LazyLogits) -> torch.Tensor:
        """Entries of ``x`` [A, M] at the positive pairs, shape [P]."""
        if isinstance(x, LazyLogits):
            if self.single:
                return x.positive(self.cols)
            n = self.n_rows  # the anchors' own positives, then the other pairs of a label (positives="label")
            return torch.cat([x.positive(self.cols[:n]), x.pair_logits(self.rows[n:], self.cols[n:] - self.col_offset)])
        if self.single:
            return x.gather(1, self.cols[:, None]).squeeze(1)
        return x[self.rows, self.cols]

    def lse_negatives(self, logits: torch.Tensor) -> torch.Tensor:
        """Log-sum-exp over each anchor's negatives, shape [A]."""
        return torch.logsumexp(self.negative_logits(logits), dim=1)

    def d(self, logits: torch.Tensor | LazyLogits) -> torch.Tensor:
        """Eq. (1) for every positive pair, shape [P]."""
        return self.d_with(logits)[0]

    def d_with(self, logits: torch.Tensor | LazyLogits, ratios: tuple[float, ...] = ()) -> list[torch.Tensor]:
        """Eq. (1) at ``logits``, then (without gradient) at ``logits * r`` for each ratio r."""
        if self.form is not None:
            return self._label_d(logits, ratios)
        if isinstance(logits, LazyLogits):
            lses = logits.negative_lse(self.exclude_cols, ratios)
            pos = logits.positive(self.cols)
            return [lses[0] - pos] + [lse - pos.detach() * r for lse, r in zip(lses[1:], ratios)]
        out = []
        for r in (1.0, *ratios):
            scaled = logits if r == 1.0 else logits.detach() * r
            lse = self.lse_negatives(scaled)
            if not self.single:
                lse = lse[self.rows]
            out.append(lse - self.positive(scaled))
        return out

    def _label_d(self, logits: torch.Tensor | LazyLogits, ratios: tuple[float, ...]) -> list[torch.Tensor]:
        """``d`` of ``positives="label"`` (see :class:`cl_plugins.ContrastiveLoss`) at ``logits``, then (no grad)
        at ``logits * r``: "pair" [P] LSE_neg - l_ap; "in" [A] LSE_neg - LSE_pos; "out" [P] LSE over every other
        candidate - l_ap. The negatives' LSE comes from the kernels; the sums over an anchor's label from its listed
        pairs (O(P), never a pass over [A, M])."""
        pos = self.positive(logits)
        scales = (1.0, *ratios)
        negatives = self._lses(logits, ratios)
        if self.form == "pair":
            return [lse[self.rows] - (pos if r == 1.0 else pos.detach() * r) for lse, r in zip(negatives, scales)]
        n, out = self.n_rows, []
        for lse_n, r in zip(negatives, scales):
            p = pos if r == 1.0 else pos.detach() * r
            lse_s = _segment_lse(p[n:], self.rows[n:], n)  # the anchor's label, its own positive left out
            if self.form == "in":
                out.append(lse_n - torch.logaddexp(lse_s, p[:n]))
                continue
            # "out": an own positive's other candidates are the negatives and its label's others (lse_s); another
            # positive's, the negatives, the own positive and its label's others but itself, taken out of lse_s
            rows, q = self.rows[n:], p[n:]
            rest = torch.logaddexp(lse_n, p[:n])[rows]
            d_other = torch.logaddexp(rest, _log_sub_exp(lse_s[rows], q)) - q
            out.append(torch.cat([torch.logaddexp(lse_n, lse_s) - p[:n], d_other]))
        return out

    def _lses(self, logits: torch.Tensor | LazyLogits, ratios: tuple[float, ...]) -> list[torch.Tensor]:
        if isinstance(logits, LazyLogits):
            return logits.negative_lse(self.exclude_cols, ratios)
        return [self.lse_negatives(logits if r == 1.0 else logits.detach() * r) for r in (1.0, *ratios)]

    def positives_per_row(self, dtype: torch.dtype) -> torch.Tensor:
        """Each anchor's number of positive pairs [A], in ``dtype``."""
        return torch.bincount(self.rows, minlength=self.n_rows).to(dtype)

    def per_anchor(self, pair_values: torch.Tensor) -> torch.Tensor:
        """Average the values of each anchor's positives: [P] -> [A] (``average="pair"``: [P] as they are, each
        pair one term of the reduction). The "in" form's values are per anchor already: it adds log |P(a)|."""
        if self.form == "in":
            return pair_values + self.positives_per_row(pair_values.dtype).log()
        if self.single or self.average == "pair":
            return pair_values
        sums = pair_values.new_zeros(self.n_rows).index_add(0, self.rows, pair_values)
        return sums / self.positives_per_row(pair_values.dtype)


def _segment_lse(values: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Log-sum-exp of ``values`` [Q] per row [n] (``rows`` [Q] their rows): -inf, with zero gradient, for a row
    with none."""
    peak = values.new_full((n,), NEG_INF).scatter_reduce(0, rows, values.detach(), "amax")
    peak = torch.where(torch.isneginf(peak), torch.zeros_like(peak), peak)
    total = values.new_zeros(n).index_add(0, rows, torch.exp(values - peak[rows]))
    some = total > 0
    return torch.where(some, peak + torch.log(torch.where(some, total, torch.ones_like(total))), NEG_INF)


def _log_sub_exp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """log(e^a - e^b) for b <= a (b one of the terms summed in a): -inf, with zero gradient, where b is the only
    term (b >= a after rounding). Exact unless b outweighs the other terms by the dtype's resolution; then the
    pair's probability rounds to 1 unless its other candidates weigh more."""
    alone = b >= a
    gap = torch.where(alone, torch.full_like(a, -1.0), b - a)
    return torch.where(alone, torch.full_like(a, NEG_INF), a + torch.log(-torch.expm1(gap)))


def softplus(d: torch.Tensor) -> torch.Tensor:
    """``log(1 + e^d)``, exact for every d: ``F.softplus`` returns d itself above its threshold 20, which
    drops ``log1p(e^-d)`` (2e-9 at d = 20, far above float64's resolution of a loss of 20)."""
    return torch.logaddexp(d, d.new_zeros(()))


def reweighted_nll(d: torch.Tensor) -> torch.Tensor:
    """``softplus(d) / sigmoid(d)`` = ``-log P / (1 - P)``, finite for every d (no grad).

    For d -> -inf (P -> 1) both numerator and denominator underflow while the ratio tends to
    1 + e^d / 2; that branch is used below d = -20 where it is exact in float32.
    """
    with torch.no_grad():
        direct = softplus(d) * (1 + torch.exp(-d))
        return torch.where(d < -20, 1 + 0.5 * torch.exp(d), direct)
