"""MSC (Reiss & Hoshen, AAAI 2023) one-class anomaly detection with any cl-plugins strategy.

    accelerate launch examples/msc_anomaly.py --backbone_path outputs/vision/backbone --loss temperature_free

The protocol of ``talreiss/Mean-Shifted-Anomaly-Detection``, one normal class at a time:

1. Backbone features are L2-normalised. The centre c is the mean of the normalised features of
   the normal class's training images, computed once before fine-tuning (normalised again with
   ``--angular``).
2. Fine-tuning: two MoCo-v2 views of every normal training image; features minus c go to the
   contrastive loss (re-normalised inside: the mean-shifted representation). MSC uses NT-Xent at
   τ 0.25 (``infonce`` here); any cl-plugins strategy takes its place. ``--angular`` adds MSC's
   centre term Σ‖z − c‖² of both views. SGD (no momentum), lr 1e-5, weight decay 5e-5; the
   first stages (conv1, bn1, layer1, layer2) are frozen and BatchNorm stays in evaluation mode,
   as in the released code (which never calls ``model.train()``).
3. Score of a test image: the sum of squared L2 distances from its normalised feature to the
   k = 2 nearest normalised training features; ROC-AUC with the normal class as 0 and every
   other class as 1, over the whole test split. Reported before fine-tuning (epoch 0) and after
   every epoch; the table uses the last epoch and the mean over normal classes.

Backbones (``--backbone_path``): a torchvision-format ResNet state dict (``--arch resnet152``,
ImageNet stem, 224 × 224 inputs: the paper's setting with ImageNet weights), or a
``model/`` written by ``vision-train`` (or its run folder: the offline default; its own
resolution and normalisation). The default pretraining uses only CIFAR-10 *training* images and
no labels, so neither the test split nor any label of the one-class task reaches the backbone.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from torch import nn

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import one_line_errors, parse_config
from cl_plugins.integrations.hosts.msc.configs import MSCConfig
from cl_plugins.integrations.hosts.msc.patch import MSCContrastiveLoss
from cl_plugins.integrations.hosts.msc.scoring import knn_anomaly_score, roc_auc
from cl_plugins.integrations.modalities.images.augment import IMAGENET_MEAN, IMAGENET_STD, EvalTransform, SSLAugment
from cl_plugins.integrations.modalities.images.backbone import load_backbone
from cl_plugins.integrations.modalities.images.datasets import CIFAR10_CLASSES, load_cifar10, stratified_subset
from cl_plugins.integrations.modalities.images.features import extract_features
from cl_plugins.integrations.modalities.images.resnet import ResNet, build_resnet, load_torchvision_state
from cl_plugins.integrations.runs import atomic, saved_model
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.results import mean_std, write_json
from cl_plugins.integrations.runs.training import Hooks, Plan, Run, RunState, fit

FROZEN = ("conv1", "bn1", "layer1", "layer2")


@strict_flags
class MSCModel(nn.Module):
    """Backbone whose output is L2-normalised; ``forward(batch)`` is MSC's training loss.

    Shapes: ``embed(x [B, C, H, W]) -> [B, F]`` unit rows; ``center`` [F].
    """

    center: torch.Tensor

    def __init__(self, backbone: ResNet, loss_fn: MSCContrastiveLoss, augment: Any, angular: bool = False) -> None:
        super().__init__()
        self.backbone, self.msc_loss, self.augment, self.angular = backbone, loss_fn, augment, angular
        self.register_buffer("center", torch.zeros(backbone.feature_dim))

    @property
    def loss_fn(self) -> nn.Module:
        """The cl-plugins loss inside MSC's loss (``fit`` logs its statistics and clamps its temperatures)."""
        return self.msc_loss.loss_fn

    def train(self, mode: bool = True) -> MSCModel:
        # MSC fine-tunes with BatchNorm in evaluation mode (its loop never calls model.train())
        super().train(mode)
        self.backbone.eval()
        return self

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.backbone(x), dim=-1)

    def set_center(self, features: torch.Tensor) -> None:
        center = features.mean(dim=0)
        if self.angular:
            center = nn.functional.normalize(center, dim=-1)
        self.center.copy_(center.to(self.center))

    def forward(self, batch: Any) -> torch.Tensor:
        images = batch[0] if isinstance(batch, (tuple, list)) else batch
        out_1 = self.embed(self.augment(images)) - self.center
        out_2 = self.embed(self.augment(images)) - self.center
        loss = self.msc_loss(out_1, out_2)
        if self.angular:
            loss = loss + (out_1**2).sum(dim=1).mean() + (out_2**2).sum(dim=1).mean()
        return loss


