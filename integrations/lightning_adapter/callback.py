"""cl-plugins strategies in Lightning (``lightning`` 2.x).

The recipe: the loss is a submodule of the ``LightningModule`` (it moves with the module, is saved in its
checkpoints, and DDP averages a learned temperature like a weight); ``configure_optimizers`` builds its groups with
:func:`cl_plugins.param_groups` (no weight decay on temperatures); :class:`StrategyCallback` runs
:func:`cl_plugins.after_optimizer_step` once per optimizer step, not once per micro-batch under gradient
accumulation. Under ``strategy="ddp"`` the loss gathers every rank's embeddings: the loss and gradients of the
global batch, as one process would compute them. :class:`ContrastiveModule` is that recipe for two-view batches.

Example::

    module = ContrastiveModule(encoder, clp.build_loss("macl", tau0=0.1), lr=1e-3, weight_decay=0.05)
    lightning.Trainer(max_epochs=100, callbacks=[StrategyCallback()]).fit(module, loader)   # loader: (x1, x2)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import nn

import cl_plugins as clp


class StrategyCallback(Callback):
    """Runs :func:`cl_plugins.after_optimizer_step` on the module after each optimizer step.

    A step happened when ``trainer.global_step`` moved since the last batch: with ``accumulate_grad_batches``
    the hook runs once per step, as it must (``learnable`` clamps after the step, ``cosine_schedule`` counts steps).
    At the start of training it tells the losses the optimizer steps of an epoch (:func:`cl_plugins.set_epoch_length`).
    """

    def __init__(self) -> None:
        self.last_step = 0

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # schedules counted in epochs need an epoch's optimizer steps (Lightning also steps on a short last
        # accumulation); an iterable loader of unknown length leaves it unset, and such a schedule then says so
        batches = trainer.num_training_batches
        if math.isfinite(batches) and batches > 0:
            clp.set_epoch_length(pl_module, math.ceil(batches / trainer.accumulate_grad_batches))

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:  # fmt: skip
        if trainer.global_step != self.last_step:
            self.last_step = trainer.global_step
            clp.after_optimizer_step(pl_module)


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

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x1, x2 = batch
        loss = self.loss_fn(self.encoder(x1), self.encoder(x2))
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
