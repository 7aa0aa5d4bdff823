"""The recipe as a ``LightningModule``: an encoder trained on two-view batches with a cl-plugins loss."""

from __future__ import annotations

import torch
from lightning.pytorch import LightningModule
from torch import nn

import cl_plugins as clp


class ContrastiveModule(LightningModule):
    """An encoder trained on two-view batches ``(x1, x2)`` with a cl-plugins loss; AdamW without decay on
    temperatures, biases and norms.

    Args:
        encoder: maps a view to embeddings [B, D].
        loss_fn: a built cl-plugins loss (a submodule: learned temperatures train and are saved).
        lr: learning rate (default: 1e-3).
        weight_decay: decay of the weights (default: 0.0).
        optimizer: ``"adamw"`` or ``"sgd"`` (default: "adamw").
    """

    def __init__(self, encoder: nn.Module, loss_fn: nn.Module, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: str = "adamw") -> None:  # fmt: skip
        super().__init__()
        if optimizer not in ("adamw", "sgd"):
            raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {optimizer!r}")
        self.encoder, self.loss_fn = encoder, loss_fn
        self.lr, self.weight_decay, self.optimizer_name = lr, weight_decay, optimizer

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        """``(x1, x2)``, or ``(x1, x2, y)`` with each pair's class for a loss built with a
        ``label_policy``."""
        if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
            raise ValueError("a batch is (x1, x2) or (x1, x2, labels), e.g. from TensorDataset(x1, x2[, y])")
        x1, x2, *labels = batch
        extra = {"labels": labels[0]} if labels else {}
        loss = self.loss_fn(self.encoder(x1), self.encoder(x2), **extra)
        self.log("train/loss", loss.detach(), prog_bar=True)
        for key, value in getattr(self.loss_fn, "stats", {}).items():
            if key != "loss":
                self.log(f"train/{key}", float(value))
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        groups = clp.param_groups(self, weight_decay=self.weight_decay)
        if self.optimizer_name == "sgd":
            return torch.optim.SGD(groups, lr=self.lr)
        return torch.optim.AdamW(groups, lr=self.lr)
