"""Decoupled contrastive loss (DCL): the positive is removed from the denominator; DCLW weighs the positive.

    L_a = -w_a s_ap / tau + log sum_{n in neg(a)} exp(s_an / tau)

with w_a = 1 (DCL) or, given ``sigma`` (DCLW), the von Mises-Fisher weight of Yeh et al.

    w_a = 2 - P * softmax_a(s_ap / sigma)

over the P positive pairs of the global batch (detached: a weight, not a path for gradients). Pairs whose views
agree less than average weigh more than 1, easy ones less; the weights average to 1. In the SimCLR layout the
2N anchors hold each pair twice, which gives w = 2 - N softmax over the N pairs, lightly's ``DCLWLoss``
(``negative_mises_fisher_weights``, sigma = 0.5 by default). Lightly takes the softmax over each process's own
pairs; here it is over the global batch, so that several processes give the single-process loss.

Paper: Yeh et al., "Decoupled Contrastive Learning" (ECCV 2022). GraphCL's ``loss_cal`` uses the DCL
form. DCL's gradient equals MACL's reweighted gradient and FlatNCE's (MACL §5).

Example::

    loss = DCLLoss(tau=0.1)(z1, z2)
    loss = DCLLoss(tau=0.1, sigma=0.5)(z1, z2)   # DCLW
"""

from __future__ import annotations

from typing import Any

import torch

from ..distributed import gather_no_grad, is_distributed
from ..extension import Pairs
from ..registry import register_loss
from ..validation import check_flag, check_temperature
from .infonce import InfoNCELoss


@register_loss("dcl")
class DCLLoss(InfoNCELoss):
    """InfoNCE with the positive outside the denominator, at a constant ``tau``; with ``sigma``, DCLW.

    Args:
        tau: temperature (> 0) (default: 0.1).
        sigma: DCLW's von Mises-Fisher weighting temperature (> 0; lightly's default is 0.5), or None for
            DCL (default: None).

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    default_decoupled = True
    decouplable = False  # decoupled by definition

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau": tau}

    def __init__(self, tau: float = 0.1, sigma: float | None = None, **kwargs: Any) -> None:
        if check_flag("decoupled", kwargs.pop("decoupled", None), optional=True) is False:
            raise ValueError("dcl is decoupled by definition; use build_loss('infonce') for decoupled=False")
        super().__init__(tau=tau, **kwargs)
        self.sigma = None if sigma is None else check_temperature("sigma", sigma)
        if self.sigma is not None and self.label_policy is not None and self.label_policy.form == "in":
            raise ValueError("dcl's sigma weights each positive pair; label_policy='positives_in' has one term per "
                             "anchor: use 'positives_out' or 'positives_pair' with sigma")  # fmt: skip

    def pair_loss(self, logits: torch.Tensor, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        d = super().pair_loss(logits, sim, pairs)
        if self.sigma is None:
            return d
        w = self.pair_weights(pairs.positive(sim).detach())
        self.record(weight_min=lambda: w.min(), weight_max=lambda: w.max())
        return d + (1 - w) * pairs.positive(logits)  # d = lse - pos, so this is lse - w pos

    @torch.no_grad()
    def pair_weights(self, cosines: torch.Tensor) -> torch.Tensor:
        """w = 2 - P softmax(s / sigma) over the positive pairs of every process [P] -> [P]."""
        assert self.sigma is not None
        everyone = gather_no_grad(cosines[:, None])[:, 0] if self.gather_distributed and is_distributed() else cosines
        scaled = everyone.double() / self.sigma
        return (2 - everyone.numel() * torch.exp(cosines.double() / self.sigma - torch.logsumexp(scaled, 0))).to(
            cosines.dtype
        )

    def extra_repr(self) -> str:
        return super().extra_repr() + ("" if self.sigma is None else f", sigma={self.sigma}")