def load_msc_backbone(config: MSCConfig) -> tuple[ResNet, EvalTransform, SSLAugment, dict[str, Any]]:
    """The backbone, its evaluation transform, MSC's training augmentation at its resolution, and metadata."""
    path = Path(config.backbone_path)
    if not path.exists():
        raise FileNotFoundError(
            f"backbone_path {path} does not exist. Pretrain the offline default with "
            "`python examples/simclr_cifar.py --output_dir outputs/vision` (CIFAR-10 training images, no labels), "
            "or pass a torchvision ResNet state dict with --arch"
        )
    if path.is_dir() or saved_model.is_saved_model(path):
        backbone, meta = load_backbone(path)
        size, mean, std = meta["image_size"], tuple(meta["mean"]), tuple(meta["std"])
        evaluation = EvalTransform(size=size, mean=mean, std=std)
        augment = SSLAugment.moco_v2(size=size, mean=mean, std=std)
        return backbone, evaluation, augment, meta
    saved = atomic.load_torch(path, "torchvision ResNet state dict (--backbone_path)")
    backbone = build_resnet(config.arch)
    load_torchvision_state(backbone, saved, path)
    # MSC: Resize(256) -> CenterCrop(224) for ResNet-152 (CIFAR images are upsampled)
    evaluation = EvalTransform(size=config.image_size, resize_to=round(config.image_size * 256 / 224),
                               mean=IMAGENET_MEAN, std=IMAGENET_STD)  # fmt: skip
    return backbone, evaluation, SSLAugment.moco_v2(size=config.image_size), {"arch": config.arch, "torchvision": True}


def freeze_stem(backbone: ResNet) -> None:
    for name in FROZEN:
        for p in getattr(backbone, name).parameters():
            p.requires_grad_(False)


Splits = tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def load_splits(config: MSCConfig) -> Splits:
    """CIFAR-10 (train, test), each (images, labels), read once for every one-class run."""
    root = Path(config.data_root) if config.data_root else None
    return load_cifar10("train", root), load_cifar10("test", root)


