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
    net = saved_model.build(saved, lambda: build_resnet(meta["arch"], cifar_stem=meta["cifar_stem"],
                                                        width=meta["width"], in_channels=meta["in_channels"]),
                            "ResNet backbone", strict=False)  # its weights may be in torchvision's names  # fmt: skip
    load_torchvision_state(net, saved.weights, saved.path)
    return net, {**meta, "pretraining": saved.run}
