"""HR@k and NDCG@k for next-item ranking with one target per row, full or sampled.

Ties are resolved in expectation: if g candidates score strictly higher than the target and t
others score the same, the target's 0-based position is taken as uniform over g..g+t, and
HR@k = P(position < k), NDCG@k = E[1(position < k) / log2(position + 2)]. A model that scores
every item the same therefore gets chance-level metrics, not a perfect or a zero score (what
an arbitrary tie-break by index would give). HR equals Recall with a single target (DCRec #3).

Full ranking scores every item; the padding item (``padding_idx``, 0 in RecBole) and any item
in ``exclude`` (e.g. the user's history, if the protocol masks it) are never candidates. Sampled
ranking (DCRec's ``pop100``) ranks the target against negatives drawn by
:func:`popularity_negatives`; pass those scores with the target in column 0.
"""

from __future__ import annotations

import torch

KS = (1, 5, 10)


def _position_bounds(scores: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t_score = scores.gather(1, target.view(-1, 1))
    others = valid.clone()
    others.scatter_(1, target.view(-1, 1), False)
    greater = ((scores > t_score) & others).sum(dim=1)
    ties = ((scores == t_score) & others).sum(dim=1)
    return greater, ties


def ranking_metrics(
    scores: torch.Tensor,
    target: torch.Tensor,
    ks: tuple[int, ...] = KS,
    *,
    padding_idx: int | None = 0,
    exclude: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Per-row ``hr@k`` and ``ndcg@k`` [B] (float64) for every k in ``ks``.

    Shapes:
        scores: [B, I] (higher is better); target: [B] column of each row's target;
        exclude: [B, I] bool, candidates to drop (the target itself is never dropped).
    """
    if scores.dim() != 2 or target.shape != (scores.shape[0],):
        raise ValueError(f"scores must be [B, I] and target [B], got {tuple(scores.shape)} and {tuple(target.shape)}")
    if not torch.isfinite(scores).all():
        raise ValueError("scores contain NaN or inf; mask candidates with exclude= instead of -inf scores")
    if ((target < 0) | (target >= scores.shape[1])).any():
        raise ValueError(f"target indices must lie in [0, {scores.shape[1]})")
    if padding_idx is not None and (target == padding_idx).any():
        raise ValueError(f"a target is the padding item {padding_idx}; drop those rows")
    valid = torch.ones_like(scores, dtype=torch.bool)
    if padding_idx is not None:
        valid[:, padding_idx] = False
    if exclude is not None:
        valid &= ~exclude
    greater, ties = _position_bounds(scores.double(), target, valid)
    kmax = max(ks)
    positions = torch.arange(kmax + 1, dtype=torch.float64, device=scores.device)
    out: dict[str, torch.Tensor] = {}
    for name, weight in (("hr", torch.ones(kmax, dtype=torch.float64)), ("ndcg", 1 / torch.log2(positions[:kmax] + 2))):
        cum = torch.cat([weight.new_zeros(1), weight.cumsum(0)]).to(scores.device)  # cum[n] = sum of weights < n
        for k in ks:
            hi = torch.clamp(greater + ties + 1, max=k)
            lo = torch.clamp(greater, max=k)
            out[f"{name}@{k}"] = (cum[hi] - cum[lo]) / (ties + 1).double()
    return out


def mean_metrics(per_row: dict[str, torch.Tensor]) -> dict[str, float]:
    return {k: float(v.mean()) for k, v in per_row.items()}


def popularity_negatives(
    item_counts: torch.Tensor,
    target: torch.Tensor,
    n: int = 100,
    *,
    exclude: torch.Tensor | None = None,
    padding_idx: int | None = 0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``n`` distinct negatives per row drawn with probability ∝ popularity (DCRec's ``pop100``).

    The target, the padding item and ``exclude`` ([B, I] bool) are never drawn.

    Shapes: item_counts [I]; target [B]; returns [B, n] item indices.
    """
    weights = item_counts.double().clamp_min(0).expand(target.shape[0], -1).clone()
    weights.scatter_(1, target.view(-1, 1), 0.0)
    if padding_idx is not None:
        weights[:, padding_idx] = 0.0
    if exclude is not None:
        weights[exclude] = 0.0
    available = (weights > 0).sum(dim=1)
    if (available < n).any():
        raise ValueError(f"n={n} negatives requested but a row has only {int(available.min())} items with count > 0")
    return torch.multinomial(weights, n, replacement=False, generator=generator)
