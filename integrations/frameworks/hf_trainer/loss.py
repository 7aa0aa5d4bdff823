"""The ``Trainer``'s ``compute_loss_func`` with any cl-plugins strategy (see the package's docstring)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import cl_plugins as clp

POOLERS = ("cls", "pooler")


def split_views(labels: torch.Tensor, rows: int) -> list[torch.Tensor]:
    """Row indices of view 0, view 1 (and the hard negatives, view 2) from ``ViewCollator``'s ``labels`` (its
    first row when it also carries classes), or one line saying what is wrong with them."""
    fix = "build the batches with ViewCollator, whose labels give each row's view"
    if isinstance(labels, torch.Tensor) and labels.dim() == 2 and labels.shape[0] == 2:
        labels = labels[0]
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.numel() != rows:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a 1-D tensor with one view index per row ({rows} rows), got {shape}; {fix}")
    if labels.is_floating_point() or labels.is_complex():
        raise TypeError(f"labels must hold integer view indices, got dtype {labels.dtype}; {fix}")
    counts = torch.bincount(labels.clamp(-1, 3) + 1, minlength=5).tolist()[1:4] if rows else [0, 0, 0]
    if rows == 0 or bool(((labels < 0) | (labels > 2)).any()) or counts[0] == 0 or counts[0] != counts[1] or (
        counts[2] not in (0, counts[0])
    ):
        raise ValueError(f"labels must give as many rows of view 0 as of view 1 (and of hard negatives, view 2, if "
                         f"any), one or more each; got {counts} rows of views 0, 1, 2 among {rows}; {fix}")  # fmt: skip
    return [(labels == v).nonzero().flatten() for v in range(3 if counts[2] else 2)]


class StrategyLossFunc(nn.Module):
    """``compute_loss_func(outputs, labels, num_items_in_batch=None)`` of a ``Trainer``, with strategy ``loss``.

    Args:
        loss: a registry name or a built ``cross_view`` cl-plugins loss (default: "infonce").
        host_tau: the temperature the strategy maps from (default: 0.05, SimCSE's and sentence-transformers').
        pooler: ``"cls"`` (the first token's last hidden state) or ``"pooler"`` (``pooler_output``)
            (default: "cls").
        feature_dim: the embeddings' width, for strategies with their own heads (AMCL) (default: None).
        **loss_args: the strategy's own arguments.
    """

    def __init__(self, loss: str | clp.ContrastiveLoss = "infonce", *, host_tau: float = 0.05, pooler: str = "cls",
                 feature_dim: int | None = None, **loss_args: Any) -> None:  # fmt: skip
        super().__init__()
        if pooler not in POOLERS:
            raise ValueError(f"pooler must be one of {POOLERS}, got {pooler!r}")
        self.pooler = pooler
        self.loss_fn = loss if isinstance(loss, nn.Module) else clp.build_host_loss(
            loss, host_tau=host_tau, layout="cross_view", feature_dim=feature_dim, **loss_args)  # fmt: skip

    def attach(self, model: nn.Module) -> StrategyLossFunc:
        """Register this loss as ``model.cl_plugins_loss`` (device, checkpoints, DDP, optimizer follow)."""
        model.cl_plugins_loss = self
        return self

    def pool(self, outputs: Any) -> torch.Tensor:
        if self.pooler == "pooler":
            return outputs.pooler_output
        return outputs.last_hidden_state[:, 0]

    def forward(self, outputs: Any, labels: torch.Tensor | None, num_items_in_batch: Any = None) -> torch.Tensor:
        if labels is None:
            raise ValueError("labels (the view of each row) are missing: build the batches with ViewCollator")
        z = self.pool(outputs)
        rows = split_views(labels, z.shape[0])
        views = [z[v] for v in rows]
        hard = views[2] if len(views) > 2 else None
        classes = labels[1][rows[0]] if labels.dim() == 2 else None  # each pair's class, from its anchor row
        if classes is not None and not getattr(self.loss_fn, "uses_labels", False):
            raise ValueError("the batch carries class labels (a 'label' column) but the loss has no use for them: "
                             "build StrategyLossFunc(..., label_policy='exclude') (or 'positives_out', ...), or drop "
                             "the column")  # fmt: skip
        extra = {} if classes is None else {"labels": classes}
        return self.loss_fn(views[0], views[1], hard_negatives=hard, **extra)
