"""A drop-in for open_clip's ``ClipLoss`` that trains with any cl-plugins strategy.

``StrategyClipLoss`` has ``ClipLoss``'s constructor arguments (``local_loss``, ``gather_with_grad``,
``rank``, ``world_size``; ``cache_labels`` and ``use_horovod`` are accepted and have nothing to do) and its
``forward(image_features, text_features, logit_scale, logit_bias=None, output_dict=False)``. The strategy sees
image -> text and text -> image (each row's positive is its own pair, every other column a negative) and the two
directions are averaged, as ``ClipLoss`` averages its two cross-entropies. Under several processes the features
are gathered exactly as open_clip gathers them, so the per-rank loss and gradients are open_clip's.

Who owns the temperature (``logit_scale=``):

* ``"model"`` (default for strategies whose host τ is their ``tau``: ``infonce``, ``dcl``, ``flatnce``): τ is
  ``1 / logit_scale`` of the model at every call, with its gradient. ``infonce`` is then ``ClipLoss`` itself.
* ``"strategy"`` (every other strategy): the strategy owns its temperatures, built from the host τ ``init_tau``
  (open_clip initialises ``logit_scale`` to log(1 / 0.07)); the model's ``logit_scale`` is unused. Freeze it
  (``model.logit_scale.requires_grad_(False)``) and put the loss's parameters (``learnable``'s τ) in the
  optimizer through :func:`cl_plugins.param_groups`, which keeps them out of weight decay (open_clip #815).

The features must be L2-normalised, as open_clip's models return them (``ClipLoss`` takes them as they are); rows
whose norm is more than 1e-2 away from 1 are refused in one line (a cosine of 1e-28 would otherwise train silently).
``logit_bias`` shifts every logit of a row alike, which a softmax over the row ignores: ``ClipLoss``'s value and
gradients do not depend on it, and neither do ours.

Example::

    from cl_plugins.integrations.frameworks.open_clip import StrategyClipLoss
    loss = StrategyClipLoss("macl", logit_scale="strategy", local_loss=True, gather_with_grad=True,
                            rank=rank, world_size=world_size)
    total = loss(image_features, text_features, model.logit_scale.exp())
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.validation import check_pair, check_temperature, check_unit_rows

#: open_clip's initial temperature: ``logit_scale`` starts at log(1 / 0.07)
OPEN_CLIP_TAU = 0.07
OWNERS = ("model", "strategy")


def follows_host_tau(name: str) -> bool:
    """Whether the strategy's one temperature is the host's τ itself (``tau = τ``), so a model can own it."""
    return clp.get_loss_class(name).host_temperature(0.5) == {"tau": 0.5}


@strict_flags
def gather_features(x: torch.Tensor, *, with_grad: bool, keep_local: bool, rank: int, world_size: int) -> torch.Tensor:
    """Every rank's ``x`` [n, D] in rank order, as open_clip gathers: with gradient through every slice
    (``with_grad``), or without, except this rank's own slice when ``keep_local``."""
    if with_grad:
        return clp.gather_with_grad(x)[0]
    parts = [torch.empty_like(x) for _ in range(world_size)]
    dist.all_gather(parts, x.detach())
    if keep_local:
        parts[rank] = x
    return torch.cat(parts)


def check_logit_scale(logit_scale: torch.Tensor | float) -> None:
    """The per-call temperature ``1 / logit_scale``, checked each call as a built loss's τ is once: a finite
    positive scale whose τ lies in the strategies' range. One scalar read per step (a host sync on a GPU; on
    the CPU ~1 µs, docs/frameworks.md)."""
    if isinstance(logit_scale, torch.Tensor) and logit_scale.numel() != 1:
        raise ValueError(f"logit_scale must be a scalar (open_clip's logit_scale.exp()), got shape "
                         f"{tuple(logit_scale.shape)}")  # fmt: skip
    value = float(logit_scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"logit_scale must be a finite positive number (open_clip passes logit_scale.exp(), 1/τ), "
                         f"got {value:g}")  # fmt: skip
    check_temperature("tau (1 / logit_scale)", 1.0 / value)


