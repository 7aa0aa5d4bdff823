"""A pre-trained ResNet backbone's folder (:mod:`cl_plugins.integrations.runs.saved_model`): written by the vision
host's trainer, read by MSC as its default starting point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cl_plugins.integrations.modalities.images.resnet import ResNet, build_resnet, load_torchvision_state
from cl_plugins.integrations.runs import saved_model

#: what a backbone's ``cl_plugins.json`` describes it by (:func:`write_backbone`)
BACKBONE_KEYS = ("arch", "cifar_stem", "width", "in_channels", "image_size", "mean", "std")


def write_backbone(folder: Path, backbone: ResNet, model: dict[str, Any], run: dict[str, Any],
                   records: dict[str, Any] | None = None) -> None:
    """Write ``backbone``'s weights, ``model`` (the :data:`BACKBONE_KEYS`) and how it was trained (``run``)."""
    missing = sorted(set(BACKBONE_KEYS) - set(model))
    if missing:
        raise ValueError(f"a backbone's description needs {missing}")
    saved_model.write(folder, "vision", model=model, run=run, weights=backbone.state_dict(), records=records)


def load_backbone(path: str | Path) -> tuple[ResNet, dict[str, Any]]:
    """(backbone, its ``model`` arguments) of a :func:`write_backbone` folder (safetensors: nothing unpickled)."""
    saved = saved_model.read(path, ("vision",), "pre-trained backbone")
    saved_model.expect_model_keys(saved, BACKBONE_KEYS)
    meta = saved.model
    _check_input_description(meta, saved.path / saved_model.INFO)
    net = saved_model.build(saved, lambda: build_resnet(meta["arch"], cifar_stem=meta["cifar_stem"],
                                                        width=meta["width"], in_channels=meta["in_channels"]),
                            "ResNet backbone", strict=False)  # its weights may be in torchvision's names  # fmt: skip
    load_torchvision_state(net, saved.weights, saved.path)
    return net, {**meta, "pretraining": saved.run}


#: the image sizes a backbone's description may ask its inputs to be resized to
IMAGE_SIZES = (8, 1024)


def _check_input_description(meta: dict[str, Any], where: Path) -> None:
    """The backbone's input description: an image size in :data:`IMAGE_SIZES` and a finite mean and a positive std
    per input channel, or one line naming the file."""
    import math

    size, low_high = meta["image_size"], IMAGE_SIZES
    if type(size) is not int or not low_high[0] <= size <= low_high[1]:
        raise ValueError(f"{where}: model.image_size must be an integer from {low_high[0]} to {low_high[1]}, got "
                         f"{size!r}")  # fmt: skip
    channels = meta["in_channels"] if type(meta["in_channels"]) is int else None
    for key, positive in (("mean", False), ("std", True)):
        values = meta[key]
        numbers = isinstance(values, list) and all(type(v) in (int, float) and math.isfinite(v) for v in values)
        if not numbers or len(values) != channels or (positive and min(values) <= 0):
            raise ValueError(f"{where}: model.{key} must be {channels} finite{' positive' if positive else ''} "
                             f"numbers (one per input channel), got {values!r}")  # fmt: skip
