"""Temperature oscillating with the training step (Kukleva et al.).

    tau(t) = tau_min + 0.5 * (tau_max - tau_min) * (1 + cos(2 pi t / period))

``t`` counts optimizer steps (or epochs: the unit is whatever you advance): call
:meth:`CosineScheduleLoss.step` once per optimizer step, not per micro-batch under gradient
accumulation. The counter is a persistent buffer, so it is saved in ``state_dict`` and a
resumed run continues on the same temperature; every rank holds the same counter.

Paper: Kukleva et al., "Temperature Schedules for Self-Supervised Contrastive Methods on
Long-Tail Data" (ICLR 2023).

Example::

    loss_fn = CosineScheduleLoss(tau_min=0.1, tau_max=1.0, period=400)
    for batch in loader:
        loss_fn(z1, z2).backward(); opt.step(); loss_fn.step()
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..base import ContrastiveLoss
from ..pairs import Pairs
from ..registry import register_loss
from ..validation import check_positive, check_temperature


@register_loss("cosine_schedule")
class CosineScheduleLoss(ContrastiveLoss):
    """InfoNCE whose temperature follows a cosine of the step counter.

    Args:
        tau_min, tau_max: range of the temperature (0 < tau_min <= tau_max).
        period: steps of one full oscillation (> 0).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    scalar_temperature = True

    step_count: torch.Tensor

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        # the host τ is the schedule's low end, Kukleva et al.'s range spans a factor 10 (0.1 to 1 on CIFAR)
        return {"tau_min": tau, "tau_max": 10.0 * tau}

    def __init__(self, tau_min: float = 0.1, tau_max: float = 1.0, period: float = 400, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tau_min = check_temperature("tau_min", tau_min)
        self.tau_max = check_temperature("tau_max", tau_max)
        if self.tau_min > self.tau_max:
            raise ValueError(f"tau_min ({tau_min}) must not exceed tau_max ({tau_max})")
        self.period = check_positive("period", period)
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))

    def temperature(self, step: int | None = None) -> float:
        t = int(self.step_count) if step is None else step
        return self.tau_min + 0.5 * (self.tau_max - self.tau_min) * (1 + math.cos(2 * math.pi * t / self.period))

    def step(self, n: int = 1) -> None:
        """Advance the schedule by ``n`` steps."""
        self.step_count += n

    def after_optimizer_step(self) -> None:
        self.step()

    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        tau = self.temperature()
        self.record_tau(tau)
        return sim / tau

    def extra_repr(self) -> str:
        return f"tau_min={self.tau_min}, tau_max={self.tau_max}, period={self.period}, " + super().extra_repr()
