"""DySTreSS: dynamically scaled temperature, a function of each pair's cosine similarity.

    logit_ij = s_ij / tau(sg(s_ij))           for every pair, positive and negatives

Profiles (Delta = tau_max - tau_min, all equal tau_max at s = +-1 and tau_min at their minimum):

* ``"cosine"`` (paper Eq. 14):   tau(s) = tau_min + Delta/2 * (1 + cos(pi * (1 + s)))
* ``"shifted"`` (Algorithm 2, shift Delta_s, scale k):
  tau(s) = tau_min + Delta/2 * (1 + cos(pi/k * (Delta_s + s)))   if (Delta_s <= 0 and s <= -Delta_s)
                                                                  or (Delta_s >= 0 and s >= -Delta_s)
         = tau_max                                                otherwise.
  The paper's best ImageNet-100 setting is Delta_s = -0.4, k = 0.7; Delta_s = -1, k = 1 is
  exactly the ``"cosine"`` profile.
* ``"linear"`` (Table 10):       tau(s) = tau_min + Delta * |s|
* ``"exponential"`` (Table 10):  tau(s) = tau_min + Delta * (exp(|s|) - 1) / (e - 1)
* ``"monotone"`` (Appendix C):   tau(s) = tau_min + Delta/2 * (1 - cos(pi * (1 + s) / 2)),
  increasing from tau_min at s = -1 to tau_max at s = +1.

The paper names the linear and exponential profiles without printing their formulas; the
ones above are the simplest that meet its stated conditions (minimum tau_min at s = 0, tau_max
at s = +-1, negative slope for s < 0, positive for s > 0).

Paper: Manna et al., "DySTreSS: Dynamically Scaled Temperature in Self-Supervised Contrastive
Learning" (IEEE TAI 2025, arXiv 2308.01140).

Example::

    loss = DySTreSSLoss(tau_min=0.07, tau_max=0.2)(z1, z2)                       # CIFAR
    loss = DySTreSSLoss(tau_min=0.1, tau_max=0.2, profile="shifted", shift=-0.4, scale=0.7)(z1, z2)
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import ContrastiveLoss
from ..extension import LazyLogits, LogitMap, Pairs, logit_statement, m
from ..registry import register_loss
from ..validation import check_choice, check_flag, check_positive, check_range, check_temperature

PROFILES = ("cosine", "shifted", "linear", "exponential", "monotone")


@logit_statement
def _map(x, params, profile):  # type: ignore[no-untyped-def]
    """The logit map stated once (:mod:`cl_plugins.kernels.statement`): (x / tau, 1 / tau, tau) with tau taken at
    sg(x), the paper's; ``params`` = (tau_min, tau_max, shift, scale), ``profile`` the profile's index in
    :data:`PROFILES`. The cosine profile as (1 - cos(pi x)) / 2 = sin(pi x / 2)^2, the monotone one as
    (1 + sin(pi x / 2)) / 2: on Triton no cosine per pair (``m.sin_half_pi``)."""
    tau_min, tau_max, shift, scale = params[0], params[1], params[2], params[3]
    delta = tau_max - tau_min
    s = m.stop_gradient(x)
    if profile == 0:
        sine = m.sin_half_pi(s)
        tau = tau_min + delta * (sine * sine)
    elif profile == 1:
        window = tau_min + 0.5 * delta * (1.0 + m.cos((3.141592653589793 / scale) * (shift + s)))
        inside = ((shift <= 0.0) & (s <= -shift)) | ((shift >= 0.0) & (s >= -shift))
        tau = m.where(inside, window, tau_max)
    elif profile == 2:
        tau = tau_min + delta * m.abs(s)
    elif profile == 3:
        tau = tau_min + delta * (m.exp(m.abs(s)) - 1.0) / (2.718281828459045 - 1.0)
    else:
        tau = tau_min + 0.5 * delta * (1.0 + m.sin_half_pi(s))
    inverse = 1.0 / tau
    return x * inverse, inverse, tau


def dystress_temperature(
    s: torch.Tensor,
    tau_min: float,
    tau_max: float,
    profile: str = "cosine",
    shift: float = 0.0,
    scale: float = 1.0,
) -> torch.Tensor:
    """tau(s) of the given profile (see the module docstring), elementwise (differentiable)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {list(PROFILES)}, got {profile!r}")
    return _map.through(s, (tau_min, tau_max, shift, scale), PROFILES.index(profile))[2]


