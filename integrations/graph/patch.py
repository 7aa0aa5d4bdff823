"""Put a cl-plugins loss into the original GraphCL, GRACE and PyGCL code through their loss seams.

Each function takes the class (or module) that holds the seam, replaces the loss method with one
of the same signature, and returns the loss module. At constant τ with ``infonce`` every patch
reproduces the original formula (``tests/integrations/test_graph_patch.py``):

* GraphCL unsupervised TU, ``simclr.loss_cal(self, x, x_aug)`` (τ 0.2) and GraphCL transfer
  learning, ``graphcl.loss_cl(self, x1, x2)`` (τ 0.1): view 1 anchors against view 2, one
  direction, positive out of the denominator -> ``cross_view`` layout, decoupled.
* GRACE, ``Model.semi_loss(self, h1, h2) -> [N]`` and ``Model.loss(self, z1, z2, mean=True,
  batch_size=0)``: inter- plus intra-view negatives, self-similarity excluded -> ``grace``
  layout; the temperature follows ``self.tau`` (GRACE's config) unless the strategy's own
  parameter is passed.
* PyGCL: :class:`PyGCLLoss` is a loss object for ``DualBranchContrast(loss=...)``.

Strategies with parameters (``learnable``, ``amcl``): the original scripts build their optimizer
from ``model.parameters()`` before the first call, so add ``loss_fn.parameters()`` to it.

Example::

    import sys; sys.path.insert(0, "GRACE")
    import model as grace_model
    from integrations.graph.patch import patch_grace
    patch_grace(grace_model.Model, "temperature_free")
    # then run GRACE's train.py as usual (runpy.run_path("GRACE/train.py", run_name="__main__"))
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from integrations.common.host_loss import build_host_loss


def graphcl_loss(name: str = "infonce", tau: float = 0.2, **kwargs: Any) -> nn.Module:
    """GraphCL's loss (x anchors vs x_aug, positive out of the denominator) under strategy ``name``."""
    return build_host_loss(name, host_tau=tau, host_decoupled=True, layout="cross_view", **kwargs)


