"""Optimizer helpers: temperature parameters belong in the optimizer, without weight decay."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from .base import ContrastiveLoss


def no_weight_decay_names(model: nn.Module) -> set[str]:
    """Full names of parameters that submodules declare via ``no_weight_decay()``."""
    names: set[str] = set()
    for prefix, module in model.named_modules():
        declare = getattr(module, "no_weight_decay", None)
        if callable(declare):
            names |= {f"{prefix}.{n}" if prefix else n for n in declare()}
    return names


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two parameter groups: decayed, and temperatures / biases / norms without decay.

    Example::

        params = clp.param_groups(nn.ModuleList([encoder, loss_fn]), weight_decay=0.05)
        opt = torch.optim.AdamW(params, lr=1e-3)
    """
    skip = no_weight_decay_names(model)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if name in skip or p.ndim <= 1 else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def after_optimizer_step(module: nn.Module) -> None:
    """Run the per-step upkeep of every cl-plugins loss inside ``module`` (once per optimizer step).

    ``learnable`` clamps its temperature, ``cosine_schedule`` advances its schedule; other
    strategies do nothing. ``module`` may be the loss itself or any model that holds it (a
    patched host model holds it as ``cl_plugins_loss``).

    Example::

        loss.backward(); optimizer.step(); clp.after_optimizer_step(model)
    """
    for loss in losses_in(module):
        loss.after_optimizer_step()


def set_epoch_length(module: nn.Module, steps_per_epoch: int) -> None:
    """Tell every cl-plugins loss inside ``module`` how many optimizer steps an epoch has.

    Schedules counted in epochs (``cosine_schedule`` with ``period_unit="epoch"``, its ``"vision"``
    preset) need it; other strategies ignore it. Under gradient accumulation, count optimizer
    steps, not micro-batches.

    Example::

        clp.set_epoch_length(model, math.ceil(len(loader) / accumulation_steps))  # a short last one steps too
    """
    for loss in losses_in(module):
        loss.set_epoch_length(steps_per_epoch)


def losses_in(module: nn.Module) -> Iterator[ContrastiveLoss]:
    """Every cl-plugins loss inside ``module`` (the module itself included)."""
    from .base import ContrastiveLoss  # the base imports the optimizer helpers' package

    return (sub for sub in module.modules() if isinstance(sub, ContrastiveLoss))