@register_loss("dystress")
class DySTreSSLoss(ContrastiveLoss):
    """InfoNCE with a per-pair temperature tau(s).

    Args:
        tau_min, tau_max: range of the temperature (0 < tau_min <= tau_max).
        shift, scale: Delta_s and k of the ``"shifted"`` profile (Algorithm 2).
        profile: ``"cosine"`` (default), ``"shifted"``, ``"linear"``, ``"exponential"`` or
            ``"monotone"``.
        detach: compute tau from detached similarities (the paper's code; default True).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    presets = {
        "vision": {"tau_min": 0.07, "tau_max": 0.2},  # DySTreSS small-scale (CIFAR)
        # DySTreSS's SimCSE BERT run: shifted cosine profile (offset -0.4, scale 0.7)
        "simcse": {"tau_min": 0.04, "tau_max": 0.05, "profile": "shifted", "shift": -0.4, "scale": 0.7},
    }

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        # our choice: the papers' SimCSE / CIFAR ranges put the host τ at or near the top of the range
        return {"tau_min": 0.7 * tau, "tau_max": tau}

    def __init__(
        self,
        tau_min: float = 0.07,
        tau_max: float = 0.2,
        shift: float = 0.0,
        scale: float = 1.0,
        profile: str = "cosine",
        detach: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tau_min = check_temperature("tau_min", tau_min)
        self.tau_max = check_temperature("tau_max", tau_max)
        if self.tau_min > self.tau_max:
            raise ValueError(f"tau_min ({tau_min}) must not exceed tau_max ({tau_max})")
        self.profile = check_choice("profile", profile, PROFILES)
        self.scale = check_positive("scale", scale)
        self.shift = check_range("shift", shift, -2.0, 2.0)
        if profile != "shifted" and (self.shift != 0.0 or self.scale != 1.0):
            raise ValueError(f"shift and scale apply to profile='shifted' only (got profile={profile!r})")
        self.detach = check_flag("detach", detach)

    def temperature(self, s: torch.Tensor) -> torch.Tensor:
        return dystress_temperature(s, self.tau_min, self.tau_max, self.profile, self.shift, self.scale)

    @property
    def _params(self) -> tuple[float, ...]:
        """:func:`_map`'s parameters."""
        return self.tau_min, self.tau_max, self.shift, self.scale

    def logit_map(self, pairs: Pairs) -> LogitMap:
        def on_stats(total: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> None:
            # lazy: with labels the count of negatives takes a pass over them, which only the diagnostic needs
            self.record(tau_mean=lambda: total / pairs.negative_count(), tau_min=lo, tau_max=hi)

        # |s / tau(s)| <= 1 / tau_min with |s| <= 1 and tau >= tau_min
        return LogitMap.of_statement(_map, self._params, PROFILES.index(self.profile), derivative=self.detach,
                                     statistic=True, on_stats=on_stats, bound=1.0 / self.tau_min,
                                     compile_maps=self.compile_maps, health=self.kernel_health)  # fmt: skip

    def logits(self, sim: torch.Tensor | LazyLogits, pairs: Pairs) -> torch.Tensor | LazyLogits:
        if isinstance(sim, LazyLogits):
            positive = pairs.positive(sim).detach()
            self.record(tau_pos_mean=lambda: self.temperature(positive).mean())
            return sim.mapped(self.logit_map(pairs))
        form = _map.torch if self.detach else _map.through
        logits, _, tau = form(sim, self._params, PROFILES.index(self.profile))
        with torch.no_grad():
            neg = pairs.negative_logits(tau)  # -inf off the negatives
            self.record(
                tau_mean=neg.clamp(min=0).sum() / pairs.negative_count(),
                tau_min=torch.where(torch.isinf(neg), torch.inf, neg).amin(),
                tau_max=neg.amax(),
                tau_pos_mean=pairs.positive(tau).mean(),
            )
        return logits

    def extra_repr(self) -> str:
        extra = f", shift={self.shift}, scale={self.scale}" if self.profile == "shifted" else ""
        head = f"tau_min={self.tau_min}, tau_max={self.tau_max}, profile={self.profile!r}{extra}, "
        return head + super().extra_repr()
