"""FlatNCE.

    v_a = log sum_{n in neg(a)} exp((s_an - s_ap) / tau)     (= d_a of cl_plugins.extension)
    L_a = exp(v_a - sg(v_a))

The value is 1 by construction and the gradient is that of ``v_a``, which is DCL's gradient
(MACL §5.2). The InfoNCE value of the same logits is reported as ``stats["infonce"]``.

Paper: Chen et al., "Simpler, Faster, Stronger: Breaking The log-K Curse On Contrastive
Learners With FlatNCE" (2021).

Example::

    loss = FlatNCELoss(tau=0.1)(z1, z2)     # loss.item() == 1.0; loss.backward() trains
"""

from __future__ import annotations

from typing import Any

import torch

from ..extension import Pairs, softplus
from ..registry import register_loss
from .infonce import InfoNCELoss


@register_loss("flatnce")
class FlatNCELoss(InfoNCELoss):
    """FlatNCE at a constant ``tau``.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    decouplable = False  # FlatNCE's objective has no positive in its denominator to remove
    defined_without_negatives = False  # ... so without negatives its log-sum-exp is empty

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau": tau}

    def __init__(self, tau: float = 0.1, **kwargs: Any) -> None:
        if "decoupled" in kwargs:
            raise ValueError("flatnce has no decoupled option: its gradient is already the decoupled one")
        super().__init__(tau=tau, **kwargs)

    def pair_loss(self, logits: torch.Tensor, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        d = pairs.d(logits)
        self.record_d(d)
        detached = d.detach()
        self.record(infonce=lambda: softplus(detached).mean())
        return torch.exp(d - d.detach())
