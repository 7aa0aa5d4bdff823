"""Decoupled contrastive loss (DCL): the positive is removed from the denominator.

    L_a = -s_ap / tau + log sum_{n in neg(a)} exp(s_an / tau)

Paper: Yeh et al., "Decoupled Contrastive Learning" (ECCV 2022). GraphCL's ``loss_cal`` uses
this form. Its gradient equals MACL's reweighted gradient and FlatNCE's (MACL §5).

Example::

    loss = DCLLoss(tau=0.1)(z1, z2)
"""

from __future__ import annotations

from typing import Any

from ..registry import register_loss
from .infonce import InfoNCELoss


@register_loss("dcl")
class DCLLoss(InfoNCELoss):
    """InfoNCE with the positive outside the denominator, at a constant ``tau``.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    default_decoupled = True
    decouplable = False  # decoupled by definition

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau": tau}

    def __init__(self, tau: float = 0.1, **kwargs: Any) -> None:
        if kwargs.get("decoupled") is False:
            raise ValueError("dcl is decoupled by definition; use build_loss('infonce') for decoupled=False")
        kwargs.pop("decoupled", None)
        super().__init__(tau=tau, **kwargs)
