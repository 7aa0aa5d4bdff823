"""Self-supervised image training (SimCLR / SimCo / MoCo v2 / SimMoCo) with any cl-plugins strategy.

    accelerate launch examples/simclr_cifar.py --framework simclr --loss macl --epochs 200
    cl-plugins vision-train --framework simco --loss dual_temperature --subset_per_class 500

Defaults follow the DySTreSS / MACL CIFAR recipe: ResNet-18 with the CIFAR stem, SimCLR head
512 → 512 → 128 (BN), batch 128, SGD (momentum 0.9, lr 0.06, wd 5e-4, cosine schedule),
200 epochs, SimCLR augmentation at 32 × 32, and the kNN monitor (k = 200, t = 0.1) on the
backbone features. A linear probe on frozen features ends the run. ``--subset_per_class``,
``--image_size`` and ``--width`` shrink the run for a CPU.

Outputs in ``--output_dir``: ``results.json`` (kNN per evaluation, final kNN and linear probe),
``model/`` (the backbone alone, loadable by
:func:`cl_plugins.integrations.modalities.images.backbone.load_backbone`, e.g. as MSC's default
backbone), Accelerate checkpoints (``--resume`` continues exactly) and tracker logs (loss,
temperature statistics of the strategy, kNN accuracy).
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import one_line_errors, parse_config
from cl_plugins.integrations.evaluation.knn import knn_accuracy
from cl_plugins.integrations.evaluation.linear_probe import linear_probe
from cl_plugins.integrations.hosts.vision.configs import DATASETS, VisionConfig
from cl_plugins.integrations.hosts.vision.ssl_methods import ContrastiveSSL, build_vision_loss, projection_head
from cl_plugins.integrations.modalities.images.augment import CIFAR10_MEAN, CIFAR10_STD, EvalTransform, SSLAugment
from cl_plugins.integrations.modalities.images.backbone import write_backbone
from cl_plugins.integrations.modalities.images.datasets import (
    load_cifar10,
    load_fashion_mnist,
    long_tail_indices,
    stratified_subset,
)
from cl_plugins.integrations.modalities.images.features import extract_features
from cl_plugins.integrations.modalities.images.resnet import ResNet, build_resnet
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.results import write_json
from cl_plugins.integrations.runs.training import Hooks, Plan, Run, RunState, fit

FASHION_MNIST_MEAN, FASHION_MNIST_STD = (0.2860,), (0.3530,)


def load_split(config: VisionConfig, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    root = Path(config.data_root) if config.data_root else None
    if config.dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {config.dataset!r}")
    if config.dataset == "fashion_mnist":
        return load_fashion_mnist(split, root)
    return load_cifar10(split, root)


def normalisation(config: VisionConfig) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return (FASHION_MNIST_MEAN, FASHION_MNIST_STD) if config.dataset == "fashion_mnist" else (CIFAR10_MEAN, CIFAR10_STD)


def training_set(config: VisionConfig, train: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The (unlabelled for training) images of the ``train`` split: subset per class, then the long tail."""
    images, labels = train
    if config.subset_per_class:
        keep = stratified_subset(labels, config.subset_per_class, seed=config.seed)
        images, labels = images[keep], labels[keep]
    if config.dataset == "cifar10_lt":
        keep = long_tail_indices(labels, config.imbalance_ratio, seed=config.seed)
        images, labels = images[keep], labels[keep]
    return images, labels


