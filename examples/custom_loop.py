"""Your own contrastive loop with a cl-plugins strategy in plain sight: SimCLR on CIFAR-10 under Accelerate.

    accelerate launch examples/custom_loop.py --loss macl
    python examples/custom_loop.py --loss learnable --epochs 3

A loop needs three things from cl-plugins, marked (1), (2), (3) below: the strategy, its parameters in
the optimizer without weight decay, and the per-step hook. Data: ``$CL_PLUGINS_DATA/images`` (CIFAR-10).
Class labels: ``loss_fn(z1, z2, labels=y)``, ``label_policy="exclude"`` or ``"positives_out"`` (SupCon).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cl_plugins as clp  # noqa: E402
from cl_plugins.integrations.command_line import parse_loss_args  # noqa: E402
from cl_plugins.integrations.evaluation.knn import knn_accuracy  # noqa: E402
from cl_plugins.integrations.modalities.images.augment import EvalTransform, SSLAugment  # noqa: E402
from cl_plugins.integrations.modalities.images.datasets import load_cifar10, stratified_subset  # noqa: E402


class SimCLR(nn.Module):
    """A small CNN, SimCLR's projection head, and the loss as a submodule: DDP, ``.to()`` and
    ``state_dict()`` then cover learned temperatures too."""

    def __init__(self, loss_fn: nn.Module, width: int = 32, dim: int = 64) -> None:
        super().__init__()
        blocks = ((3, width), (width, 2 * width), (2 * width, 4 * width))  # each conv block halves the image
        self.backbone = nn.Sequential(*(nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                        nn.MaxPool2d(2)) for i, o in blocks), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(4 * width, 4 * width), nn.ReLU(), nn.Linear(4 * width, dim))
        self.loss_fn = loss_fn

    def forward(self, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
        # under several processes the loss gathers the other processes' projections itself (with gradient):
        # every rank returns the loss of the global batch
        return self.loss_fn(self.head(self.backbone(view1)), self.head(self.backbone(view2)))


def main() -> None:
    from accelerate import Accelerator

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loss", default="infonce", help=f"strategy: {', '.join(clp.available_losses())}")
    parser.add_argument("--loss_arg", action="append", default=[], metavar="KEY=VALUE", help="strategy parameter")
    parser.add_argument("--tau", type=float, default=0.2, help="this loop's temperature, mapped onto the strategy's")
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training images (default: 2)")
    parser.add_argument("--images", type=int, default=500, help="training images per class (default: 500)")
    parser.add_argument("--batch_size", type=int, default=256, help="images per step and process (default: 256)")
    parser.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate (default: 2e-3)")
    args = parser.parse_args()
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    torch.manual_seed(0)

    # (1) any strategy by name, in this loop's setting: one τ that each strategy maps onto its own
    # parameters, and the projections' width (AMCL builds its heads on it)
    loss_fn = clp.build_host_loss(args.loss, host_tau=args.tau, feature_dim=64, **parse_loss_args(args.loss_arg))
    model = SimCLR(loss_fn)
    # (2) learned temperatures train with the model, never with weight decay (it would pull τ towards 1)
    optimizer = torch.optim.AdamW(clp.param_groups(model, weight_decay=1e-4), lr=args.lr)

    images, labels = load_cifar10("train")
    keep = stratified_subset(labels, args.images)
    loader = torch.utils.data.DataLoader(images[keep], batch_size=args.batch_size, shuffle=True, drop_last=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    # (3) a schedule counted in epochs (`cosine_schedule` with period_unit=epoch) needs an epoch's optimizer steps
    clp.set_epoch_length(model, len(loader))
    augment = SSLAugment(size=32)
    for epoch in range(args.epochs):
        model.train()
        for batch in loader:
            loss = model(augment(batch), augment(batch))  # two random views of each image
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            # (4) once per optimizer step: clamps `learnable`, advances `cosine_schedule`, a no-op for the others
            clp.after_optimizer_step(accelerator.unwrap_model(model))
        stats = {k: round(v, 4) for k, v in accelerator.unwrap_model(model).loss_fn.stats.items()}
        accelerator.print(f"epoch {epoch + 1}: loss {loss.item():.4f} {stats}")

    if accelerator.is_main_process:  # kNN (k = 200) on the backbone's features, the usual SSL read-out
        inner, view = accelerator.unwrap_model(model).eval(), EvalTransform(size=32)
        test_images, test_labels = load_cifar10("test")
        test = stratified_subset(test_labels, 100)
        with torch.inference_mode():
            bank, queries = (nn.functional.normalize(inner.backbone(view(x.to(accelerator.device))), dim=1)
                             for x in (images[keep], test_images[test]))  # fmt: skip
        top1 = knn_accuracy(queries, test_labels[test], bank, labels[keep], num_classes=10)["top1"]
        print(f"{args.loss}: kNN top-1 {100 * top1:.2f} % on 1,000 test images")


if __name__ == "__main__":
    main()