def _install_pair_loss(cls: type, method: str, loss_fn: nn.Module) -> nn.Module:
    """Set ``cls.<method>(self, a, b)`` to ``loss_fn(a, b)`` (GraphCL's seams take the two views)."""

    def pair_loss(self: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return loss_fn(a, b)

    pair_loss.__name__ = method
    setattr(cls, method, pair_loss)
    return loss_fn


def patch_graphcl_tu(simclr_cls: type, name: str = "infonce", tau: float = 0.2, **kwargs: Any) -> nn.Module:
    """Replace ``simclr.loss_cal(self, x, x_aug)`` of GraphCL's ``unsupervised_TU/gsimclr.py``."""
    return _install_pair_loss(simclr_cls, "loss_cal", graphcl_loss(name, tau, **kwargs))


def patch_graphcl_transfer(graphcl_cls: type, name: str = "infonce", tau: float = 0.1, **kwargs: Any) -> nn.Module:
    """Replace ``graphcl.loss_cl(self, x1, x2)`` of GraphCL's ``chem/pretrain_graphcl.py`` (or ``bio/``)."""
    return _install_pair_loss(graphcl_cls, "loss_cl", graphcl_loss(name, tau, **kwargs))


class _PerTau:
    """One loss module per host temperature (GRACE reads ``self.tau`` at call time)."""

    def __init__(self, name: str, kwargs: dict[str, Any]) -> None:
        self.name, self.kwargs, self.modules = name, kwargs, {}

    def __call__(self, tau: float) -> nn.Module:
        if tau not in self.modules:
            # the strategy's own temperature parameters, when passed, win over GRACE's tau
            self.modules[tau] = build_host_loss(
                self.name, host_tau=tau, layout="grace", reduction="none", gather_distributed=False, **self.kwargs
            )
        return self.modules[tau]


def grace_semi_loss(loss_fn: nn.Module, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
    """GRACE's one-direction per-node loss [N]: h1_i vs h2_i, negatives h2_j (j != i) and h1_j (j != i)."""
    a, b = F.normalize(h1, dim=1), F.normalize(h2, dim=1)
    sim = torch.cat([a @ b.T, a @ a.T], dim=1)
    n = h1.size(0)
    eye = torch.eye(n, dtype=torch.bool, device=h1.device)
    pos = torch.cat([eye, torch.zeros_like(eye)], dim=1)
    neg = torch.cat([~eye, ~eye], dim=1)
    return loss_fn.from_similarity(sim, pos, neg)


def patch_grace(model_cls: type, name: str = "infonce", **kwargs: Any) -> _PerTau:
    """Replace ``Model.semi_loss`` and ``Model.loss`` of GRACE's ``model.py``; returns the loss factory.

    ``factory(tau)`` is the loss module used at temperature ``tau`` (for its ``stats``).
    """
    factory = _PerTau(name, kwargs)

    def semi_loss(self: Any, h1: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
        return grace_semi_loss(factory(self.tau), h1, h2)

    def loss(self: Any, z1: torch.Tensor, z2: torch.Tensor, mean: bool = True, batch_size: int = 0) -> torch.Tensor:
        h1, h2 = self.projection(z1), self.projection(z2)
        per_anchor = factory(self.tau)(h1, h2)  # [2N]: view-1 anchors, then view-2 anchors
        n = h1.size(0)
        ret = (per_anchor[:n] + per_anchor[n:]) * 0.5
        return ret.mean() if mean else ret.sum()

    model_cls.semi_loss = semi_loss
    model_cls.loss = loss
    return factory


class PyGCLLoss(nn.Module):
    """A PyGCL loss object: ``DualBranchContrast(loss=PyGCLLoss("macl", tau0=0.2), mode="L2L")``.

    Called as PyGCL calls its losses, ``loss(anchor=..., sample=..., pos_mask=..., neg_mask=...)``;
    the cosine similarity of anchor and sample goes through the strategy's ``from_similarity``.
    At constant τ with ``infonce`` and one positive per row (the L2L and G2G modes) this equals
    PyGCL's ``InfoNCE(tau)``. A row with several positives (G2L) averages one loss per positive,
    each with that positive and the negatives in its denominator (PyGCL puts all positives in
    every denominator).

    ``exclude_self``: with ``intraview_negs=True`` PyGCL appends the anchors to the samples, and
    ``DualBranchContrast`` then resets the negative mask to ``1 - pos_mask``, so each anchor's
    similarity with itself (exactly 1) is a negative. GRACE excludes it, and the temperature-free
    strategy needs it excluded (atanh(1) is infinite); ``True`` (default) drops it, ``False``
    keeps PyGCL's masks as given (exact parity with PyGCL's InfoNCE).
    """

    def __init__(self, name: str = "infonce", *, exclude_self: bool = True, **kwargs: Any) -> None:
        super().__init__()
        import cl_plugins as clp

        self.loss_fn = clp.build_loss(name, **kwargs)
        self.exclude_self = exclude_self

    def forward(
        self,
        anchor: torch.Tensor,
        sample: torch.Tensor,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> torch.Tensor:
        if pos_mask is None:
            raise ValueError("PyGCLLoss needs pos_mask (PyGCL's samplers always pass it)")
        pos = pos_mask.bool()
        neg = ~pos if neg_mask is None else neg_mask.bool() & ~pos
        n = anchor.size(0)
        if self.exclude_self and sample.size(0) == 2 * n and torch.equal(sample[n:], anchor):
            neg = neg.clone()
            idx = torch.arange(n, device=anchor.device)
            neg[idx, n + idx] = False
        sim = F.normalize(anchor, dim=1) @ F.normalize(sample, dim=1).T
        return self.loss_fn.from_similarity(sim, pos, neg)
