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
from ..extension import LazyLogits, LogitMap, Pairs, Terms, TritonMap, tl, triton_map
from ..registry import register_loss


def effective_inverse_tau(s: torch.Tensor) -> torch.Tensor:
    """2 atanh(s) / s: the 1/tau a fixed-temperature loss would need to give the same logit."""
    safe = torch.where(s.abs() > 1e-6, s, torch.ones_like(s))
    return torch.where(s.abs() > 1e-6, 2 * torch.atanh(safe) / safe, torch.full_like(s, 2.0))


def closed_form(s: torch.Tensor, lo: float, hi: float, grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """exp(2 atanh c) and, with ``grad``, exp(phi) phi' at the clamped c = clamp(s, lo, hi): with r = 1 / (1 - c),
    (1 + c) / (1 - c) = 2 r - 1, at most 2 / eps (the kernels sum it without a running maximum), and 2 r^2
    (phi' = 2 / (1 - c^2); 0 outside the clamp, where the clamp passes no gradient). One loop when compiled
    (:mod:`cl_plugins.kernels.compiled`)."""
    inside = _inside(s, lo, hi)  # the clamp binds nowhere: neither it nor its gradient's mask
    c = s if inside else s.clamp(lo, hi)
    r = torch.rsub(c, 1).reciprocal_()
    factor = None
    if grad:
        factor = r.square().mul_(2)
        factor = factor if inside else torch.where(c == s, factor, 0.0)
    return r.mul_(2).sub_(1), factor


def _inside(s: torch.Tensor, lo: float, hi: float) -> bool:
    """Whether every entry of the CPU tile ``s`` lies in [lo, hi]: one reduction that saves the clamp's passes
    (most tiles hold no pair within eps of +-1: a row's own column is the exception). False on a GPU, where reading
    the answer would stall the stream, and when compiling, where the passes are fused anyway."""
    if s.device.type != "cpu" or torch.compiler.is_compiling() or s.numel() == 0:
        return False
    low, high = torch.aminmax(s)
    return bool(low >= lo) and bool(high <= hi)


def _terms(s: torch.Tensor, lo: float, hi: float, derivative: bool,
           statistic: bool) -> Terms:  # fmt: skip
    """The logit map stated once (:meth:`~cl_plugins.extension.LogitMap.of_terms`): (2 atanh(c), its derivative
    where asked for, no statistic) at c = clamp(s, lo, hi); the clamp passes the gradient on [lo, hi], bounds
    included, as autograd's does."""
    c = s.clamp(lo, hi)
    return 2 * torch.atanh(c), (torch.where(c == s, 2 / (1 - c * c), 0.0) if derivative else None), None


@triton_map
def _triton_form(x, params, unused):  # type: ignore[no-untyped-def]
    """(2 atanh(c), its derivative, no statistic) of a block of cosines for ``kernel="triton"``, c = x clamped to
    ``params`` = (lo, hi); the derivative is 0 where the clamp bites. 2 atanh(c) = log((1 + c)^2 / (1 - c^2)) and
    its derivative 2 / (1 - c^2) share one division (H200, N = 16,384: 15.5 ms against 16.5 with two,
    benchmarks/gpu_map_cost.py); the logarithm is most of what remains over InfoNCE (docs/gpu.md)."""
    c = tl.minimum(tl.maximum(x, params[0]), params[1])
    inverse = 1.0 / (1.0 - c * c)
    return tl.log((1.0 + c) * (1.0 + c) * inverse), tl.where(c == x, 2.0 * inverse, 0.0), x * 0.0


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
        lo, hi = self._bounds
        bound = math.log((2 - self.eps) / self.eps)  # 2 atanh(1 - eps)
        return LogitMap.of_terms(_terms, (lo, hi), closed=closed_form, bound=bound, compile_maps=self.compile_maps,
                                 triton=TritonMap.of(_triton_form, (lo, hi)), health=self.kernel_health)  # fmt: skip

    def logits(self, sim: torch.Tensor | LazyLogits, pairs: Pairs) -> torch.Tensor | LazyLogits:
        positive = pairs.positive(sim).detach()
        # the effective 1/tau of a pair is logit / s, 2 at s -> 0
        self.record(inv_tau_pos_mean=lambda: effective_inverse_tau(self._clamped(positive)).mean())
        if isinstance(sim, LazyLogits):
            return sim.mapped(self.logit_map(pairs))
        return _terms(sim, *self._bounds, False, False)[0]

    def extra_repr(self) -> str:
        return f"eps={self.eps}, " + super().extra_repr()
