"""AMCL's temperature networks: one per anchor (the default), or one per pair (the paper's forms).

* :class:`AnchorTemperature` (``form="anchor"``): ``tau_i = tau * r ** tanh(g(unit(z_i)))``, one
  temperature per anchor and head, centred on the host's τ and within [τ / r, τ · r]. It sees the
  anchor only, so it cannot tell an anchor's positive from its negatives; its input is L2-normalised,
  so scaling the projections changes nothing; its last layer starts at zero, so training starts
  from the host's InfoNCE.
* :class:`PairTemperatureMLP` (``form="eq2.1"`` / ``"mle"``, the 2024 official snapshot):
  ``tau_ij = eta + iota * sigmoid(MLP([z_i ; z_j]))`` on the raw projections.
* :class:`BilinearTemperature` (``form="topk"``, the authors' current code):
  ``tau_ij = eta + iota * sigmoid(-phi(unit(z_i)) . phi(unit(z_j)))``.

In the paper's notation ``eta`` is the floor of the temperature and ``iota`` its span.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ...layouts import unit_rows


class AnchorTemperature(nn.Module):
    """``tau_i = tau * tau_range ** tanh(w2 . relu(W1 unit(z_i) + b1) + b2)``, in [tau / tau_range, tau * tau_range].

    Args:
        proj_dim: width d' of the head projections it reads.
        hidden: hidden width of the MLP.
        tau: the centre, the temperature at initialisation (the host's τ).
        tau_range: the factor r > 1 that bounds it on either side.

    Shapes:
        z: [A, d'] -> [A].
    """

    def __init__(self, proj_dim: int, hidden: int, tau: float, tau_range: float) -> None:
        super().__init__()
        self.first = nn.Linear(proj_dim, hidden)
        self.second = nn.Linear(hidden, 1)
        nn.init.zeros_(self.second.weight)  # every anchor starts at the host's τ
        nn.init.zeros_(self.second.bias)
        self.log_tau, self.log_range = math.log(tau), math.log(tau_range)

    @property
    def floor(self) -> float:
        """The lowest temperature it gives, tau / r."""
        return math.exp(self.log_tau - self.log_range)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = unit_rows(z)
        u = self.second(torch.relu(self.first(x.to(self.first.weight.dtype)))).squeeze(-1).to(x.dtype)
        return torch.exp(self.log_tau + self.log_range * torch.tanh(u))


class PairTemperatureMLP(nn.Module):
    """``tau(z_i, z_j) = eta + iota * sigmoid(w2 . relu(Wa z_i + Wb z_j + b1) + b2)`` on raw projections.

    The first layer is split (``W [z_i; z_j] = Wa z_i + Wb z_j``) so that all pairs cost two
    matrix products and a broadcast add (see :mod:`cl_plugins.kernels.pair_network`).
    """

    def __init__(self, proj_dim: int, hidden: int, eta: float, iota: float) -> None:
        super().__init__()
        self.first = nn.Linear(2 * proj_dim, hidden)
        self.second = nn.Linear(hidden, 1)
        self.proj_dim, self.eta, self.iota = proj_dim, eta, iota

    def split(self, anchors: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """First-layer halves: a = Wa z_i + b1 [A, H], b = Wb z_j [M, H]."""
        dtype = torch.promote_types(anchors.dtype, torch.float32)
        w = self.first.weight.to(dtype)
        a = anchors.to(dtype) @ w[:, : self.proj_dim].T + self.first.bias.to(dtype)
        b = candidates.to(dtype) @ w[:, self.proj_dim :].T
        return a, b

    def bound(self, u: torch.Tensor) -> torch.Tensor:
        return self.eta + self.iota * torch.sigmoid(u + self.second.bias.to(u.dtype))


class BilinearTemperature(nn.Module):
    """``tau_ij = eta + iota * sigmoid(-phi(unit(z_i)) . phi(unit(z_j)))``, phi = Linear-ReLU-Linear (d' -> d')."""

    def __init__(self, proj_dim: int, hidden: int, eta: float, iota: float) -> None:
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(proj_dim, hidden), nn.ReLU(), nn.Linear(hidden, proj_dim))
        self.eta, self.iota = eta, iota

    def features(self, z: torch.Tensor) -> torch.Tensor:
        x = unit_rows(z)
        return self.phi(x.to(self.phi[0].weight.dtype)).to(x.dtype)

    def bound(self, score: torch.Tensor) -> torch.Tensor:
        return self.eta + self.iota * torch.sigmoid(-score)


__all__ = ["AnchorTemperature", "BilinearTemperature", "PairTemperatureMLP"]


def rowwise_scores(pa: torch.Tensor, pb_rows: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``u = w . relu(pa + pb_rows)`` for one candidate per anchor (no bias); [..., H] -> [...]."""
    return (pa + pb_rows).relu() @ w
