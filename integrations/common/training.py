"""The epoch loop every adapter's trainer runs on Accelerate.

:func:`fit` trains a model whose forward returns the loss: progress bar, tracker logging of the
loss and of the strategy's statistics, an Accelerate checkpoint every ``checkpoint_every`` epochs
(model, optimizer, RNG, epoch and whatever else is registered; written atomically, see
:mod:`integrations.common.atomic`), and exact resume from the newest complete checkpoint.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

import cl_plugins as clp

from . import atomic


def base_learning_rates(optimizer: Any) -> list[float]:
    """Each parameter group's learning rate before any schedule (a scheduler keeps it as ``initial_lr``)."""
    return [float(g.get("initial_lr", g["lr"])) for g in optimizer.param_groups]


def apply_learning_rates(optimizer: Any, schedulers: tuple[Any, ...], requested: list[float]) -> None:
    """Make a resumed run use the learning rates it was given, not the checkpoint's: the optimizer's groups and
    a ``LambdaLR`` schedule (warm-up, cosine) continue from the same step with the new base rates."""
    from torch.optim.lr_scheduler import LambdaLR

    for group, lr in zip(optimizer.param_groups, requested, strict=True):
        group["lr"] = lr
        if "initial_lr" in group:
            group["initial_lr"] = lr
    for scheduler in schedulers:
        inner = getattr(scheduler, "scheduler", scheduler)  # Accelerate wraps prepared schedulers
        if isinstance(inner, LambdaLR):
            inner.base_lrs = list(requested)
            for group, lr, factor in zip(optimizer.param_groups, requested, inner.lr_lambdas, strict=True):
                group["lr"] = lr * factor(inner.last_epoch)


def resume_from(accelerator: Any, path: Path, optimizer: Any, schedulers: tuple[Any, ...] = ()) -> None:
    """``accelerator.load_state(path)``, keeping the learning rates this run was given (a resume may change them)."""
    requested = base_learning_rates(optimizer)
    accelerator.load_state(str(path))
    saved = base_learning_rates(optimizer)
    if saved != requested:
        apply_learning_rates(optimizer, schedulers, requested)
        accelerator.print(f"learning rate {saved} -> {requested} from here on")


class EpochCounter:
    """Registered with Accelerate so a checkpoint knows how many epochs are done."""

    def __init__(self) -> None:
        self.epoch = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])


def fit(
    accelerator: Any,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Any,
    epochs: int,
    *,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    progress: bool = True,
    desc: str = "train",
    log_prefix: str = "train",
    on_epoch_end: Callable[[int], None] | None = None,
    skip_batch: Callable[[Any], bool] | None = None,
    after_step: Callable[[], None] | None = None,
    checkpoint_every: int = 1,
    register: tuple[Any, ...] = (),
    stop_when: Callable[[], bool] | None = None,
) -> list[float]:
    """Train ``model`` (whose forward returns the loss) for ``epochs``; returns the mean loss per epoch.

    ``model.loss_fn`` is the cl-plugins loss (its statistics are logged, its learned temperatures
    clamped). Batches for which ``skip_batch`` is true are skipped; ``after_step`` runs after every
    optimizer step (learning-rate schedules, momentum encoders); objects in ``register`` (e.g. a
    scheduler) are checkpointed with the run. A checkpoint is written every ``checkpoint_every``
    epochs and at the last one. ``stop_when`` (early stopping; its state belongs in ``register``)
    is asked before every epoch, also right after a resume, and ends training when true.
    """
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    counter = EpochCounter()
    for obj in (counter, *register):
        accelerator.register_for_checkpointing(obj)
    if resume and checkpoint_dir is not None:
        path = atomic.latest_complete(checkpoint_dir, "epoch")
        if path is not None:
            resume_from(accelerator, path, optimizer, register)
            accelerator.print(f"resumed from {path} (epoch {counter.epoch})")
            if counter.epoch > epochs:
                raise ValueError(f"--resume: {path} has {counter.epoch} epochs done, more than --epochs {epochs}; "
                                 "its result would be reported as a shorter run's. Pass --epochs >= "
                                 f"{counter.epoch}")  # fmt: skip
    unwrapped = accelerator.unwrap_model(model)
    # one optimizer step per batch of this process (a batch skip_batch drops, rare, shortens its epoch by a step)
    clp.set_epoch_length(unwrapped.loss_fn, len(loader))
    losses: list[float] = []
    step = counter.epoch * len(loader)
    bar = tqdm(
        total=epochs * len(loader),
        initial=step,
        desc=desc,
        disable=not (progress and accelerator.is_local_main_process),
    )
    model.train()
    while counter.epoch < epochs and not (stop_when is not None and stop_when()):
        total, count = 0.0, 0
        for data in loader:
            bar.update(1)
            if skip_batch is not None and skip_batch(data):
                continue
            loss = model(data)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"{desc}: the loss became {float(loss)} at epoch {counter.epoch + 1}; lower the learning rate "
                    "or check the strategy's parameters"
                )
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            clp.after_optimizer_step(unwrapped.loss_fn)
            if after_step is not None:
                after_step()
            step += 1
            total, count = total + float(loss.detach()), count + 1
            logs = {f"{log_prefix}/loss": float(loss.detach())}
            logs.update({f"{log_prefix}/{k}": v for k, v in unwrapped.loss_fn.stats.items() if k != "loss"})
            accelerator.log(logs, step=step)
            bar.set_postfix(loss=f"{logs[f'{log_prefix}/loss']:.4f}")
        if count == 0:
            raise ValueError(f"{desc}: every batch of epoch {counter.epoch + 1} was skipped (too small for a "
                             "contrastive loss); raise --batch_size")  # fmt: skip
        counter.epoch += 1
        losses.append(total / count)
        if on_epoch_end is not None:
            on_epoch_end(counter.epoch)
        stopping = stop_when is not None and stop_when()
        if checkpoint_dir is not None and (
            counter.epoch % checkpoint_every == 0 or counter.epoch == epochs or stopping
        ):
            previous = atomic.latest_complete(checkpoint_dir, "epoch")
            atomic.save_state(accelerator, checkpoint_dir / f"epoch_{counter.epoch}")
            if previous is not None and accelerator.is_main_process:  # only once the new one is complete
                shutil.rmtree(previous)
    bar.close()
    return losses
