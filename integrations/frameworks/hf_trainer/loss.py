"""The ``Trainer``'s ``compute_loss_func`` with any cl-plugins strategy (see the package's docstring)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import cl_plugins as clp

POOLERS = ("cls", "pooler")


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
        views = [z[labels == v] for v in range(int(labels.max()) + 1)]
        hard = views[2] if len(views) > 2 else None
        return self.loss_fn(views[0], views[1], hard_negatives=hard)
