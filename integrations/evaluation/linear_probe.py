"""Linear probing on frozen features: a softmax classifier trained on precomputed backbone features.

Features are standardised with the training set's mean and std, then a single ``nn.Linear`` is
trained with Adam and cross-entropy (no augmentation: the features are computed once from the
evaluation view, which keeps the probe CPU-sized). Reports top-1 / top-5 on the test features.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cl_plugins.integrations.evaluation.knn import topk_accuracy


def linear_probe(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    test_features: torch.Tensor,
    test_labels: torch.Tensor,
    num_classes: int,
    *,
    epochs: int = 100,
    lr: float = 1e-2,
    weight_decay: float = 0.0,
    batch_size: int = 256,
    seed: int = 0,
) -> dict[str, float]:
    """Test ``{"top1", "top5"}`` of a linear classifier trained on ``train_features``.

    Shapes:
        train_features: [N, D]; train_labels: [N]; test_features: [M, D]; test_labels: [M].
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    gen = torch.Generator().manual_seed(seed)
    mean = train_features.float().mean(dim=0, keepdim=True)
    std = train_features.float().std(dim=0, keepdim=True).clamp_min(1e-6)
    x_train = (train_features.float() - mean) / std
    x_test = (test_features.float() - mean) / std
    clf = nn.Linear(x_train.shape[1], num_classes)
    with torch.no_grad():
        bound = 1 / x_train.shape[1] ** 0.5
        clf.weight.uniform_(-bound, bound, generator=gen)
        clf.bias.zero_()
    opt = torch.optim.Adam(clf.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    for _ in range(epochs):
        order = torch.randperm(x_train.shape[0], generator=gen)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            loss = F.cross_entropy(clf(x_train[idx]), train_labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    with torch.no_grad():
        scores = clf(x_test)
    ks = (1, 5) if num_classes > 5 else (1,)
    return {f"top{k}": v for k, v in topk_accuracy(scores, test_labels, ks).items()}