def evaluation_sets(
    config: VisionConfig, train: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(bank images, bank labels, test images, test labels): the balanced ``train`` split and the test split."""
    bank, bank_y = train
    test, test_y = load_split(config, "test")
    if config.eval_bank_per_class:
        keep = stratified_subset(bank_y, config.eval_bank_per_class, seed=1000 + config.seed)
        bank, bank_y = bank[keep], bank_y[keep]
    if config.eval_test_per_class:
        keep = stratified_subset(test_y, config.eval_test_per_class, seed=2000 + config.seed)
        test, test_y = test[keep], test_y[keep]
    return bank, bank_y, test, test_y


def build_backbone(config: VisionConfig, in_channels: int) -> ResNet:
    return build_resnet(config.arch, cifar_stem=True, width=config.width, in_channels=in_channels)


def build_model(config: VisionConfig, in_channels: int = 3) -> ContrastiveSSL:
    backbone = build_backbone(config, in_channels)
    if clp.owns_projection_head(config.loss, config.host_head):  # AMCL's heads on the backbone, as in the paper
        head, dim = nn.Identity(), backbone.feature_dim
    else:
        head, dim = projection_head(backbone.feature_dim, config.proj_hidden, config.proj_dim), config.proj_dim
    loss_fn = build_vision_loss(config.loss, config.framework, host_tau=config.tau, dim=dim, **config.loss_args)
    mean, std = normalisation(config)
    augment = SSLAugment(size=config.image_size, blur_p=config.blur, mean=mean, std=std)
    return ContrastiveSSL(
        backbone,
        head,
        loss_fn,
        augment,
        config.framework,
        momentum=config.momentum,
        queue_size=config.queue_size,
        symmetric=config.symmetric,
    )


def cosine_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup_fraction: float = 0.0) -> Any:
    """Linear warm-up over ``warmup_fraction`` of the steps, then cosine decay to 0, stepped once per optimizer
    step."""
    warmup_steps = round(warmup_fraction * total_steps)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def save_backbone(folder: Path, config: VisionConfig, backbone: ResNet, in_channels: int,
                  records: dict[str, Any] | None = None) -> None:
    """``model/``: the trained ResNet with what rebuilds it and its input transform
    (:func:`cl_plugins.integrations.modalities.images.backbone.load_backbone`)."""
    mean, std = normalisation(config)
    model = {"arch": config.arch, "cifar_stem": True, "width": config.width, "in_channels": in_channels,
             "image_size": config.image_size, "mean": list(mean), "std": list(std)}  # fmt: skip
    write_backbone(folder, backbone, model, asdict(config), records)


@strict_flags
def evaluate(
    config: VisionConfig, backbone: torch.nn.Module, sets: tuple[torch.Tensor, ...], device: torch.device, linear: bool
) -> dict[str, float]:
    mean, std = normalisation(config)
    transform = EvalTransform(size=config.image_size, mean=mean, std=std)
    bank, bank_y, test, test_y = sets
    f_bank = extract_features(backbone, bank, transform, device=device, progress=config.progress, desc="bank")
    f_test = extract_features(backbone, test, transform, device=device, progress=config.progress, desc="test")
    classes = int(bank_y.max()) + 1
    result = {
        f"knn_{k}": v
        for k, v in knn_accuracy(f_test, test_y, f_bank, bank_y, classes, config.knn_k, config.knn_t).items()
    }
    if linear and config.linear_epochs:
        probe = linear_probe(f_bank, bank_y, f_test, test_y, classes, epochs=config.linear_epochs, seed=config.seed)
        result.update({f"linear_{k}": v for k, v in probe.items()})
    return result


@guarded
def run(config: VisionConfig, *, layout: RunLayout) -> dict[str, Any]:
    """Train, evaluate (kNN during training, kNN + linear probe at the end); returns ``results.json``."""
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader, TensorDataset

    if config.eval_every < 0 or config.epochs < 1:
        raise ValueError("epochs must be >= 1 and eval_every >= 0")
    accelerator = make_accelerator(layout, mixed_precision=config.mixed_precision, log_with=config.log_with)
    set_seed(config.seed)
    train = load_split(config, "train")
    images, labels = training_set(config, train)
    if images.shape[0] < 2:
        raise ValueError("the training set needs at least 2 images")
    in_channels = images.shape[1]
    model = build_model(config, in_channels)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9, weight_decay=config.weight_decay)
    loader = DataLoader(
        TensorDataset(images, labels), batch_size=min(config.batch_size, images.shape[0]), shuffle=True, drop_last=True
    )
    sets = evaluation_sets(config, train)

    def on_epoch_end(state: RunState) -> None:
        epoch = state.epoch
        if accelerator.is_main_process and config.eval_every and epoch % config.eval_every == 0 \
                and epoch < config.epochs:  # fmt: skip
            res = evaluate(config, model.backbone, sets, accelerator.device, linear=False)
            state.record("history", {"epoch": epoch, **res})
            accelerator.log({f"eval/{k}": v for k, v in res.items()}, step=state.step)
            accelerator.print(f"epoch {epoch}: kNN top-1 {100 * res['knn_top1']:.2f}")

    t0 = time.time()
    plan = Plan(config.epochs, stop_after_epochs=config.stop_after_epochs, save_every=config.checkpoint_every,
                keep=config.keep_checkpoints)  # fmt: skip
    run = Run.of(config, layout, f"{config.framework} {config.loss}", "vision_ssl")
    hooks = Hooks(after_step=lambda state: model.momentum_update(), on_epoch_end=on_epoch_end)
    schedule = functools.partial(cosine_schedule, warmup_fraction=config.warmup_epochs / config.epochs)
    state = fit(accelerator, model, optimizer, loader, plan, run, hooks, schedule=schedule)
    losses = state.records.get("epoch_loss", [])
    history = state.records.get("history", [])
    result: dict[str, Any] = {
        "config": asdict(config),
        "train_images": int(images.shape[0]),
        "epoch_loss": losses,
        "train_seconds": time.time() - t0,
        "history": history,
    }
    if state.epoch < config.epochs:  # --stop_after_epochs: a part of the run, not a result
        accelerator.print(f"stopped after epoch {state.epoch} of {config.epochs}; --resume continues the run")
    elif accelerator.is_main_process:
        save_backbone(layout.model, config, model.backbone, in_channels, state.records)
        final = evaluate(config, model.backbone, sets, accelerator.device, linear=True)
        result.update(final)
        accelerator.log({f"eval/{k}": v for k, v in final.items()}, step=state.step)
        write_json(layout.results, result)
        accelerator.print(json.dumps({k: round(100 * v, 2) for k, v in final.items()}))
    end_tracking(accelerator)
    return result


@one_line_errors
def main(argv: list[str] | None = None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    return run(parse_config(VisionConfig, __doc__, argv, defaults))


if __name__ == "__main__":
    main()