@strict_flags
class StrategyClipLoss(nn.Module):
    """``ClipLoss`` with strategy ``loss``.

    Args:
        loss: a registry name or a built cl-plugins loss (default: "infonce").
        local_loss: each rank's anchors are its own rows, against every rank's candidates (default: False).
        gather_with_grad: gather the other ranks' features with their gradient (default: False).
        cache_labels: accepted for ``ClipLoss`` compatibility; nothing is cached (default: False).
        rank: this process's rank (default: 0).
        world_size: number of processes (default: 1).
        use_horovod: must stay False: Horovod is not supported (default: False).
        logit_scale: ``"model"`` or ``"strategy"``, who owns the temperature (default: "model" where the
            strategy allows it, else "strategy").
        init_tau: the host τ a ``"strategy"``-owned loss is built from (default: 0.07).
        **loss_args: the strategy's own arguments.

    Shapes:
        image_features, text_features: [N, D]; logit_scale: scalar tensor -> scalar.
    """

    def __init__(self, loss: str | clp.ContrastiveLoss = "infonce", *, local_loss: bool = False,
                 gather_with_grad: bool = False, cache_labels: bool = False, rank: int = 0, world_size: int = 1,
                 use_horovod: bool = False, logit_scale: str | None = None, init_tau: float = OPEN_CLIP_TAU,
                 **loss_args: Any) -> None:  # fmt: skip
        super().__init__()
        if use_horovod:
            raise ValueError("use_horovod=True is not supported: launch with torch.distributed (torchrun)")
        name = loss if isinstance(loss, str) else loss.name
        owner = logit_scale or ("model" if follows_host_tau(name) else "strategy")
        if owner not in OWNERS:
            raise ValueError(f"logit_scale must be one of {OWNERS}, got {owner!r}")
        if owner == "model" and not follows_host_tau(name):
            raise ValueError(
                f"{name} sets its own temperatures, so the model's logit_scale cannot be its τ: "
                "use logit_scale='strategy' and freeze model.logit_scale"
            )
        if clp.owns_projection_head(name):
            raise ValueError(f"{name} needs the features before a projection head; open_clip hands it similarities")
        self.loss_fn = loss if isinstance(loss, nn.Module) else clp.build_host_loss(
            loss, host_tau=init_tau, layout="cross_view", gather_distributed=False, **loss_args)  # fmt: skip
        self.owner, self.local_loss, self.gather_with_grad = owner, bool(local_loss), bool(gather_with_grad)
        self.rank, self.world_size = int(rank), int(world_size)

    @contextmanager
    def _temperature(self, logit_scale: torch.Tensor) -> Iterator[None]:
        if self.owner != "model":
            yield
            return
        check_logit_scale(logit_scale)
        fixed = self.loss_fn.tau
        self.loss_fn.tau = 1.0 / logit_scale  # a tensor: the logits carry logit_scale's gradient
        try:
            yield
        finally:
            self.loss_fn.tau = fixed

    def similarities(self, image: torch.Tensor, text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Similarities image -> text and text -> image, and the column of row 0's positive. The features are
        L2-normalised by the model, as open_clip's are (other inputs are refused by the strategy's checks)."""
        if self.world_size <= 1:
            sim = image @ text.T
            return sim, sim.T, 0
        kwargs = dict(with_grad=self.gather_with_grad, keep_local=not self.local_loss, rank=self.rank,
                      world_size=self.world_size)  # fmt: skip
        all_image, all_text = gather_features(image, **kwargs), gather_features(text, **kwargs)
        if self.local_loss:
            return image @ all_text.T, text @ all_image.T, self.rank * image.shape[0]
        sim = all_image @ all_text.T
        return sim, sim.T, 0

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor,
                logit_bias: torch.Tensor | None = None, output_dict: bool = False) -> Any:  # fmt: skip
        check_pair(image_features, text_features, ("image_features", "text_features"), rows=False)
        check_unit_rows(image_features, "image_features")
        check_unit_rows(text_features, "text_features")
        per_image, per_text, first = self.similarities(image_features, text_features)
        cols = torch.arange(per_image.shape[0], device=per_image.device) + first
        pos = F.one_hot(cols, per_image.shape[1]).bool()
        with self._temperature(logit_scale):
            total = (self.loss_fn.from_similarity(per_image, pos) + self.loss_fn.from_similarity(per_text, pos)) / 2
        return {"contrastive_loss": total} if output_dict else total
