"""The strategies' upkeep as a ``Trainer`` callback
(:class:`cl_plugins.integrations.frameworks.upkeep.StrategyUpkeep`)."""

from __future__ import annotations

from typing import Any

from torch import nn
from transformers import TrainerCallback

from cl_plugins.integrations.frameworks.upkeep import StrategyUpkeep


class StrategyTrainerCallback(TrainerCallback):
    """Runs the strategies' per-step upkeep (:func:`cl_plugins.after_optimizer_step`) after each optimizer step,
    and tells them the optimizer steps of an epoch when training begins (:func:`cl_plugins.set_epoch_length`).

    Args:
        modules: the modules that hold the losses (default: None, the trainer's model, which holds an attached
            loss). sentence-transformers keeps its losses beside the model: pass them here.
    """

    def __init__(self, modules: list[nn.Module] | None = None) -> None:
        self.modules = modules
        self.upkeep = StrategyUpkeep()

    def _targets(self, model: nn.Module | None) -> list[nn.Module]:
        return self.modules if self.modules is not None else [model] if model is not None else []

    def on_train_begin(self, args: Any, state: Any, control: Any, model: nn.Module | None = None,
                       train_dataloader: Any = None, **kwargs: Any) -> None:  # fmt: skip
        batches = len(train_dataloader) if hasattr(train_dataloader, "__len__") else None
        self.upkeep.begin(self._targets(model), batches, args.gradient_accumulation_steps)

    def on_step_end(self, args: Any, state: Any, control: Any, model: nn.Module | None = None, **kwargs: Any) -> None:
        self.upkeep.step(self._targets(model))  # the Trainer calls this once per optimizer step
