"""The weighted kNN monitor of InstDisc / MoCo's CIFAR demo / DySTreSS, and top-k accuracy.

For a query feature f and the bank of training features b_j with labels y_j (all L2-normalised),
take the k most cosine-similar b_j, weight each by exp(s_j / t), and score class c by the sum of
the weights of the neighbours labelled c; the prediction ranks the classes by score.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def knn_predict(
    features: torch.Tensor,
    bank: torch.Tensor,
    bank_labels: torch.Tensor,
    num_classes: int,
    k: int = 200,
    t: float = 0.1,
    chunk: int = 1024,
) -> torch.Tensor:
    """Class scores [Q, C] of the cosine-weighted kNN vote.

    Shapes:
        features: [Q, D]; bank: [N, D]; bank_labels: [N] int; returns [Q, num_classes].
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if t <= 0:
        raise ValueError(f"t must be > 0, got {t}")
    if bank.shape[0] != bank_labels.shape[0]:
        raise ValueError(f"bank has {bank.shape[0]} rows but bank_labels has {bank_labels.shape[0]}")
    k = min(k, bank.shape[0])
    bank = F.normalize(bank.float(), dim=1)
    out = []
    for start in range(0, features.shape[0], chunk):
        q = F.normalize(features[start : start + chunk].float(), dim=1)
        sim, idx = (q @ bank.T).topk(k, dim=1)
        weight = (sim / t).exp()
        onehot = F.one_hot(bank_labels[idx], num_classes).to(weight.dtype)
        out.append((onehot * weight.unsqueeze(-1)).sum(dim=1))
    return torch.cat(out)


def topk_accuracy(scores: torch.Tensor, labels: torch.Tensor, ks: tuple[int, ...] = (1, 5)) -> dict[int, float]:
    """Fraction of rows whose label is among the ``k`` highest scores, for each k (capped at C)."""
    result = {}
    for k in ks:
        top = scores.topk(min(k, scores.shape[1]), dim=1).indices
        result[k] = float((top == labels.view(-1, 1)).any(dim=1).float().mean())
    return result


def knn_accuracy(
    features: torch.Tensor,
    labels: torch.Tensor,
    bank: torch.Tensor,
    bank_labels: torch.Tensor,
    num_classes: int,
    k: int = 200,
    t: float = 0.1,
) -> dict[str, float]:
    """``{"top1": ..., "top5": ...}`` of :func:`knn_predict` (top-5 only when there are more than 5 classes)."""
    scores = knn_predict(features, bank, bank_labels, num_classes, k, t)
    ks = (1, 5) if num_classes > 5 else (1,)
    return {f"top{key}": value for key, value in topk_accuracy(scores, labels, ks).items()}
