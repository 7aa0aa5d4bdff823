"""The ``Trainer``'s optimizer for a model that holds a strategy."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import cl_plugins as clp


def strategy_optimizer(model: nn.Module, args: Any) -> torch.optim.Optimizer:
    """AdamW at ``args.learning_rate`` with ``args.weight_decay`` on weights only (no temperature is decayed)."""
    groups = clp.param_groups(model, weight_decay=args.weight_decay)
    return torch.optim.AdamW(groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_epsilon)  # fmt: skip
