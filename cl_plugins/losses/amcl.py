"""AMCL: adaptive multi-head contrastive learning with learned per-pair temperatures.

C projection heads map backbone features to z^c. For each head, a temperature network gives
every (anchor i, candidate j) pair its own temperature

    tau_ij^c = iota + eta * sigmoid(MLP_c([z_i^c ; z_j^c]))      in [iota, iota + eta]

and with Omega(tau) = (d'/2) log tau + 1/tau (d' = proj_dim) the pair logit is

    l_ij^c = s_ij^c / tau_ij^c - beta * Omega(tau_ij^c).

Per anchor and head (paper Eq. 2.1, ``negatives="max"``, n* = argmax_n s_in^c):

    L_i^c = -l_ip^c + l_in*^c
          = -s_ip/tau_ip + beta Omega(tau_ip) + s_in*/tau_in* - beta Omega(tau_in*)

and its soft form (the MLE of the appendix, Eq. 6-7, ``negatives="lse"``):

    L_i^c = -l_ip^c + LSE_n l_in^c.

Both are decoupled (negatives only in the denominator); ``decoupled=False`` gives the InfoNCE
variant (Eq. 2.4 / appendix Eq. 9) with the positive inside the max / LSE. Heads are summed.

The temperature MLP takes the raw (un-normalised) head projections, as the official code
does; its first layer is split (W[z_i; z_j] = Wa z_i + Wb z_j) and the LSE form evaluates it
chunk by chunk (:mod:`cl_plugins.losses.amcl_kernel`), recomputing chunks in backward: no
[A, M, hidden] tensor is ever built and no [A, M] tensor is kept for backward.

Paper: Wang, Koniusz, Gedeon, Zheng, "Adaptive Multi-head Contrastive Learning" (ECCV 2024).
The official code does not run and trains a positives-only loss; this is Eq. 2.1 / 6-9.

Example::

    loss_fn = AMCLLoss(dim=512, heads=3, proj_dim=128)      # takes backbone features
    loss = loss_fn(h1, h2)                                  # h1, h2: [N, 512]
    opt = torch.optim.SGD(list(backbone.parameters()) + list(loss_fn.parameters()), lr=0.06)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..base import ContrastiveLoss
from ..layouts import PairBlock
from ..pairs import Pairs
from ..registry import register_loss
from ..validation import check_choice, check_feature_dim, check_pair, check_range, check_temperature
from .amcl_kernel import amcl_negative_lse, rowwise_scores

NEGATIVE_MODES = ("max", "lse")


def amcl_regulariser(tau: torch.Tensor, proj_dim: int) -> torch.Tensor:
    """Omega(tau) = (d'/2) log tau + 1/tau."""
    return 0.5 * proj_dim * torch.log(tau) + 1.0 / tau


class TemperatureMLP(nn.Module):
    """tau(z_i, z_j) = iota + eta * sigmoid(w2 . relu(Wa z_i + Wb z_j + b1) + b2)."""

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
        return self.iota + self.eta * torch.sigmoid(u + self.second.bias.to(u.dtype))


@register_loss("amcl")
class AMCLLoss(ContrastiveLoss):
    """Multi-head contrastive loss with learned, bounded per-pair temperatures.

    Args:
        dim: backbone feature dimension (input of the heads).
        heads: number of projection heads C.
        proj_dim: head output dimension d'.
        hidden: hidden width of each projection head.
        temperature_hidden: hidden width of each temperature MLP.
        eta: width of the temperature range (> 0).
        iota: lower bound of the temperature (> 0; it keeps the loss well posed).
        beta: weight of the regulariser Omega (>= 0).
        negatives: ``"max"`` (Eq. 2.1) or ``"lse"`` (soft form).
        share_temperature_mlp: one temperature MLP for all heads instead of one per head.
        chunk_elements: hidden values evaluated at once by the LSE form (memory knob).
        **kwargs: common options of :class:`~cl_plugins.base.ContrastiveLoss`; layouts
            ``simclr`` / ``grace`` / ``cross_view``.

    Shapes:
        h1, h2: [N, dim] backbone features of the two views -> scalar (or [A]).
    """

    default_decoupled = True
    feature_dim_arg = "dim"  # its heads are built on the embeddings
    layouts = ("simclr", "grace", "cross_view")  # a queue holds keys its heads never projected

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        return {}  # its temperatures are learned within [iota, iota + eta]

    def __init__(
        self,
        dim: int,
        heads: int = 3,
        proj_dim: int = 128,
        hidden: int = 512,
        temperature_hidden: int = 128,
        eta: float = 1.0,
        iota: float = 0.05,
        beta: float = 0.1,
        negatives: str = "max",
        share_temperature_mlp: bool = False,
        chunk_elements: int = 1 << 21,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (
            ("dim", dim),
            ("heads", heads),
            ("proj_dim", proj_dim),
            ("hidden", hidden),
            ("temperature_hidden", temperature_hidden),
            ("chunk_elements", chunk_elements),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.eta = check_temperature("eta", eta)  # the span of its temperatures
        self.iota = check_temperature("iota", iota)
        self.beta = check_range("beta", beta, 0.0, math.inf)
        self.negatives = check_choice("negatives", negatives, NEGATIVE_MODES)
        self.dim, self.proj_dim, self.chunk_elements = dim, proj_dim, chunk_elements
        self.heads = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, proj_dim))
            for _ in range(heads)
        )
        n_mlps = 1 if share_temperature_mlp else heads
        self.temperature_mlps = nn.ModuleList(
            TemperatureMLP(proj_dim, temperature_hidden, self.eta, self.iota) for _ in range(n_mlps)
        )

    def temperature_mlp(self, head: int) -> TemperatureMLP:
        return self.temperature_mlps[head % len(self.temperature_mlps)]

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        *,
        queue: torch.Tensor | None = None,
        hard_negatives: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``z1``, ``z2`` are backbone features [N, dim]; each head projects them."""
        if self.check_inputs:
            check_pair(z1, z2, ("h1", "h2"))
            check_feature_dim(z1, self.dim, "h1", f"dim={self.dim}")
        self._stats = {}
        total: torch.Tensor | None = None
        if self.check_inputs and hard_negatives is not None:
            check_feature_dim(hard_negatives, self.dim, "hard_negatives", f"dim={self.dim}")
        for c, head in enumerate(self.heads):
            p1, p2 = head(z1), head(z2)
            hard = None if hard_negatives is None else head(hard_negatives)  # projected like the views
            blocks = self.blocks(p1, p2, queue=queue, hard_negatives=hard)
            per_anchor = torch.cat([self._head_block_loss(c, b) for b in blocks])
            total = per_anchor if total is None else total + per_anchor
        assert total is not None
        return self._reduce(total, global_batch=True)

    def from_similarity(
        self, sim: torch.Tensor, pos_mask: torch.Tensor, neg_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        raise TypeError(
            "amcl's temperatures are a function of each pair's projected features, which a "
            "similarity matrix does not carry; call loss_fn(h1, h2) with backbone features instead"
        )

    def _head_block_loss(self, head: int, block: PairBlock) -> torch.Tensor:
        pairs = Pairs.from_block(block)
        mlp = self.temperature_mlp(head)
        with torch.autocast(device_type=block.anchors.device.type, enabled=False):
            lazy = block.lazy()  # L2-normalised anchors / candidates, float32 or wider
            a_n, c_n = lazy.anchors, lazy.candidates
            pa, pb = mlp.split(block.anchors, block.candidates)
            w2 = mlp.second.weight.to(pa.dtype)[0]
            # the positive pair: -s_p / tau_p + beta * Omega(tau_p)
            s_pos = lazy.positive(pairs.cols)
            tau_pos = mlp.bound(rowwise_scores(pa, pb.index_select(0, pairs.cols), w2))
            l_pos = s_pos / tau_pos - self.beta * amcl_regulariser(tau_pos, self.proj_dim)
            if self.negatives == "lse":
                exclude = pairs.exclude_cols if self.decoupled else pairs.exclude_cols[:, 1:]
                lse, tau_stats = amcl_negative_lse(
                    a_n,
                    c_n,
                    pa,
                    pb,
                    w2,
                    mlp.second.bias.to(pa.dtype)[0],
                    exclude if exclude.shape[1] else None,
                    iota=self.iota,
                    eta=self.eta,
                    beta=self.beta,
                    proj_dim=self.proj_dim,
                    chunk_elements=self.chunk_elements,
                )
                n_terms = pairs.n_rows * (pairs.n_cols - (exclude.shape[1]))
                self.record(tau_neg_mean=tau_stats[0] / n_terms, tau_min=tau_stats[1], tau_max=tau_stats[2])
                loss = lse - l_pos
            else:
                # max: only the hardest candidate by raw similarity needs a temperature
                with torch.no_grad():
                    masked = pairs.negative_logits(a_n @ c_n.T)
                    if not self.decoupled:
                        masked.scatter_(1, pairs.cols[:, None], s_pos.detach()[:, None])
                    hard = masked.argmax(dim=1)
                s_hard = (a_n * c_n.index_select(0, hard)).sum(dim=1)
                tau_hard = mlp.bound(rowwise_scores(pa, pb.index_select(0, hard), w2))
                l_hard = s_hard / tau_hard - self.beta * amcl_regulariser(tau_hard, self.proj_dim)
                with torch.no_grad():
                    both = torch.cat([tau_pos, tau_hard])
                    self.record(tau_neg_mean=tau_hard.mean(), tau_min=both.min(), tau_max=both.max())
                loss = l_hard - l_pos
        with torch.no_grad():
            self.record(alignment=s_pos.mean(), tau_pos_mean=tau_pos.mean())
        return loss

    def extra_repr(self) -> str:
        return (
            f"heads={len(self.heads)}, proj_dim={self.proj_dim}, eta={self.eta}, iota={self.iota}, "
            f"beta={self.beta}, negatives={self.negatives!r}, " + super().extra_repr()
        )


__all__ = ["AMCLLoss", "TemperatureMLP", "amcl_regulariser"]
