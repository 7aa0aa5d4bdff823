"""MACL: model-aware contrastive learning.

    A      = sg(mean of the positive cosine similarities)       (global batch when distributed)
    tau_a  = tau0 * (1 + alpha * (A - A0))                      (clamped to >= min_tau)
    P_a    = softmax over {pos, negatives} of s / tau_a, at the positive
    V_a    = sg(1 / (1 - P_a))
    L_a    = -V_a * log P_a

With reweighting the gradient w.r.t. the positive logit is exactly -1 and the loss has the
gradient of the decoupled loss (DCL); the value is evaluated as softplus(d) / sigmoid(d), so
it stays finite when P_a rounds to 1 (where 1 / (1 - P_a) overflows).

tau_a <= 0 happens when A <= A0 - 1/alpha (SimCSE's alpha=2, A0=0.8: any batch with mean
positive cosine <= 0.3). We clamp tau_a to ``min_tau`` and count it in ``stats["tau_clamped"]``.

Paper: Huang et al., "Model-Aware Contrastive Learning: Towards Escaping the Dilemmas"
(ICML 2023), Eq. (7) and Eq. (11).

Example::

    loss_fn = MACLLoss(tau0=0.1, alpha=0.5, a0=0.0)          # vision defaults
    loss_fn = MACLLoss(tau0=0.05, alpha=2.0, a0=0.8, layout="cross_view")   # SimCSE
    loss = loss_fn(z1, z2); loss_fn.stats["tau_mean"]
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..base import ContrastiveLoss
from ..distributed import all_reduce_sum, is_distributed
from ..extension import Pairs, divide, reweighted_nll, softplus
from ..registry import register_loss
from ..validation import check_flag, check_range, check_temperature


@register_loss("macl")
class MACLLoss(ContrastiveLoss):
    """MACL with alignment-adaptive temperature and gradient reweighting.

    Args:
        tau0: base temperature (> 0).
        alpha: scaling factor of the alignment term (>= 0; the paper states [0, 1], SimCSE
            uses 2).
        a0: alignment threshold A0.
        adaptive: use tau_a (else tau0 throughout; reweighting alone, MACL's ablation).
        reweight: multiply each anchor's loss by V = sg(1 / (1 - P_pos)).
        min_tau: floor of tau_a (> 0); see the module docstring.
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`.

    Shapes:
        z1, z2: [N, D] -> scalar (or [A] with ``reduction="none"``).
    """

    scalar_temperature = True
    decouplable = False  # MACL reweights the InfoNCE gradient itself (its "decoupled" is DCL's)
    presets = {
        "vision": {"tau0": 0.1, "alpha": 0.5, "a0": 0.0},  # MACL paper, CIFAR-10
        "simcse": {"tau0": 0.05, "alpha": 2.0, "a0": 0.8, "reweight": False},  # MACL's SimCSE setting
    }

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {"tau0": tau}  # the MACL paper's GraphCL setting: τ0 = the host's τ

    def __init__(
        self,
        tau0: float = 0.1,
        alpha: float = 0.5,
        a0: float = 0.0,
        adaptive: bool = True,
        reweight: bool = True,
        min_tau: float = 1e-2,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tau0 = check_temperature("tau0", tau0)
        check_range("alpha", alpha, 0.0, math.inf)
        check_range("a0", a0, -1.0, 1.0)  # a cosine-similarity threshold
        self.alpha, self.a0 = float(alpha), float(a0)
        self.adaptive, self.reweight = check_flag("adaptive", adaptive), check_flag("reweight", reweight)
        self.min_tau = check_temperature("min_tau", min_tau)
        if self.reweight and self.decoupled:
            raise ValueError(
                "macl: reweight=True already gives the decoupled gradient; pass decoupled=False "
                "(or reweight=False to combine the adaptive temperature with DCL)"
            )

    def temperature(self, alignment: torch.Tensor | float) -> torch.Tensor:
        """tau_a for a given alignment A (before the floor)."""
        if not isinstance(alignment, torch.Tensor):
            alignment = torch.tensor(float(alignment))
        return self.tau0 * (1 + self.alpha * (alignment - self.a0))

    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        if not self.adaptive:
            self.record_tau(self.tau0)
            return sim / self.tau0
        bond = getattr(sim, "bond", None)  # a block and its transpose have one set of positives: one tau for both
        if bond is None:
            a, raw, tau = self._adapted(sim, pairs)
        else:
            a, raw, tau = bond.shared("tau", lambda: self._adapted(sim, pairs))
        self.record(batch_alignment=a, tau_clamped=lambda: (raw < self.min_tau).float())
        self.record_tau(tau)
        return divide(sim, tau, self.lowest_temperature)

    @torch.no_grad()
    def _adapted(self, sim: torch.Tensor, pairs: Pairs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the batch's alignment A, tau_a before the floor, tau_a) of the block's positive pairs."""
        pos = pairs.positive(sim)
        sums = torch.stack([pos.sum(), torch.full((), float(pos.numel()), dtype=pos.dtype, device=pos.device)])
        if self.gather_distributed and is_distributed():
            sums = all_reduce_sum(sums)
        a = sums[0] / sums[1]
        raw = self.temperature(a)
        return a, raw, raw.clamp(min=self.min_tau)

    @property
    def lowest_temperature(self) -> float:
        """The floor of tau_a over every alignment A in [-1, 1] (alpha >= 0): the lower of tau_a(-1) and
        ``min_tau`` never binds below ``max(min_tau, tau_a(-1))``."""
        return max(self.min_tau, self.tau0 * (1 + self.alpha * (-1 - self.a0)))

    def pair_loss(self, logits: torch.Tensor, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        d = pairs.d(logits)
        self.record_d(d)
        if not self.reweight:
            return d if self.decoupled else softplus(d)
        # value V * (-log P); gradient V * d(-log P) = d(d) exactly (module docstring)
        return d + (reweighted_nll(d) - d).detach()

    def extra_repr(self) -> str:
        return (
            f"tau0={self.tau0}, alpha={self.alpha}, a0={self.a0}, adaptive={self.adaptive}, "
            f"reweight={self.reweight}, " + super().extra_repr()
        )
