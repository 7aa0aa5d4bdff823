"""Put a cl-plugins loss into the original GraphCL, GRACE and PyGCL code through their loss seams.

Every function follows the contract of ``docs/patching.md``: it takes the class that holds the
seam (or a model built from it), replaces the loss method with one of the same signature, wraps
``__init__`` so that every model built afterwards holds the loss as ``model.cl_plugins_loss``, and
returns a :class:`~cl_plugins.integrations.patching.PatchHandle`. At constant τ with ``infonce`` each
patch reproduces the original code (``tests/integrations/hosts/graph/test_graph_patch.py`` runs the real files):

* GraphCL unsupervised TU, ``simclr.loss_cal(self, x, x_aug)`` (τ 0.2) and GraphCL transfer
  learning, ``graphcl.loss_cl(self, x1, x2)`` (τ 0.1): view 1 anchors against view 2, one
  direction, positive out of the denominator -> ``cross_view`` layout, decoupled.
* GRACE, ``Model.semi_loss(self, z1, z2) -> [N]``, ``Model.batched_semi_loss(self, z1, z2,
  batch_size)`` and ``Model.loss(self, z1, z2, mean=True, batch_size=0)``: inter- plus intra-view
  negatives, self-similarity excluded -> ``grace`` layout; the host τ is the model's ``tau``.
* PyGCL, ``DualBranchContrast.loss``: :func:`patch_pygcl` puts a :class:`PyGCLLoss` there (or build
  ``DualBranchContrast(loss=PyGCLLoss("macl", tau0=0.2), ...)`` yourself).

None of these hosts gathers across processes: each process contrasts its own batch (the default);
``global_batch=True`` gathers the GraphCL views of every process (the exact global-batch gradient).

Example (GRACE's ``train.py``)::

    import model as grace_model                    # GRACE's model.py
    from cl_plugins.integrations.hosts.graph.patch import patch_grace
    patch_grace(grace_model.Model, "temperature_free")   # before train.py builds Model and Adam
"""

from __future__ import annotations

__all__ = ["PyGCLLoss", "graphcl_loss", "patch_grace", "patch_graphcl_transfer", "patch_graphcl_tu", "patch_pygcl",
           "pygcl_loss"]

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.patching import PatchHandle, check_built, class_and_model, gathering


def graphcl_loss(name: str = "infonce", tau: float = 0.2, **kwargs: Any) -> nn.Module:
    """GraphCL's loss (x anchors vs x_aug, positive out of the denominator) under strategy ``name``."""
    return clp.build_host_loss(name, host_tau=tau, host_decoupled=True, layout="cross_view", **kwargs)


