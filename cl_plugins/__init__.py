"""cl-plugins: pluggable temperature strategies for contrastive learning.

Example::

    import cl_plugins as clp
    loss_fn = clp.build_loss("macl", tau0=0.1, alpha=0.5, a0=0.0)
    loss = loss_fn(z1, z2)                                   # two views [N, D]
    loss = loss_fn.from_similarity(sim, pos_mask, neg_mask)  # any pair layout
    loss_fn.stats                                            # tau, alignment, W, ...

``__all__`` is what users need (the registry, the losses, the optimizer and distributed helpers, the queue)
and what a strategy author needs (:class:`ContrastiveLoss`, :func:`register_loss` and the types of
:mod:`cl_plugins.extension`: :class:`Pairs`, :class:`LogitMap`, :class:`LazyLogits`). The kernels live in
:mod:`cl_plugins.kernels`, the pair layouts in :mod:`cl_plugins.layouts`.
"""

from . import extension, losses
from .base import ContrastiveLoss
from .distributed import gather_with_grad, is_distributed, scale_gradient, world_size
from .extension import LazyLogits, LogitMap, Pairs
from .host import build_host_loss, owns_projection_head
from .layouts import LAYOUTS
from .losses import *  # noqa: F403
from .optim import after_optimizer_step, no_weight_decay_names, param_groups, set_epoch_length
from .queue import FeatureQueue
from .registry import available_losses, build_loss, get_loss_class, register_loss

__version__ = "0.1.0"

__all__ = [
    "LAYOUTS",
    "ContrastiveLoss",
    "FeatureQueue",
    "LazyLogits",
    "LogitMap",
    "Pairs",
    "after_optimizer_step",
    "available_losses",
    "build_host_loss",
    "build_loss",
    "gather_with_grad",
    "get_loss_class",
    "extension",
    "is_distributed",
    "losses",
    "no_weight_decay_names",
    "owns_projection_head",
    "param_groups",
    "register_loss",
    "scale_gradient",
    "set_epoch_length",
    "world_size",
    *losses.__all__,
]
