"""The contrastive pre-training loop shared by GraphCL (TU and molecules), on Accelerate.

:class:`GraphCL` turns a mini-batch of graphs into two views, encodes and projects both, and
returns the loss of the cl-plugins strategy (GraphCL's layout: view 1 anchors against view 2,
one direction). :func:`fit` runs epochs with a progress bar, tracker logging of the loss and the
strategy's statistics, and an Accelerate checkpoint at the end of every epoch from which
``resume=True`` continues exactly (model, optimizer, RNG, epoch).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from integrations.common.accelerate_setup import after_optimizer_step, latest_numbered


class GraphCL(nn.Module):
    """Two views of a batch -> encoder -> projection head -> cl-plugins loss.

    ``augment_1`` / ``augment_2`` map a batch to a view (``None``: the batch itself, as GraphCL's
    unsupervised-TU code contrasts the original graph with one augmented copy). The loss
    module is a submodule, so learned temperatures are trained and saved with the model.
    """

    def __init__(
        self,
        encoder: nn.Module,
        head: nn.Module,
        loss_fn: nn.Module,
        augment_1: Callable[[Any], Any] | None,
        augment_2: Callable[[Any], Any] | None,
    ) -> None:
        super().__init__()
        self.encoder, self.head, self.loss_fn = encoder, head, loss_fn
        self.augment_1, self.augment_2 = augment_1, augment_2

    def project(self, data: Any) -> torch.Tensor:
        return self.head(self.encoder.embed(data))

    def forward(self, data: Any) -> torch.Tensor:
        view_1 = data if self.augment_1 is None else self.augment_1(data)
        view_2 = data if self.augment_2 is None else self.augment_2(data)
        return self.loss_fn(self.project(view_1), self.project(view_2))

    @torch.no_grad()
    def embed_all(self, loader: Any, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Frozen graph embeddings (before the head) and labels of every graph of ``loader``."""
        was_training = self.training
        self.eval()
        embs, ys = [], []
        for data in loader:
            data = data.to(device) if device is not None else data
            embs.append(self.encoder.embed(data).float().cpu())
            ys.append(data.y.view(data.num_graphs, -1).cpu())
        self.train(was_training)
        return torch.cat(embs), torch.cat(ys)


class EpochCounter:
    """Registered with Accelerate so a checkpoint knows how many epochs are done."""

    def __init__(self) -> None:
        self.epoch = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])


def save_run_model(path: Path, config: Any, num_features: int, model: nn.Module) -> None:
    """``model.pt`` of a graph run: the run's config (a dataclass), the input width and the weights."""
    torch.save({"config": asdict(config), "num_features": num_features, "model": model.state_dict()}, path)


def load_run_model(path: str | Path, config_cls: type, build_model: Callable[[Any, int], nn.Module]) -> tuple:
    """(config, model) rebuilt from a :func:`save_run_model` file with the trainer's ``build_model``."""
    saved = torch.load(path, weights_only=False)
    config = config_cls(**saved["config"])
    model = build_model(config, saved["num_features"])
    model.load_state_dict(saved["model"])
    return config, model


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
    desc: str = "GraphCL",
    log_prefix: str = "train",
    on_epoch_end: Callable[[int], None] | None = None,
    min_graphs: int = 2,
    checkpoint_every: int = 1,
) -> list[float]:
    """Train ``model`` (whose forward returns the loss) for ``epochs``; returns the mean loss per epoch.

    Batches with fewer than ``min_graphs`` graphs are skipped (with graph-level contrast an anchor
    needs a negative; node-level models such as GRACE pass 1). A checkpoint is written every
    ``checkpoint_every`` epochs and at the last one.
    """
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    counter = EpochCounter()
    accelerator.register_for_checkpointing(counter)
    if resume and checkpoint_dir is not None:
        path = latest_numbered(checkpoint_dir, "epoch")
        if path is not None:
            accelerator.load_state(str(path))
            accelerator.print(f"resumed from {path} (epoch {counter.epoch})")
    unwrapped = accelerator.unwrap_model(model)
    losses: list[float] = []
    step = counter.epoch * len(loader)
    bar = tqdm(
        total=epochs * len(loader),
        initial=step,
        desc=desc,
        disable=not (progress and accelerator.is_local_main_process),
    )
    model.train()
    while counter.epoch < epochs:
        total, count = 0.0, 0
        for data in loader:
            bar.update(1)
            if data.num_graphs < min_graphs:
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
            after_optimizer_step(unwrapped.loss_fn)
            step += 1
            total, count = total + float(loss.detach()), count + 1
            logs = {f"{log_prefix}/loss": float(loss.detach())}
            logs.update({f"{log_prefix}/{k}": v for k, v in unwrapped.loss_fn.stats.items() if k != "loss"})
            accelerator.log(logs, step=step)
            bar.set_postfix(loss=f"{logs[f'{log_prefix}/loss']:.4f}")
        counter.epoch += 1
        losses.append(total / count if count else math.nan)
        if checkpoint_dir is not None and (counter.epoch % checkpoint_every == 0 or counter.epoch == epochs):
            previous = latest_numbered(checkpoint_dir, "epoch")
            accelerator.save_state(str(checkpoint_dir / f"epoch_{counter.epoch}"))
            if previous is not None and accelerator.is_main_process:
                shutil.rmtree(previous)
        if on_epoch_end is not None:
            on_epoch_end(counter.epoch)
    bar.close()
    return losses
