"""Fixed-temperature InfoNCE / NT-Xent.

    L_a = -log  exp(s_ap / tau) / (exp(s_ap / tau) + sum_{n in neg(a)} exp(s_an / tau))

Paper: Chen et al., "A Simple Framework for Contrastive Learning of Visual Representations"
(SimCLR, ICML 2020); van den Oord et al., "Representation Learning with Contrastive
Predictive Coding" (2018).

Example::

    loss_fn = InfoNCELoss(tau=0.1)                  # SimCLR layout: 2N anchors, 2N-2 negatives
    loss = loss_fn(z1, z2)                          # z1, z2: [N, D]
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import ContrastiveLoss
from ..extension import Pairs
from ..registry import register_loss
from ..validation import check_temperature


@register_loss("infonce")
class InfoNCELoss(ContrastiveLoss):
    """InfoNCE with a constant temperature ``tau``.

    Args:
        tau: temperature (> 0). Logits are ``s / tau``.
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`
            (``layout``, ``symmetric``, ``decoupled``, ``reduction``, ...).

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    scalar_temperature = True

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau": tau}

    def __init__(self, tau: float = 0.1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tau = check_temperature("tau", tau)

    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        self.record_tau(self.tau)
        return sim / self.tau

    def extra_repr(self) -> str:
        return f"tau={self.tau}, " + super().extra_repr()
