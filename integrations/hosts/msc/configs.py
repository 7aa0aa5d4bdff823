"""MSC's run configuration: its command line alone, importing nothing heavy, so that ``cl-plugins msc --help``
answers before torch loads; :mod:`cl_plugins.integrations.hosts.msc.anomaly` runs it."""

from __future__ import annotations

from dataclasses import dataclass, field

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.runs.config import RunConfig, output_dir_field

#: MSC's temperature (``main.py``: 0.25)
MSC_TAU = 0.25


@strict_flags
@dataclass(kw_only=True)
class MSCConfig(RunConfig):
    backbone_path: str = field(
        default="outputs/vision",
        metadata={"help": "run (or its model/) written by vision-train, or a torchvision ResNet state dict (.pth)"},
    )
    arch: str = field(default="resnet152", metadata={"help": "architecture of a torchvision state dict"})
    image_size: int = field(default=224, metadata={"help": "input size for torchvision weights (MSC: 224)"})
    tau: float = field(default=MSC_TAU, metadata={"help": "host temperature (MSC: 0.25)"})
    angular: bool = field(default=False, metadata={"help": "add MSC's angular centre loss"})
    normal_classes: list[int] = field(
        default_factory=lambda: list(range(10)), metadata={"help": "CIFAR-10 classes, each in turn the normal one"}
    )
    seeds: list[int] = field(default_factory=lambda: [0], metadata={"help": "seeds of each one-class run"})
    epochs: int = field(default=20, metadata={"help": "fine-tuning epochs (MSC: 20; the paper's table: 25)"})
    lr: float = field(default=1e-5, metadata={"help": "SGD learning rate"})
    weight_decay: float = field(default=5e-5, metadata={"help": "SGD weight decay"})
    batch_size: int = field(default=64, metadata={"help": "images per batch"})
    k: int = field(default=2, metadata={"help": "nearest normal features in the anomaly score"})
    eval_every: int = field(default=1, metadata={"help": "ROC-AUC every N epochs (MSC: 1; 0: before and after only)"})
    freeze: bool = field(default=True, metadata={"help": "freeze conv1, bn1, layer1, layer2 (MSC)"})
    train_per_class: int = field(default=0, metadata={"help": "normal training images used (0: all 5,000)"})
    test_per_class: int = field(default=0, metadata={"help": "test images per class (0: all 1,000)"})
    data_root: str = field(default="", metadata={"help": "folder holding cifar-10-batches-py/ or cifar10-jpg/ "
                                                         "(default: $CL_PLUGINS_DATA/images)"})
    output_dir: str = output_dir_field("outputs/msc", "a class<c>_seed_<s>/ folder per one-class run, results.json")
