"""What a framework's callback does for the strategies, once for every framework.

* When training begins, the strategies are told the optimizer steps of an epoch
  (:func:`cl_plugins.set_epoch_length`; schedules counted in epochs need it): ``ceil(batches / accumulation)``,
  as a short last accumulation steps too. A loader of unknown length leaves it unset (such a schedule says so).
* After each optimizer step, not after each micro-batch under gradient accumulation, the strategies' upkeep
  runs (:func:`cl_plugins.after_optimizer_step`: ``learnable`` clamps, ``cosine_schedule`` advances).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from torch import nn

import cl_plugins as clp


class StrategyUpkeep:
    """The strategies' per-epoch and per-step upkeep for a framework's callback."""

    def __init__(self) -> None:
        self.last_step = 0  # a framework's step counter starts at 0: no optimizer step yet

    def begin(self, modules: Iterable[nn.Module], batches: float | None, accumulation: int,
              global_step: int = 0) -> None:
        """Training begins at ``global_step`` (a fit resumed from a checkpoint, or a second fit, starts past 0) with
        ``batches`` per epoch (None or inf: unknown) accumulated ``accumulation`` at a time."""
        self.last_step = global_step
        if batches is not None and math.isfinite(batches) and batches > 0:
            for module in modules:
                clp.set_epoch_length(module, math.ceil(batches / accumulation))

    def step(self, modules: Iterable[nn.Module], global_step: int | None = None) -> None:
        """An optimizer step ended; with ``global_step`` (a framework's counter) only a step that moved it counts."""
        if global_step is not None:
            if global_step == self.last_step:
                return
            self.last_step = global_step
        for module in modules:
            clp.after_optimizer_step(module)
