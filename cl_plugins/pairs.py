"""Which entries of a block are positives and negatives (:class:`Pairs`), and the losses of one number per pair.

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

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .kernels.lazy import LazyLogits
from .kernels.negatives import NonNegatives

if TYPE_CHECKING:  # the layouts build Pairs
    from .labels import BlockLabels
    from .layouts import PairBlock

NEG_INF = float("-inf")


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
    #: the block's labels and what they do (:class:`~cl_plugins.labels.BlockLabels`): same-label candidates are
    #: no negatives; with a policy that makes them positives, the first ``n_rows`` pairs are the anchors' own
    labels: BlockLabels | None = None
    #: the candidates start at this column (1 after a queue's separate positive column)
    col_offset: int = 0

    @property
    def form(self) -> str | None:
        """How an anchor's several positives make its loss (``"out"``, ``"in"``, ``"pair"``: the label policy's,
        :mod:`cl_plugins.labels`); None when each anchor has its one positive."""
        return None if self.labels is None else self.labels.policy.form

    @classmethod
    def from_block(cls, block: PairBlock) -> Pairs:
        """The block's pairs; under a label policy that makes positives, every candidate of an anchor's label is a
        positive too."""
        n = block.anchors.shape[0]
        offset = 0 if block.positives is None else 1
        m = block.candidates.shape[0] + offset
        rows, cols = block.anchor_rows, block.pos_cols
        form = None if block.labels is None else block.labels.policy.form
        if form is not None:
            extra_rows, extra_cand = block.label_pairs()
            rows, cols = torch.cat([rows, extra_rows]), torch.cat([cols, extra_cand + offset])
        return cls(rows, cols, n, m, form is None, exclude_cols=block.exclude_cols, hard_cols=block.hard_cols,
                   labels=block.labels, average="pair" if form == "pair" else "row", col_offset=offset)  # fmt: skip

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
        masked = NonNegatives.of(self.exclude_cols, None, 0, logits).fill_(logits.clone(), NEG_INF)
        if self.labels is not None:  # after a queue's separate positive column, which has no label
            candidates = masked[:, masked.shape[1] - self.labels.candidate.shape[0] :]
            NonNegatives.of(None, self.labels, 0, candidates).fill_(candidates, NEG_INF)
        return masked

    def negatives_per_row(self) -> torch.Tensor:
        """Each anchor's number of negatives [A], from the labels' counts (never an [A, M] mask)."""
        assert self.exclude_cols is not None
        k = self.exclude_cols.shape[1]
        if self.labels is None:
            return self.exclude_cols.new_full((self.n_rows,), self.n_cols - k)
        anchor, cand = self.labels.anchor, self.labels.candidate
        _, inverse = torch.unique(torch.cat([cand, anchor]), return_inverse=True)
        same = torch.bincount(inverse[: cand.shape[0]], minlength=int(inverse.max()) + 1)[inverse[cand.shape[0] :]]
        if cand.shape[0] < self.n_cols:  # queue: the excluded column is the separate positive, no candidate
            return self.n_cols - k - same
        overlap = (cand[self.exclude_cols] == anchor[:, None]).sum(dim=1)  # excluded columns of the same label
        return self.n_cols - k - same + overlap

    def negative_count(self) -> int | torch.Tensor:
        """The number of (anchor, negative) pairs: an int where the host knows it (no labels), else a 0-d tensor,
        never a read of the device."""
        if self.neg_mask is not None:
            return self.neg_mask.sum()
        if self.labels is None and self.exclude_cols is not None:
            return self.n_rows * (self.n_cols - self.exclude_cols.shape[1])
        return self.negatives_per_row().sum()

    def positive(self, x: torch.Tensor | LazyLogits) -> torch.Tensor:
        """Entries of ``x`` [A, M] at the positive pairs, shape [P]."""
        if isinstance(x, LazyLogits):
            if self.single:
                return x.positive(self.cols)
            n = self.n_rows  # the anchors' own positives, then the other pairs of a label (labels as positives)
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
        """``d`` of labels as positives (see :class:`cl_plugins.ContrastiveLoss`) at ``logits``, then (no grad)
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
