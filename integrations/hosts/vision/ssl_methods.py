"""SimCLR, SimCo, MoCo v2 and SimMoCo around one backbone, each with any cl-plugins strategy.

=========  ====================================  ==============================================
framework  views and encoders                    cl-plugins layout
=========  ====================================  ==============================================
simclr     both views online                     ``simclr``: 2N anchors, 2N−2 negatives
simco      both views online, no momentum        ``cross_view`` symmetric: ½(L(q1,q2)+L(q2,q1)),
                                                 N−1 cross-view negatives (SimCo)
mocov2     queries online, keys from a momentum  ``queue``: N queries against their key and the
           encoder (EMA), a queue of keys        K queued keys; ``symmetric`` adds L(q2, k1)
simmoco    queries online, keys momentum, no     ``cross_view``: N−1 in-batch keys as negatives;
           queue (SimMoCo)                       ``symmetric``: ½(L(q1,k2)+L(q2,k1))
=========  ====================================  ==============================================

The model's forward takes a batch of uint8 images (or ``(images, labels)``), draws two views
with the augmentation, and returns the loss; :meth:`ContrastiveSSL.momentum_update` runs after
every optimizer step. The momentum encoder and the queue are part of the state dict, so a
checkpoint resumes them exactly.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.hosts.vision.configs import FRAMEWORKS

LAYOUT = {"simclr": "simclr", "simco": "cross_view", "mocov2": "queue", "simmoco": "cross_view"}


@strict_flags
def projection_head(in_dim: int, hidden: int = 512, out_dim: int = 128, batch_norm: bool = True) -> nn.Sequential:
    """SimCLR's head: Linear → (BN) → ReLU → Linear (→ BN, as in the DySTreSS CIFAR code)."""
    layers: list[nn.Module] = [nn.Linear(in_dim, hidden, bias=not batch_norm)]
    if batch_norm:
        layers.append(nn.BatchNorm1d(hidden))
    layers += [nn.ReLU(inplace=True), nn.Linear(hidden, out_dim, bias=not batch_norm)]
    if batch_norm:
        layers.append(nn.BatchNorm1d(out_dim))
    return nn.Sequential(*layers)


