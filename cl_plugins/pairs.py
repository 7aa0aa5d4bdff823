"""Positive pairs and negatives of one similarity matrix, and the per-pair quantity ``d``.

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

import torch

from .fused import LazyLogits
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

    @classmethod
    def from_block(cls, block: PairBlock) -> Pairs:
        n = block.anchors.shape[0]
        m = block.candidates.shape[0] + (0 if block.positives is None else 1)
        rows = torch.arange(n, device=block.anchors.device)
        return cls(rows, block.pos_cols, n, m, True, exclude_cols=block.exclude_cols, hard_cols=block.hard_cols)

    @classmethod
    def from_masks(cls, pos_mask: torch.Tensor, neg_mask: torch.Tensor) -> Pairs:
        rows, cols = pos_mask.nonzero(as_tuple=True)
        n, m = pos_mask.shape
        single = rows.numel() == n  # every row has >= 1 positive, so == n means exactly one each
        return cls(rows, cols, n, m, single, neg_mask=neg_mask)

    def negative_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` with every non-negative entry set to -inf (applied after any scaling)."""
        if self.neg_mask is not None:
            return logits.masked_fill(~self.neg_mask, NEG_INF)
        assert self.exclude_cols is not None
        return logits.scatter(1, self.exclude_cols, NEG_INF)

    def negative_count(self) -> int:
        if self.neg_mask is not None:
            return int(self.neg_mask.sum())
        assert self.exclude_cols is not None
        return self.n_rows * (self.n_cols - self.exclude_cols.shape[1])

    def positive(self, x: torch.Tensor | LazyLogits) -> torch.Tensor:
        """Entries of ``x`` [A, M] at the positive pairs, shape [P]."""
        if isinstance(x, LazyLogits):
            return x.positive(self.cols)
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

    def per_anchor(self, pair_values: torch.Tensor) -> torch.Tensor:
        """Average the values of each anchor's positives: [P] -> [A]."""
        if self.single:
            return pair_values
        sums = pair_values.new_zeros(self.n_rows).index_add(0, self.rows, pair_values)
        counts = torch.bincount(self.rows, minlength=self.n_rows).to(pair_values.dtype)
        return sums / counts


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