def one_class_data(
    config: MSCConfig, normal: int, seed: int, splits: Splits
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(normal training images, test images, test labels with 1 = anomaly)."""
    (train, train_y), (test, test_y) = splits
    train = train[train_y == normal]
    if config.train_per_class:
        gen = torch.Generator().manual_seed(seed)
        train = train[torch.randperm(train.shape[0], generator=gen)[: config.train_per_class]]
    if config.test_per_class:
        keep = stratified_subset(test_y, config.test_per_class, seed=seed)
        test, test_y = test[keep], test_y[keep]
    return train, test, (test_y != normal).long()


def run_one_class(config: MSCConfig, layout: RunLayout, normal: int, seed: int, splits: Splits) -> dict[str, Any]:
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader, TensorDataset

    layout = layout.seed(seed, prefix=f"class{normal}_")
    accelerator = make_accelerator(layout, mixed_precision=config.mixed_precision, log_with=config.log_with)
    set_seed(seed)
    backbone, evaluation, augment, _ = load_msc_backbone(config)
    if config.freeze:
        freeze_stem(backbone)
    loss_fn = MSCContrastiveLoss(config.loss, config.tau, backbone.feature_dim, **dict(config.loss_args))
    model = MSCModel(backbone, loss_fn, augment, config.angular).to(accelerator.device)
    train, test, test_labels = one_class_data(config, normal, seed, splits)
    device = accelerator.device

    def score() -> tuple[float, torch.Tensor]:
        f_train = extract_features(model.embed, train, evaluation, device=device, batch_size=256)
        f_test = extract_features(model.embed, test, evaluation, device=device, batch_size=256)
        return roc_auc(test_labels, knn_anomaly_score(f_train, f_test, config.k)), f_train

    def on_start(state: RunState) -> None:
        if state.step == 0:  # the centre and the AUC before training (a resumed run has both in its checkpoint)
            model.eval()
            auc0, f_train = score()
            model.set_center(f_train)
            state.record("roc_auc", [0, auc0])
            accelerator.print(f"class {normal} ({CIFAR10_CLASSES[normal]}) seed {seed}: epoch 0 ROC-AUC "
                              f"{100 * auc0:.2f}")  # fmt: skip

    def on_epoch_end(state: RunState) -> None:
        epoch = state.epoch
        due = epoch == config.epochs or (config.eval_every and epoch % config.eval_every == 0)
        if accelerator.is_main_process and due:
            state.record("roc_auc", [epoch, score()[0]])
            accelerator.log({"eval/roc_auc": state.records["roc_auc"][-1][1]}, step=state.step)
            accelerator.print(f"class {normal} seed {seed}: epoch {epoch} ROC-AUC "
                              f"{100 * state.records['roc_auc'][-1][1]:.2f}")  # fmt: skip

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay)
    loader = DataLoader(TensorDataset(train), batch_size=config.batch_size, shuffle=True, drop_last=False)
    t0 = time.time()
    run = Run.of(config, layout, f"MSC class {normal} {config.loss}", "msc", normal_class=normal, seed=seed)
    hooks = Hooks(on_start=on_start, on_epoch_end=on_epoch_end, skip_batch=lambda batch: batch[0].shape[0] < 2)
    state = fit(accelerator, model, optimizer, loader, Plan(config.epochs, keep=config.keep_checkpoints), run, hooks)
    end_tracking(accelerator)
    aucs = state.records["roc_auc"]
    return dict(normal_class=normal, seed=seed, roc_auc=[a for _, a in aucs], eval_epochs=[e for e, _ in aucs],
                epoch_loss=state.records["epoch_loss"], seconds=time.time() - t0)  # fmt: skip


@guarded
def run(config: MSCConfig, *, layout: RunLayout) -> dict[str, Any]:
    """Every normal class × seed; ``results.json`` holds per-epoch AUCs and the final mean over classes."""
    if any(not 0 <= c < 10 for c in config.normal_classes):
        raise ValueError(f"normal_classes must be CIFAR-10 class indices 0..9, got {config.normal_classes}")
    load_msc_backbone(config)  # a file that is not a backbone is refused before the data is read
    splits = load_splits(config)
    runs = [run_one_class(config, layout, c, s, splits) for s in config.seeds for c in config.normal_classes]

    def class_mean(seed: int, epoch: int) -> float:
        values = [r["roc_auc"][epoch] for r in runs if r["seed"] == seed]
        return 100 * sum(values) / len(values)

    per_seed = [class_mean(s, -1) for s in config.seeds]
    start = [class_mean(s, 0) for s in config.seeds]
    mean, std = mean_std(per_seed)
    summary = {
        "config": asdict(config),
        "runs": runs,
        "per_class_final": {
            CIFAR10_CLASSES[c]: 100 * sum(r["roc_auc"][-1] for r in runs if r["normal_class"] == c) / len(config.seeds)
            for c in config.normal_classes
        },
        "mean_roc_auc": mean,
        "mean_roc_auc_std": std,
        "mean_roc_auc_before": mean_std(start)[0],
    }
    if PartialState().is_main_process:  # the other ranks hold no ROC-AUC after epoch 0
        write_json(layout.summary, summary)
    return summary


@one_line_errors
def main(argv: list[str] | None = None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    summary = run(parse_config(MSCConfig, __doc__, argv, defaults))
    if PartialState().is_main_process:
        keys = ("mean_roc_auc", "mean_roc_auc_std", "mean_roc_auc_before")
        print(json.dumps({k: summary[k] for k in keys}, indent=2))
    return summary


if __name__ == "__main__":
    main()
