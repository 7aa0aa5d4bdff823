"""The contrastive pre-training loop shared by GraphCL (TU and molecules), on Accelerate.

:class:`GraphCL` turns a mini-batch of graphs into two views, encodes and projects both, and
returns the loss of the cl-plugins strategy (GraphCL's layout: view 1 anchors against view 2,
one direction). Training runs epochs with a progress bar, tracker logging of the loss and the
strategy's statistics, and checkpoints from which ``--resume`` continues exactly, on the one loop
:func:`cl_plugins.integrations.runs.training.fit` (:func:`graph_hooks` skips batches too small to contrast).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cl_plugins.integrations.runs import saved_model
from cl_plugins.integrations.runs.training import Hooks


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


def save_run_model(folder: Path, trainer: str, config: Any, num_features: int, model: nn.Module,
                   records: dict[str, Any] | None = None) -> None:
    """``model/`` of a graph run (:mod:`cl_plugins.integrations.runs.saved_model`): the run's config, the input width,
    the weights and what the run measured."""
    saved_model.write(folder, trainer, model={"num_features": num_features}, run=asdict(config),
                      weights=model.state_dict(), records=records)  # fmt: skip


def load_run_model(path: str | Path, trainer: str, config_cls: type,
                   build_model: Callable[[Any, int], nn.Module]) -> tuple:
    """(config, model, input width) rebuilt from a :func:`save_run_model` folder with the trainer's
    ``build_model``."""
    saved = saved_model.read(path, (trainer,), f"{trainer} run model")
    saved_model.expect_model_keys(saved, ["num_features"])
    config = saved_model.run_config(saved, config_cls)
    model = saved_model.build(saved, lambda: build_model(config, saved.model["num_features"]), f"{trainer} model")
    saved_model.load_into(model, saved.weights, saved.path, f"{trainer} model")
    return config, model, saved.model["num_features"]


def graph_hooks(min_graphs: int = 2, **hooks: Any) -> Hooks:
    """The loop's hooks for a graph trainer: batches of fewer than ``min_graphs`` graphs are skipped.

    With graph-level contrast an anchor needs a negative; node-level models such as GRACE pass 1.
    """
    return Hooks(skip_batch=lambda data: data.num_graphs < min_graphs, **hooks)