def build_vision_loss(
    name: str, framework: str, *, host_tau: float = 0.1, dim: int = 128, **loss_args: Any
) -> clp.ContrastiveLoss:
    """The strategy in ``framework``'s layout with the vision papers' settings (the strategies' ``"vision"``
    presets: CIFAR, ResNet-18) over the host τ; ``loss_args`` win (a strategy's own ``tau`` too, as in every
    trainer). ``dim``: the projections' width."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework must be one of {FRAMEWORKS}, got {framework!r}")
    args = dict(loss_args)
    if framework == "simco":
        args.setdefault("symmetric", True)
    return clp.build_host_loss(name, host_tau=host_tau, layout=LAYOUT[framework], feature_dim=dim, preset="vision",
                               **args)  # fmt: skip


@strict_flags
class ContrastiveSSL(nn.Module):
    """Backbone + projection head + cl-plugins loss in one of :data:`FRAMEWORKS`.

    Args:
        backbone: image -> features [B, F] (e.g. :func:`~cl_plugins.integrations.modalities.images.resnet.resnet18`).
        head: features -> projections [B, D].
        loss_fn: a cl-plugins loss built for the framework's layout (:func:`build_vision_loss`).
        augment: uint8 or float images [B, C, H, W] -> one normalised random view.
        framework: one of :data:`FRAMEWORKS`.
        momentum: EMA coefficient of the key encoder (MoCo v2 0.99 on CIFAR, SimMoCo 0.99).
        queue_size: keys kept as negatives (``mocov2`` only; MoCo's CIFAR demos use 4096).
        symmetric: for ``mocov2`` / ``simmoco``, also contrast the second view's queries.
    """

    def __init__(
        self,
        backbone: nn.Module,
        head: nn.Module,
        loss_fn: clp.ContrastiveLoss,
        augment: Any,
        framework: str = "simclr",
        *,
        momentum: float = 0.99,
        queue_size: int = 4096,
        symmetric: bool = True,
    ) -> None:
        super().__init__()
        if framework not in FRAMEWORKS:
            raise ValueError(f"framework must be one of {FRAMEWORKS}, got {framework!r}")
        if loss_fn.layout != LAYOUT[framework] and not (framework == "simclr" and loss_fn.layout == "grace"):
            raise ValueError(
                f"framework {framework!r} needs a loss built with layout={LAYOUT[framework]!r}, "
                f"got {loss_fn.layout!r}; use build_vision_loss"
            )
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.backbone, self.head, self.loss_fn, self.augment = backbone, head, loss_fn, augment
        self.framework, self.momentum, self.symmetric = framework, float(momentum), bool(symmetric)
        self.backbone_m: nn.Module | None = None
        self.head_m: nn.Module | None = None
        self.queue: clp.FeatureQueue | None = None
        if framework in ("mocov2", "simmoco"):
            self.backbone_m, self.head_m = copy.deepcopy(backbone), copy.deepcopy(head)
            for p in [*self.backbone_m.parameters(), *self.head_m.parameters()]:
                p.requires_grad_(False)
        if framework == "mocov2":
            if queue_size < 1:
                raise ValueError("mocov2 needs queue_size >= 1; without a queue use framework='simmoco'")
            out_dim = _output_dim(head)
            # a loss that takes labels (a label_policy) has the queue keep its keys' too
            self.queue = clp.FeatureQueue(queue_size, out_dim, labels=getattr(loss_fn, "uses_labels", False))

    def project(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images))

    @torch.no_grad()
    def project_momentum(self, images: torch.Tensor) -> torch.Tensor:
        assert self.backbone_m is not None and self.head_m is not None
        return self.head_m(self.backbone_m(images))

    def forward(self, batch: Any) -> torch.Tensor:
        """``batch``: images, or (images, labels); the labels reach a loss built with a label policy:
        ``--loss_arg label_policy=exclude`` (two images of one class are then no negatives of each other) or
        ``--loss_arg label_policy=positives_out`` (supervised contrastive learning; also ``positives_in``,
        ``positives_pair``)."""
        images = batch[0] if isinstance(batch, (tuple, list)) else batch
        labelled = getattr(self.loss_fn, "uses_labels", False)
        if labelled and not (isinstance(batch, (tuple, list)) and len(batch) > 1):
            raise ValueError("a loss built with a label_policy needs (images, labels) "
                             "batches")  # fmt: skip
        extra = {"labels": batch[1]} if labelled else {}
        x1, x2 = self.augment(images), self.augment(images)
        if self.framework in ("simclr", "simco"):
            return self.loss_fn(self.project(x1), self.project(x2), **extra)
        q1, k2 = self.project(x1), self.project_momentum(x2)
        pairs = [(q1, k2)]
        if self.symmetric:
            pairs.append((self.project(x2), self.project_momentum(x1)))
        if self.queue is None:
            loss = sum(self.loss_fn(q, k, **extra) for q, k in pairs) / len(pairs)
            return loss  # type: ignore[return-value]
        negatives = self.queue.get()
        if labelled:
            extra["queue_labels"] = self.queue.get_labels()
        loss = sum(self.loss_fn(q, k, queue=negatives, **extra) for q, k in pairs) / len(pairs)
        for _, k in pairs:
            self.queue.enqueue(k, extra.get("labels"))
        return loss  # type: ignore[return-value]

    @torch.no_grad()
    def momentum_update(self) -> None:
        """key parameters ← m · key + (1 − m) · online (MoCo; BN statistics follow the key encoder's own batches)."""
        if self.backbone_m is None or self.head_m is None:
            return
        for online, target in ((self.backbone, self.backbone_m), (self.head, self.head_m)):
            for p, p_m in zip(online.parameters(), target.parameters(), strict=True):
                p_m.mul_(self.momentum).add_(p.detach(), alpha=1 - self.momentum)

    @torch.no_grad()
    def features(self, images: torch.Tensor) -> torch.Tensor:
        """Backbone features [B, F] of already-transformed images (evaluation)."""
        return self.backbone(images)


def _output_dim(head: nn.Module) -> int:
    linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("cannot infer the projection size of the head: it holds no nn.Linear")
    return linears[-1].out_features
