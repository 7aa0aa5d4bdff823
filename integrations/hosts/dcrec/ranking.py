"""Rank each evaluation row's target: full ranking over all items, and DCRec's ``pop100`` (the trainer's evaluation
and ``cl-plugins dcrec-eval``'s, :mod:`cl_plugins.integrations.hosts.dcrec.evaluate`)."""

from __future__ import annotations

import torch

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.evaluation.ranking import KS, popularity_negatives, ranking_metrics
from cl_plugins.integrations.hosts.dcrec.model import DCRec, DCRecGraphs
from cl_plugins.integrations.hosts.dcrec.splits import Rows

PROTOCOLS = ("full", "pop")


def history_mask(item_seq: torch.Tensor, num_items: int) -> torch.Tensor:
    """Bool [B, num_items]: the items of each history (padding excluded)."""
    mask = torch.zeros(item_seq.shape[0], num_items, dtype=torch.bool, device=item_seq.device)
    mask.scatter_(1, item_seq, True)
    mask[:, 0] = False
    return mask


@strict_flags
@torch.no_grad()
def evaluate(
    model: DCRec,
    rows: Rows,
    graphs: DCRecGraphs,
    popularity: torch.Tensor,
    *,
    protocols: tuple[str, ...] = PROTOCOLS,
    batch_size: int = 512,
    negatives: int = 100,
    seed: int = 0,
    exclude_history: bool = False,
    device: torch.device | str = "cpu",
    ks: tuple[int, ...] = KS,
) -> dict[str, dict[str, float]]:
    """``{"full": {"hr@1": …, "ndcg@10": …}, "pop100": {…}}`` averaged over ``rows``.

    ``pop`` (reported as ``pop<negatives>``, DCRec's ``pop100``) ranks the target against
    ``negatives`` items drawn without replacement with
    probability ∝ ``popularity``, never the target or an item of the row's history (the same
    draw for the same ``seed``). ``exclude_history`` also drops history items from the full
    ranking (off by default: repeat consumption is allowed in these data sets).
    """
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown:
        raise ValueError(f"protocols must be among {PROTOCOLS}, got {sorted(unknown)}")
    was_training = model.training
    model.eval()
    model.set_eval_graphs(graphs)
    tables = model.graph_tables()
    generator = torch.Generator().manual_seed(seed)
    keys = {"full": "full", "pop": f"pop{negatives}"}
    sums: dict[str, dict[str, float]] = {keys[p]: {} for p in protocols}
    for start in range(0, len(rows), batch_size):
        item_seq = rows.item_seq[start : start + batch_size].to(device)
        seq_len = rows.seq_len[start : start + batch_size].to(device)
        target = rows.target[start : start + batch_size].to(device)
        rep = model.represent(item_seq, seq_len, tables)
        seen = history_mask(item_seq, model.num_items)
        per_protocol = {}
        if "full" in protocols:
            per_protocol["full"] = ranking_metrics(
                model.score_all(rep), target, ks, exclude=seen if exclude_history else None
            )
        if "pop" in protocols:
            negs = popularity_negatives(
                popularity.cpu(), target.cpu(), negatives, exclude=seen.cpu(), generator=generator
            ).to(device)
            candidates = torch.cat([target[:, None], negs], dim=1)
            scores = model.score_candidates(rep, candidates)
            per_protocol[keys["pop"]] = ranking_metrics(scores, torch.zeros_like(target), ks, padding_idx=None)
        for protocol, values in per_protocol.items():
            for key, value in values.items():
                sums[protocol][key] = sums[protocol].get(key, 0.0) + float(value.sum())
    model.train(was_training)
    return {p: {k: v / len(rows) for k, v in metrics.items()} for p, metrics in sums.items()}


def format_metrics(metrics: dict[str, dict[str, float]]) -> str:
    return "  ".join(
        f"{protocol}: " + " ".join(f"{k}={v:.4f}" for k, v in sorted(values.items()))
        for protocol, values in metrics.items()
    )
