"""Temperature oscillating with training time (Kukleva et al.).

    tau(t) = tau_min + 0.5 * (tau_max - tau_min) * (1 + cos(2 pi t / period))

``t`` counts optimizer steps (``period_unit="step"``, the default) or whole epochs
(``period_unit="epoch"``: ``t = step // steps_per_epoch``, so τ is held for an epoch, as in the
paper's script). Kukleva et al.'s period is 400 *epochs* (their ``--t_max 200`` in
``cos(pi * epoch / t_max)``) with τ from 0.1 to 1.0 over 2,000 epochs on CIFAR-10/100-LT: five
oscillations per run, ending at ``tau_max``. A period of 400 *steps* is a different schedule (a
few epochs per oscillation on ImageNet), so the ``"vision"`` preset counts epochs; the trainers of
``integrations/`` tell the loss their epoch length (:func:`cl_plugins.set_epoch_length`). The
paper's script counts epochs from 1, this formula from 0 (a shift of one epoch, 0.25% of the period).

Call :meth:`CosineScheduleLoss.step` once per optimizer step (``clp.after_optimizer_step``), not
per micro-batch under gradient accumulation. The counter is a persistent buffer, so it is saved
in ``state_dict`` and a resumed run continues on the same temperature; every rank holds the same
counter.

Paper: Kukleva et al., "Temperature Schedules for Self-Supervised Contrastive Methods on
Long-Tail Data" (ICLR 2023).

Example::

    loss_fn = CosineScheduleLoss(tau_min=0.1, tau_max=1.0, period=400, period_unit="epoch",
                                 steps_per_epoch=len(loader))
    for batch in loader:
        loss_fn(z1, z2).backward(); opt.step(); loss_fn.step()
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..base import ContrastiveLoss
from ..extension import Pairs
from ..registry import register_loss
from ..validation import check_choice, check_count, check_positive, check_temperature

PERIOD_UNITS = ("step", "epoch")


@register_loss("cosine_schedule")
class CosineScheduleLoss(ContrastiveLoss):
    """InfoNCE whose temperature follows a cosine of the training time (steps or epochs).

    Args:
        tau_min, tau_max: range of the temperature (0 < tau_min <= tau_max).
        period: length of one full oscillation, counted in ``period_unit`` (> 0) (default: 400).
        period_unit: ``"step"`` (optimizer steps) or ``"epoch"`` (default: ``"step"``; the
            ``"vision"`` preset: Kukleva et al.'s 400 epochs).
        steps_per_epoch: optimizer steps per epoch, needed by ``period_unit="epoch"``; a trainer may
            set it later with :func:`cl_plugins.set_epoch_length` (default: None).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    scalar_temperature = True

    step_count: torch.Tensor
    #: Kukleva et al.'s CIFAR-10/100-LT and ImageNet-100-LT setting (README: --temperature_min 0.1
    #: --temperature_max 1.0 --t_max 200, τ a function of the epoch)
    presets = {"vision": {"tau_min": 0.1, "tau_max": 1.0, "period": 400, "period_unit": "epoch"}}

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        # the host τ is the schedule's low end, Kukleva et al.'s range spans a factor 10 (0.1 to 1 on CIFAR)
        return {"tau_min": tau, "tau_max": 10.0 * tau}

    def __init__(
        self,
        tau_min: float = 0.1,
        tau_max: float = 1.0,
        period: float = 400,
        period_unit: str = "step",
        steps_per_epoch: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tau_min = check_temperature("tau_min", tau_min)
        self.tau_max = check_temperature("tau_max", tau_max)
        if self.tau_min > self.tau_max:
            raise ValueError(f"tau_min ({tau_min}) must not exceed tau_max ({tau_max})")
        self.period = check_positive("period", period)
        self.period_unit = check_choice("period_unit", period_unit, PERIOD_UNITS)
        self.steps_per_epoch: int | None = None
        if steps_per_epoch is not None:
            self.set_epoch_length(steps_per_epoch)
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))
        self._steps = 0  # step_count on the host: read every call without waiting for the device

    def set_epoch_length(self, steps_per_epoch: int) -> None:
        if isinstance(steps_per_epoch, bool) or not isinstance(steps_per_epoch, int) or steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch must be a positive int (optimizer steps per epoch), "
                             f"got {steps_per_epoch!r}")  # fmt: skip
        self.steps_per_epoch = steps_per_epoch

    def temperature(self, step: int | None = None) -> float:
        """τ after ``step`` optimizer steps (default: the steps taken so far)."""
        t = self.steps_taken if step is None else step
        if self.period_unit == "epoch":
            if self.steps_per_epoch is None:
                raise RuntimeError(
                    "cosine_schedule: period_unit='epoch' needs the epoch length: pass steps_per_epoch=N (optimizer "
                    "steps per epoch) or call clp.set_epoch_length(model, N) before training"
                )
            t //= self.steps_per_epoch
        return self.tau_min + 0.5 * (self.tau_max - self.tau_min) * (1 + math.cos(2 * math.pi * t / self.period))

    @property
    def steps_taken(self) -> int:
        """Optimizer steps so far: ``step_count`` (the buffer a checkpoint keeps) as the host counted them."""
        if "_steps" not in self.__dict__:  # a loss unpickled from before the host count
            self._steps = int(self.step_count)
        return self._steps

    def step(self, n: int = 1) -> None:
        """Advance the schedule by ``n`` steps."""
        n = check_count("n", n, low=0)
        self.step_count += n
        self._steps = self.steps_taken + n

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args)
        self._steps = int(self.step_count)  # loading a checkpoint reads the count once

    def after_optimizer_step(self) -> None:
        self.step()

    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        tau = self.temperature()
        self.record_tau(tau)
        return sim / tau

    def extra_repr(self) -> str:
        epoch = f", steps_per_epoch={self.steps_per_epoch}" if self.period_unit == "epoch" else ""
        return (f"tau_min={self.tau_min}, tau_max={self.tau_max}, period={self.period} {self.period_unit}s{epoch}, "
                + super().extra_repr())  # fmt: skip
