"""CLIP-style learnable temperature.

    tau = max(exp(log_tau), min_tau),    logits = s / tau

``log_tau`` is an ``nn.Parameter`` (log-space, as CLIP's ``logit_scale``). It gets a gradient,
so it must be in the optimizer; exclude it from weight decay (:func:`cl_plugins.param_groups`
does) and call :meth:`LearnableTemperatureLoss.clamp_` after each optimizer step so the
parameter itself never drifts below ``log(min_tau)`` (open_clip clamps the same way).
Under DDP, ``accelerator.prepare(loss_fn)`` (or putting the loss inside the wrapped model)
keeps the temperature identical on every rank: its gradient is averaged like any other.

Masking happens after the division, so excluded entries never reach ``d loss / d log_tau``
(the -inf / tau NaN trap).

Paper: Radford et al., "Learning Transferable Visual Models From Natural Language
Supervision" (CLIP, ICML 2021).

Example::

    loss_fn = LearnableTemperatureLoss(init_tau=0.07)
    opt = torch.optim.AdamW(clp.param_groups(torch.nn.ModuleList([model, loss_fn]), 0.05))
    loss_fn(z1, z2).backward(); opt.step(); loss_fn.clamp_()
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..base import ContrastiveLoss
from ..extension import Pairs, divide
from ..registry import register_loss
from ..validation import check_temperature


@register_loss("learnable")
class LearnableTemperatureLoss(ContrastiveLoss):
    """InfoNCE with a learned scalar temperature.

    Args:
        init_tau: initial temperature (> min_tau).
        min_tau: lower bound of the temperature (> 0; CLIP's is 0.01).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    scalar_temperature = True

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"init_tau": tau}  # learning starts at the host's τ

    def __init__(self, init_tau: float = 0.07, min_tau: float = 0.01, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        init_tau = check_temperature("init_tau", init_tau)
        self.min_tau = check_temperature("min_tau", min_tau)
        if init_tau < self.min_tau:
            raise ValueError(f"init_tau ({init_tau}) must be >= min_tau ({min_tau})")
        self.log_tau = nn.Parameter(torch.tensor(math.log(init_tau)))

    @property
    def tau(self) -> torch.Tensor:
        return self.log_tau.exp().clamp(min=self.min_tau)

    @torch.no_grad()
    def clamp_(self) -> None:
        """Project the parameter back to tau >= min_tau (call after ``optimizer.step()``)."""
        self.log_tau.clamp_(min=math.log(self.min_tau))

    def after_optimizer_step(self) -> None:
        self.clamp_()

    def no_weight_decay(self) -> set[str]:
        return {"log_tau"}

    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        tau = self.once_per_call("tau", lambda: self.tau)  # one tensor for every block: CLIP's directions share it
        self.record_tau(tau.detach())
        return divide(sim, tau, self.min_tau)

    def extra_repr(self) -> str:
        return f"min_tau={self.min_tau}, " + super().extra_repr()
