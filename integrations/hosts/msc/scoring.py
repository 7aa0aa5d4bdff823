"""Anomaly scores and ROC-AUC for the one-class protocol (MSC, PANDA, ...).

The score of a test image is the sum of the squared L2 distances from its feature to its ``k``
nearest training (normal-class) features: what MSC computes with ``faiss.IndexFlatL2`` (which
returns squared distances), here exact in torch. ROC-AUC is the Mann–Whitney statistic with
average ranks for ties, which is what ``sklearn.metrics.roc_auc_score`` returns.
"""

from __future__ import annotations

import torch


def knn_anomaly_score(train: torch.Tensor, test: torch.Tensor, k: int = 2, chunk: int = 2048) -> torch.Tensor:
    """Sum of squared L2 distances of every test row to its ``k`` nearest train rows.

    Shapes:
        train: [N, D]; test: [M, D]; returns [M] (float64).
    """
    if train.dim() != 2 or test.dim() != 2 or train.shape[1] != test.shape[1]:
        raise ValueError(f"train and test must be [N, D] and [M, D], got {tuple(train.shape)} and {tuple(test.shape)}")
    if not 1 <= k <= train.shape[0]:
        raise ValueError(f"k must be in [1, {train.shape[0]}] (the number of train features), got {k}")
    train = train.double()
    train_sq = (train * train).sum(dim=1)
    out = []
    for start in range(0, test.shape[0], chunk):
        q = test[start : start + chunk].double()
        d2 = ((q * q).sum(dim=1, keepdim=True) + train_sq - 2 * q @ train.T).clamp_min(0)
        out.append(d2.topk(k, dim=1, largest=False).values.sum(dim=1))
    return torch.cat(out)


def roc_auc(labels: torch.Tensor, scores: torch.Tensor) -> float:
    """Area under the ROC curve of ``scores`` for the binary ``labels`` (1 = positive, e.g. anomalous).

    Equals the probability that a random positive scores higher than a random negative (ties
    count one half).
    """
    labels = torch.as_tensor(labels).flatten()
    scores = torch.as_tensor(scores, dtype=torch.float64).flatten()
    if labels.shape != scores.shape:
        raise ValueError(f"labels and scores must have the same length, got {labels.numel()} and {scores.numel()}")
    if not torch.isfinite(scores).all():
        raise ValueError("scores contain NaN or inf")
    values = labels.unique()
    if not set(values.tolist()) <= {0, 1} or values.numel() != 2:
        raise ValueError("labels must contain both classes 0 and 1 (and nothing else)")
    order = scores.argsort()
    sorted_scores = scores[order]
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    # average the ranks of tied scores
    _, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    avg = ends - (counts.double() - 1) / 2
    ranks[order] = avg[inverse]
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
