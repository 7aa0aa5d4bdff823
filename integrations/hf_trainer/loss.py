"""Contrastive training with the Hugging Face ``Trainer`` and any cl-plugins strategy.

Three pieces, one per seam the ``Trainer`` offers:

* :class:`ViewCollator` turns rows ``{"anchor": str, "positive": str[, "negative": str]}`` into one batch of
  every view stacked (anchors, then positives, then negatives) and ``labels`` = the view of each row;
* :class:`StrategyLossFunc` is the ``compute_loss_func``: it pools each row (``[CLS]`` or the pooler output),
  splits the views by ``labels`` and applies the strategy in the ``cross_view`` layout (anchors against every
  positive, negatives as hard negatives). :meth:`StrategyLossFunc.attach` makes it a submodule of the model, so
  a learned temperature moves with the model, is saved with it and is averaged by DDP;
* :func:`strategy_optimizer` is AdamW over :func:`cl_plugins.param_groups` (temperatures, biases and norms
  without weight decay: the ``Trainer``'s own grouping would decay ``learnable``'s ``log_tau``), and
  :class:`StrategyCallback` runs :func:`cl_plugins.after_optimizer_step` after every optimizer step
  (``learnable`` clamps its temperature, ``cosine_schedule`` advances).

Example::

    loss_func = StrategyLossFunc("macl", host_tau=0.05).attach(model)
    trainer = Trainer(model, args, train_dataset=pairs, data_collator=ViewCollator(tokenizer),
                      compute_loss_func=loss_func, optimizers=(strategy_optimizer(model, args), None),
                      callbacks=[StrategyCallback()])

``TrainingArguments(remove_unused_columns=False)`` keeps the text columns for the collator. Under several
processes the strategy gathers every rank's embeddings (the global batch's loss and gradient).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

import cl_plugins as clp

VIEWS = ("anchor", "positive", "negative")
POOLERS = ("cls", "pooler")


class ViewCollator:
    """Rows of ``anchor`` / ``positive`` (/ ``negative``) texts -> one tokenised batch [V·B, L] + ``labels`` [V·B].

    Args:
        tokenizer: a Hugging Face tokenizer.
        max_length: truncation length (default: 32, SimCSE's).
    """

    def __init__(self, tokenizer: Any, max_length: int = 32) -> None:
        self.tokenizer, self.max_length = tokenizer, max_length

    def __call__(self, rows: list[dict[str, str]]) -> dict[str, torch.Tensor]:
        views = [v for v in VIEWS if v in rows[0]]
        if views[:2] != ["anchor", "positive"]:
            raise ValueError(f"rows need 'anchor' and 'positive' texts (and may have 'negative'), got {list(rows[0])}")
        texts = [row[v] for v in views for row in rows]
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        batch["labels"] = torch.arange(len(views)).repeat_interleave(len(rows))
        return dict(batch)


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


def strategy_optimizer(model: nn.Module, args: Any) -> torch.optim.Optimizer:
    """AdamW at ``args.learning_rate`` with ``args.weight_decay`` on weights only (no temperature is decayed)."""
    groups = clp.param_groups(model, weight_decay=args.weight_decay)
    return torch.optim.AdamW(groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_epsilon)  # fmt: skip


class StrategyCallback(TrainerCallback):
    """Runs the strategies' per-step upkeep (:func:`cl_plugins.after_optimizer_step`) after each optimizer step,
    and tells them the optimizer steps of an epoch when training begins (:func:`cl_plugins.set_epoch_length`).

    Args:
        modules: the modules that hold the losses (default: None, the trainer's model, which holds an attached
            loss). sentence-transformers keeps its losses beside the model: pass them here.
    """

    def __init__(self, modules: list[nn.Module] | None = None) -> None:
        self.modules = modules

    def _targets(self, model: nn.Module | None) -> list[nn.Module]:
        return self.modules if self.modules is not None else [model] if model is not None else []

    def on_train_begin(self, args: Any, state: Any, control: Any, model: nn.Module | None = None,
                       train_dataloader: Any = None, **kwargs: Any) -> None:  # fmt: skip
        # the Trainer's optimizer steps per epoch (a short last accumulation steps too), for schedules in epochs
        if train_dataloader is not None and hasattr(train_dataloader, "__len__") and len(train_dataloader) > 0:
            steps = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
            for module in self._targets(model):
                clp.set_epoch_length(module, steps)

    def on_step_end(self, args: Any, state: Any, control: Any, model: nn.Module | None = None, **kwargs: Any) -> None:
        for module in self._targets(model):
            clp.after_optimizer_step(module)
