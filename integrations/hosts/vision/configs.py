"""The vision trainer's run configuration: its command line alone, importing nothing heavy, so that
``cl-plugins vision-train --help`` answers before torch loads;
:mod:`cl_plugins.integrations.hosts.vision.train` runs it."""

from __future__ import annotations

from dataclasses import dataclass, field

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import host_head_field
from cl_plugins.integrations.runs.config import RunConfig, output_dir_field

#: the contrastive frameworks of :mod:`cl_plugins.integrations.hosts.vision.ssl_methods`
FRAMEWORKS = ("simclr", "simco", "mocov2", "simmoco")
DATASETS = ("cifar10", "cifar10_lt", "fashion_mnist")


@strict_flags
@dataclass(kw_only=True)
class VisionConfig(RunConfig):
    framework: str = field(default="simclr", metadata={"help": f"one of {', '.join(FRAMEWORKS)}"})
    tau: float = field(default=0.1, metadata={"help": "host temperature (infonce τ; see host_loss for the others)"})
    dataset: str = field(default="cifar10", metadata={"help": f"one of {', '.join(DATASETS)}"})
    data_root: str = field(default="", metadata={"help": "folder holding cifar-10-batches-py/ or cifar10-jpg/ "
                                                         "(CIFAR-10), FashionMNIST/raw/ (Fashion-MNIST) (default: "
                                                         "$CL_PLUGINS_DATA/images)"})
    imbalance_ratio: float = field(default=100.0, metadata={"help": "cifar10_lt: n_max / n_min"})
    subset_per_class: int = field(default=0, metadata={"help": "train on this many images per class (0: all)"})
    eval_bank_per_class: int = field(default=0, metadata={"help": "kNN bank / probe train images per class (0: all)"})
    eval_test_per_class: int = field(default=0, metadata={"help": "test images per class (0: all)"})
    image_size: int = field(default=32, metadata={"help": "training and evaluation resolution"})
    arch: str = field(default="resnet18", metadata={"help": "resnet18/34/50/101/152 (CIFAR stem)"})
    width: int = field(default=64, metadata={"help": "channels of the first ResNet stage (64: standard)"})
    proj_hidden: int = field(default=512, metadata={"help": "projection head hidden size"})
    proj_dim: int = field(default=128, metadata={"help": "projection size"})
    host_head: bool = host_head_field()
    epochs: int = field(default=200, metadata={"help": "training epochs"})
    batch_size: int = field(default=128, metadata={"help": "images per batch and process"})
    lr: float = field(default=0.06, metadata={"help": "SGD learning rate"})
    weight_decay: float = field(default=5e-4, metadata={"help": "SGD weight decay"})
    warmup_epochs: int = field(default=0, metadata={"help": "linear warm-up before the cosine decay"})
    momentum: float = field(default=0.99, metadata={"help": "key-encoder EMA (mocov2, simmoco)"})
    queue_size: int = field(default=4096, metadata={"help": "mocov2 queue length"})
    symmetric: bool = field(default=True, metadata={"help": "mocov2 / simmoco: contrast both directions"})
    blur: float = field(default=0.0, metadata={"help": "Gaussian-blur probability of the augmentation"})
    knn_k: int = field(default=200, metadata={"help": "kNN monitor neighbours"})
    knn_t: float = field(default=0.1, metadata={"help": "kNN monitor temperature"})
    eval_every: int = field(default=10, metadata={"help": "kNN evaluation every N epochs (0: only at the end)"})
    linear_epochs: int = field(default=100, metadata={"help": "linear-probe epochs at the end (0: skip)"})
    seed: int = field(default=0, metadata={"help": "seed of initialisation, data order and augmentation"})
    output_dir: str = output_dir_field("outputs/vision", "checkpoints, model/ (the backbone), results.json")
    checkpoint_every: int = field(default=1, metadata={"help": "checkpoint every N epochs (and at the end)"})
    stop_after_epochs: int = field(
        default=0, metadata={"help": "stop once this many epochs are done (split a run into jobs; then --resume)"}
    )
