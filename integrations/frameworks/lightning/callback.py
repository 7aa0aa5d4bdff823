"""The strategies' upkeep as a Lightning callback
(:class:`cl_plugins.integrations.frameworks.upkeep.StrategyUpkeep`)."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

from cl_plugins.integrations.frameworks.upkeep import StrategyUpkeep


class StrategyLightningCallback(Callback):
    """Runs :func:`cl_plugins.after_optimizer_step` on the module after each optimizer step.

    A step happened when ``trainer.global_step`` moved since the last batch: with ``accumulate_grad_batches``
    the hook runs once per step, as it must (``learnable`` clamps after the step, ``cosine_schedule`` counts steps).
    At the start of training it tells the losses the optimizer steps of an epoch (:func:`cl_plugins.set_epoch_length`).
    """

    def __init__(self) -> None:
        self.upkeep = StrategyUpkeep()

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # counted from where this fit starts (fit(ckpt_path=...), a second fit with the same callback); an iterable
        # loader of unknown length has inf batches: the epoch length stays unset
        self.upkeep.begin([pl_module], trainer.num_training_batches, trainer.accumulate_grad_batches,
                          trainer.global_step)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:  # fmt: skip
        self.upkeep.step([pl_module], trainer.global_step)