def _patch_pair_seam(patch: str, target: Any, method: str, loss: str | nn.Module, tau: float, global_batch: bool,
                     feature_dim: Callable[[nn.Module], int], loss_args: dict[str, Any]) -> PatchHandle:  # fmt: skip
    """GraphCL's seams: ``cls.<method>(self, a, b)`` becomes the strategy's loss of the two views."""
    cls, model = class_and_model(target, patch)
    check_built(loss, patch, layouts=("cross_view",))
    handle = PatchHandle(patch, loss, lambda host: graphcl_loss(str(loss), tau, feature_dim=feature_dim(host),
                                                                **loss_args))  # fmt: skip

    def pair_loss(self: nn.Module, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        fn = handle.loss_of(self)
        with gathering(fn, global_batch):
            return fn(a, b)

    pair_loss.__name__ = method
    handle.attach_after(cls, "__init__")
    handle.replace(cls, method, pair_loss)
    if model is not None:
        handle.attach(model)
    return handle


@strict_flags
def patch_graphcl_tu(target: Any, loss: str | nn.Module = "infonce", *, tau: float = 0.2, global_batch: bool = False,
                     **loss_args: Any) -> PatchHandle:  # fmt: skip
    """Replace ``simclr.loss_cal(self, x, x_aug)`` of GraphCL's ``unsupervised_TU/gsimclr.py``.

    Args:
        target: the ``simclr`` class, or a model built from it.
        loss: a registry name (host τ ``tau``, decoupled, AMCL on ``embedding_dim``) or a built
            ``cross_view`` loss.
        tau: GraphCL's hard-coded temperature (default: 0.2).
        global_batch: gather both views across processes (default: False, GraphCL's local batch).
    """
    return _patch_pair_seam("patch_graphcl_tu", target, "loss_cal", loss, tau, global_batch,
                            lambda host: host.embedding_dim, loss_args)  # fmt: skip


@strict_flags
def patch_graphcl_transfer(target: Any, loss: str | nn.Module = "infonce", *, tau: float = 0.1,
                           global_batch: bool = False, **loss_args: Any) -> PatchHandle:  # fmt: skip
    """Replace ``graphcl.loss_cl(self, x1, x2)`` of GraphCL's ``chem/pretrain_graphcl.py`` (or ``bio/``).

    Args as :func:`patch_graphcl_tu` (``tau`` default: 0.1; AMCL on the projection head's output width).
    """
    return _patch_pair_seam("patch_graphcl_transfer", target, "loss_cl", loss, tau, global_batch,
                            lambda host: host.projection_head[-1].out_features, loss_args)  # fmt: skip


def grace_semi_loss(loss_fn: nn.Module, h1: torch.Tensor, h2: torch.Tensor, rows: slice | None = None) -> torch.Tensor:
    """GRACE's one-direction per-node loss [N] (or of ``rows``): h1_i vs h2_i, negatives h2_j (j != i) and h1_j
    (j != i), through the strategy's ``from_similarity``."""
    rows = slice(0, h1.size(0)) if rows is None else rows
    a, b = F.normalize(h1, dim=1), F.normalize(h2, dim=1)
    sim = torch.cat([a[rows] @ b.T, a[rows] @ a.T], dim=1)
    index = torch.arange(h1.size(0), device=h1.device)[rows]
    eye = index[:, None] == torch.arange(h1.size(0), device=h1.device)[None]
    pos = torch.cat([eye, torch.zeros_like(eye)], dim=1)
    neg = torch.cat([~eye, ~eye], dim=1)
    return loss_fn.from_similarity(sim, pos, neg)


def patch_grace(target: Any, loss: str | nn.Module = "infonce", **loss_args: Any) -> PatchHandle:
    """Replace ``semi_loss``, ``batched_semi_loss`` and ``loss`` of GRACE's ``Model`` (``model.py``).

    Args:
        target: GRACE's ``Model`` class, or a model built from it.
        loss: a registry name (host τ = the model's ``tau``, ``grace`` layout, per-node losses, AMCL on
            the projection width) or a built ``grace`` loss with ``reduction="none"``.

    ``loss(z1, z2, batch_size=B)`` computes the per-node losses in row blocks of B as GRACE does
    (memory O(BN)); batch statistics (MACL's alignment) are then those of each block. GRACE trains
    on one graph per process, so there is no ``global_batch`` option.
    """
    if "global_batch" in loss_args:
        raise TypeError("patch_grace: GRACE trains on one whole graph per process; there is no global batch")
    cls, model = class_and_model(target, "patch_grace")
    check_built(loss, "patch_grace", layouts=("grace", "simclr"), reduction="none")

    def build(host: nn.Module) -> nn.Module:
        return clp.build_host_loss(str(loss), host_tau=float(host.tau), layout="grace", reduction="none",
                               gather_distributed=False, feature_dim=host.fc2.out_features, **loss_args)  # fmt: skip

    handle = PatchHandle("patch_grace", loss, build)

    def semi_loss(self: nn.Module, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return grace_semi_loss(handle.loss_of(self), z1, z2)

    def batched_semi_loss(self: nn.Module, z1: torch.Tensor, z2: torch.Tensor, batch_size: int) -> torch.Tensor:
        fn = handle.loss_of(self)
        blocks = range(0, z1.size(0), batch_size)
        return torch.cat([grace_semi_loss(fn, z1, z2, slice(i, i + batch_size)) for i in blocks])

    def grace_loss(self: nn.Module, z1: torch.Tensor, z2: torch.Tensor, mean: bool = True,
                   batch_size: int = 0) -> torch.Tensor:  # fmt: skip
        h1, h2 = self.projection(z1), self.projection(z2)
        if batch_size == 0:
            per_anchor = handle.loss_of(self)(h1, h2)  # [2N]: view-1 anchors, then view-2 anchors
            ret = (per_anchor[: h1.size(0)] + per_anchor[h1.size(0) :]) * 0.5
        else:
            ret = (self.batched_semi_loss(h1, h2, batch_size) + self.batched_semi_loss(h2, h1, batch_size)) * 0.5
        return ret.mean() if mean else ret.sum()

    grace_loss.__name__ = "loss"
    handle.attach_after(cls, "__init__")
    handle.replace(cls, "semi_loss", semi_loss)
    handle.replace(cls, "batched_semi_loss", batched_semi_loss)
    handle.replace(cls, "loss", grace_loss)
    if model is not None:
        handle.attach(model)
    return handle


@strict_flags
def pygcl_loss(loss_fn: nn.Module, anchor: torch.Tensor, sample: torch.Tensor, pos_mask: torch.Tensor | None,
               neg_mask: torch.Tensor | None, exclude_self: bool = True) -> torch.Tensor:  # fmt: skip
    """A PyGCL loss call (``anchor``, ``sample``, masks) through the strategy's ``from_similarity``."""
    if pos_mask is None:
        raise ValueError("PyGCL losses need pos_mask (PyGCL's samplers always pass it)")
    pos = pos_mask.bool()
    neg = ~pos if neg_mask is None else neg_mask.bool() & ~pos
    n = anchor.size(0)
    if exclude_self and sample.size(0) == 2 * n and torch.equal(sample[n:], anchor):
        neg = neg.clone()
        idx = torch.arange(n, device=anchor.device)
        neg[idx, n + idx] = False
    sim = F.normalize(anchor, dim=1) @ F.normalize(sample, dim=1).T
    return loss_fn.from_similarity(sim, pos, neg)


@strict_flags
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

    def __init__(self, loss: str | nn.Module = "infonce", *, exclude_self: bool = True, **kwargs: Any) -> None:
        super().__init__()
        self.loss_fn = loss if isinstance(loss, nn.Module) else clp.build_loss(loss, **kwargs)
        self.exclude_self = exclude_self

    def forward(self, anchor: torch.Tensor, sample: torch.Tensor, pos_mask: torch.Tensor | None = None,
                neg_mask: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> torch.Tensor:  # fmt: skip
        return pygcl_loss(self.loss_fn, anchor, sample, pos_mask, neg_mask, self.exclude_self)


@strict_flags
def patch_pygcl(target: nn.Module, loss: str | nn.Module = "infonce", *, exclude_self: bool = True,
                **loss_args: Any) -> PatchHandle:  # fmt: skip
    """Replace the loss object of a PyGCL contrast model (``DualBranchContrast``, ``SingleBranchContrast``...).

    Args:
        target: the contrast model; its own loss's ``tau`` (PyGCL's ``InfoNCE(tau)``) is the host τ.
        loss: a registry name or a built loss (used through ``from_similarity``).
        exclude_self: see :class:`PyGCLLoss` (default: True).

    The strategy is registered as ``target.cl_plugins_loss``; ``target.loss`` becomes a plain
    function that calls it, and ``undo()`` puts PyGCL's loss object back.
    """
    if not isinstance(target, nn.Module) or not hasattr(target, "loss"):
        raise TypeError("patch_pygcl: target must be a PyGCL contrast model (an nn.Module with a .loss)")
    host_tau = getattr(target.loss, "tau", None)
    width_arg = clp.get_loss_class(loss).feature_dim_arg if isinstance(loss, str) else None
    if width_arg is not None:
        raise ValueError(f"patch_pygcl: {loss} builds layers on the embeddings (its {width_arg}=), and PyGCL hands "
                         "its loss a similarity matrix; patch the encoder's model instead (patch_grace, or the loss "
                         "in your own loop)")  # fmt: skip

    def build(host: nn.Module) -> nn.Module:
        if host_tau is None and clp.get_loss_class(str(loss)).host_temperature(1.0):
            raise ValueError(f"patch_pygcl: {type(target.loss).__name__} has no tau; pass the strategy's temperature")
        return clp.build_host_loss(str(loss), host_tau=float(host_tau or 1.0), **loss_args)

    handle = PatchHandle("patch_pygcl", loss, build)

    def seam(anchor: torch.Tensor, sample: torch.Tensor, pos_mask: torch.Tensor | None = None,
             neg_mask: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> torch.Tensor:  # fmt: skip
        return pygcl_loss(handle.loss_of(target), anchor, sample, pos_mask, neg_mask, exclude_self)

    handle.attach(target)
    handle.replace(target, "loss", seam)
    return handle
