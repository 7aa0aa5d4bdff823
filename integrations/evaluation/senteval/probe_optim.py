"""Adam and RMSprop for a stack of independent probes, as ``torch.optim`` steps each probe alone.

SentEval trains every probe with its own ``torch.optim`` optimizer (Adam ``lr=1e-3``; RMSprop ``lr=1e-2,
alpha=0.99``; L2 as ``weight_decay``). Both update rules are elementwise, so one state tensor holding many
probes along its leading dimension gives each probe the update it would get alone, provided the step count
(Adam's bias correction) and the L2 value are the probe's own. The formulas are ``torch.optim``'s
single-tensor implementations (the CPU default), in the same order of operations.

Shapes:
    params: ``[G, ...]`` tensors (one row per training set, ``G`` groups); ``decay``: ``[G, ...]``
    broadcastable L2 values; ``groups``: the rows that take this step (a group whose minibatch is empty
    this step does not step, as its own optimizer would not be called).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class StackedOptimizer:
    """Adam (``name="adam"``) or RMSprop (``name="rmsprop"``) over ``params`` with per-row step counts."""

    name: str
    params: list[torch.Tensor]
    decay: list[torch.Tensor]
    steps: list[int] = field(default_factory=list)
    state: list[list[torch.Tensor]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.name not in ("adam", "rmsprop"):
            raise ValueError(f"optim must be 'adam' or 'rmsprop', got {self.name!r}")
        n_moments = 2 if self.name == "adam" else 1
        self.steps = [0] * self.params[0].shape[0]
        self.state = [[torch.zeros_like(p) for _ in range(n_moments)] for p in self.params]

    def step(self, grads: list[torch.Tensor], groups: list[int] | None = None) -> None:
        """One optimizer step of the rows ``groups`` (default: all) with gradients ``grads`` (data term only)."""
        rows = list(range(len(self.steps))) if groups is None else groups
        for g in rows:
            self.steps[g] += 1
        if len(rows) == len(self.steps) and len(set(self.steps)) == 1:
            self._update(slice(None), grads, self.steps[0])
        else:  # rare: a group has no minibatch left in this pass, or step counts differ: one row at a time
            for g in rows:
                self._update(slice(g, g + 1), grads, self.steps[g])

    def select(self, keep: list[int]) -> None:
        """Keep only the rows ``keep`` (groups whose probes have all stopped are dropped)."""
        index = torch.as_tensor(keep, dtype=torch.long)
        self.params = [p[index] for p in self.params]
        self.decay = [d[index] for d in self.decay]
        self.state = [[s[index] for s in moments] for moments in self.state]
        self.steps = [self.steps[g] for g in keep]

    def _update(self, rows: slice, grads: list[torch.Tensor], step: int) -> None:
        for param, decay, grad, moments in zip(self.params, self.decay, grads, self.state, strict=True):
            p, d = param[rows], decay[rows]
            g = grad[rows] + d * p  # weight_decay: grad.add(param, alpha=weight_decay)
            if self.name == "adam":
                _adam(p, g, moments[0][rows], moments[1][rows], step)
            else:
                _rmsprop(p, g, moments[0][rows])


def _adam(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, step: int,
          lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:  # fmt: skip
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = (1 - beta2**step) ** 0.5
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)


def _rmsprop(param: torch.Tensor, grad: torch.Tensor, square_avg: torch.Tensor,
             lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8) -> None:  # fmt: skip
    square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    param.addcdiv_(grad, square_avg.sqrt().add_(eps), value=-lr)
