"""Dual temperature (SimCo / SimMoCo): separate intra-anchor and inter-anchor temperatures.

    P(tau)   = softmax over {pos, negatives} of s / tau, at the positive
    W(tau)   = 1 - P(tau)
    L_a      = -sg(W(tau_beta) / W(tau_alpha)) * log P(tau_alpha)

The gradient w.r.t. the logits at tau_alpha is W(tau_beta) times that of the decoupled loss:
the negative distribution comes from tau_alpha (intra-anchor), the pull strength from
tau_beta (inter-anchor). With tau_beta = tau_alpha it is plain InfoNCE. The weight is computed
as exp(logsigmoid(d_beta) - logsigmoid(d_alpha)) in float32, never as a ratio of 1 - P.

Paper: Zhang et al., "Dual Temperature Helps Contrastive Learning Without Many Negative
Samples: Towards Understanding and Simplifying MoCo" (CVPR 2022). SimCo uses
``layout="cross_view", symmetric=True``.

Example::

    loss_fn = DualTemperatureLoss(tau_alpha=0.1, tau_beta=1.0, layout="cross_view", symmetric=True)
    loss = loss_fn(q1, q2)
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import ContrastiveLoss
from ..extension import Pairs, reweighted_nll
from ..registry import register_loss
from ..validation import check_temperature


@register_loss("dual_temperature")
class DualTemperatureLoss(ContrastiveLoss):
    """InfoNCE at ``tau_alpha`` reweighted per anchor by sg(W(tau_beta) / W(tau_alpha)).

    Args:
        tau_alpha: intra-anchor temperature (SimCo: 0.1).
        tau_beta: inter-anchor temperature (SimCo: 1.0 = ``dt_m`` 10 x tau_alpha).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    scalar_temperature = True

    decouplable = False  # its intra-anchor term keeps the positive by definition
    presets = {"vision": {"tau_alpha": 0.1, "tau_beta": 1.0}}  # SimCo, CIFAR (dt_m = 10)

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau_alpha": tau, "tau_beta": 10.0 * tau}  # SimCo's ratio dt_m = 10

    def __init__(self, tau_alpha: float = 0.1, tau_beta: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.decoupled:
            raise ValueError("dual_temperature is defined with the positive in the denominator; drop decoupled=True")
        self.tau_alpha = check_temperature("tau_alpha", tau_alpha)
        self.tau_beta = check_temperature("tau_beta", tau_beta)

    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        self.record_tau(self.tau_alpha)
        return sim / self.tau_alpha

    def pair_loss(self, logits: torch.Tensor, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        d_alpha, d_beta = pairs.d_with(logits, (self.tau_alpha / self.tau_beta,))
        self.record_d(d_alpha)
        with torch.no_grad():
            w_beta = torch.sigmoid(d_beta)
            value = w_beta * reweighted_nll(d_alpha)
            self.record(w_beta_mean=lambda: w_beta.mean())
        # sg(W_b / W_a) * softplus(d_a) has gradient W_b * d(d_a); written so that it stays
        # exact when W_a underflows
        grad_path = w_beta * d_alpha
        return grad_path + (value - grad_path).detach()

    def extra_repr(self) -> str:
        return f"tau_alpha={self.tau_alpha}, tau_beta={self.tau_beta}, " + super().extra_repr()
