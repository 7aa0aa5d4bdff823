"""Temperature-free InfoNCE: the logit of a pair is 2 * atanh(s) instead of s / tau.

    logit_ij = 2 * atanh(clamp(s_ij, -1 + eps, 1 - eps)) = log((1 + s_ij) / (1 - s_ij))

d logit / d s = 2 / (1 - s^2): 2 at s = 0 (like tau = 0.5), growing without bound towards
s = +-1, so gradients stay alive away from the optimum and vanish only at it.

Self-pairs (s_ii = 1) would give an infinite logit. Here they never enter the softmax: the
clamp keeps every logit finite (at most 2 atanh(1 - eps), 14.5 for eps = 1e-6) and excluded
entries are replaced by -inf before any sum, so no inf - inf (GRACE's
``refl.sum() - refl.diag()``) can occur. Logits are computed in float32 also under autocast
(bf16 cannot resolve 1 - s below ~4e-3).

Paper: Kim & Kim, "Temperature-Free Loss Function for Contrastive Learning" (arXiv 2501.17683).

Example::

    loss = TemperatureFreeLoss()(z1, z2)
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..base import ContrastiveLoss
from ..extension import LazyLogits, LogitMap, Pairs, logit_statement, m
from ..registry import register_loss


@logit_statement
def _map(x, params, unused, closed=False):  # type: ignore[no-untyped-def]
    """The logit map stated once (:mod:`cl_plugins.kernels.statement`): (2 atanh(c), its derivative, no statistic)
    at c = x clamped to ``params`` = (lo, hi); with ``closed`` its exponential in closed form, exp(phi) = (1 + c) /
    (1 - c) = 2 r - 1 and exp(phi) phi' = 2 r^2 with r = 1 / (1 - c) (bounded: the kernels sum them without a
    maximum, no logarithm, no exponential). The derivative is 0 where the clamp bites. 2 atanh(c) = log((1 + c)^2 q)
    and phi' = 2 q share one division, q = 1 / ((1 - c)(1 + c)) (on the H200 15.5 ms against 16.5 with two,
    benchmarks/gpu_map_cost.py), 1 - c^2 as (1 - c)(1 + c): exact near c = 1 in float32."""
    c = m.clamp(x, params[0], params[1])
    if closed:
        r = 1.0 / (1.0 - c)
        phi = 2.0 * r - 1.0
        slope = 2.0 * r * r
    else:
        plus = 1.0 + c
        inverse = 1.0 / ((1.0 - c) * plus)
        phi = m.log(plus * plus * inverse)
        slope = 2.0 * inverse
    return phi, m.where(c == x, slope, 0.0), 0.0


def effective_inverse_tau(s: torch.Tensor) -> torch.Tensor:
    """2 atanh(s) / s: the 1/tau a fixed-temperature loss would need to give the same logit (2 at s = 0)."""
    small = s.abs() <= 1e-6
    safe = torch.where(small, torch.ones_like(s), s)
    return torch.where(small, torch.full_like(s, 2.0), _map.torch(safe, (-1.0, 1.0), 0)[0] / safe)


@register_loss("temperature_free")
class TemperatureFreeLoss(ContrastiveLoss):
    """InfoNCE with logits 2 atanh(s).

    Args:
        eps: clamp margin, similarities are clamped to [-1 + eps, 1 - eps] (0 < eps < 0.5).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {}  # no temperature: 2·atanh(s) replaces s / τ

    def __init__(self, eps: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(eps, (int, float)) or not 0 < eps < 0.5:
            raise ValueError(f"eps must lie in (0, 0.5), got {eps!r}; 1e-6 is the default")
        self.eps = float(eps)

    @property
    def _bounds(self) -> tuple[float, float]:
        """The clamp's [lo, hi]."""
        return -1 + self.eps, 1 - self.eps

    def _clamped(self, sim: torch.Tensor) -> torch.Tensor:
        return sim.clamp(*self._bounds)

    def logit_map(self, pairs: Pairs) -> LogitMap:
        bound = math.log((2 - self.eps) / self.eps)  # 2 atanh(1 - eps)
        return LogitMap.of_statement(_map, self._bounds, closed=True, bound=bound, compile_maps=self.compile_maps,
                                     health=self.kernel_health)  # fmt: skip

    def logits(self, sim: torch.Tensor | LazyLogits, pairs: Pairs) -> torch.Tensor | LazyLogits:
        positive = pairs.positive(sim).detach()
        # the effective 1/tau of a pair is logit / s, 2 at s -> 0
        self.record(inv_tau_pos_mean=lambda: effective_inverse_tau(self._clamped(positive)).mean())
        if isinstance(sim, LazyLogits):
            return sim.mapped(self.logit_map(pairs))
        return _map(sim, self._bounds)[0]

    def extra_repr(self) -> str:
        return f"eps={self.eps}, " + super().extra_repr()
