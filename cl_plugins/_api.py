"""What ``import cl_plugins`` offers, imported on first use by :mod:`cl_plugins` (torch and the strategies load only
then, so ``cl-plugins --help`` and the adapters' command lines answer without them)."""

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
