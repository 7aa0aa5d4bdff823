"""ResNets in plain torch with torchvision's module names, so torchvision state dicts load as they are.

``resnet18(cifar_stem=True)`` is the CIFAR variant of the SimCLR / DySTreSS / SimCo code: a
3 × 3 stride-1 first convolution and no max-pool. ``fc`` is ``Identity`` unless ``num_classes``
is given, so the model returns the pooled features [B, 512 · expansion].

Example::

    net = resnet152()                                     # ImageNet layout, features [B, 2048]
    load_torchvision_weights(net, "resnet152-394f9c45.pth")
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from cl_plugins.arguments import strict_flags


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(cin, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """torchvision's v1.5 bottleneck: the stride sits on the 3 × 3 convolution."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(cin, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


@strict_flags
class ResNet(nn.Module):
    """ResNet with torchvision's parameter names.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: blocks per stage, e.g. ``(2, 2, 2, 2)`` for ResNet-18.
        cifar_stem: 3 × 3 stride-1 ``conv1`` and no max-pool (32 × 32 inputs).
        width: channels of the first stage (64 in every standard ResNet; smaller for CPU runs).
        in_channels: 3 for RGB, 1 for Fashion-MNIST.
        num_classes: size of ``fc``; 0 makes ``fc`` an ``Identity`` (feature extractor).

    Shapes:
        x: [B, in_channels, H, W] -> [B, feature_dim] (or [B, num_classes]).
    """

    def __init__(
        self,
        block: type[BasicBlock | Bottleneck],
        layers: tuple[int, int, int, int],
        *,
        cifar_stem: bool = False,
        width: int = 64,
        in_channels: int = 3,
        num_classes: int = 0,
    ) -> None:
        super().__init__()
        self.inplanes = width
        if cifar_stem:
            self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool: nn.Module = nn.Identity() if cifar_stem else nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.feature_dim = width * 8 * block.expansion
        self.fc: nn.Module = nn.Linear(self.feature_dim, num_classes) if num_classes else nn.Identity()
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(
        self, block: type[BasicBlock | Bottleneck], planes: int, blocks: int, stride: int = 1
    ) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                _conv1x1(self.inplanes, planes * block.expansion, stride), nn.BatchNorm2d(planes * block.expansion)
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


ARCHS: dict[str, tuple[type[BasicBlock | Bottleneck], tuple[int, int, int, int]]] = {
    "resnet18": (BasicBlock, (2, 2, 2, 2)),
    "resnet34": (BasicBlock, (3, 4, 6, 3)),
    "resnet50": (Bottleneck, (3, 4, 6, 3)),
    "resnet101": (Bottleneck, (3, 4, 23, 3)),
    "resnet152": (Bottleneck, (3, 8, 36, 3)),
}


def build_resnet(arch: str, **kwargs: object) -> ResNet:
    """``arch`` in :data:`ARCHS`; keyword arguments go to :class:`ResNet`."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {sorted(ARCHS)}, got {arch!r}")
    block, layers = ARCHS[arch]
    return ResNet(block, layers, **kwargs)  # type: ignore[arg-type]


def resnet18(**kwargs: object) -> ResNet:
    return build_resnet("resnet18", **kwargs)


def resnet152(**kwargs: object) -> ResNet:
    return build_resnet("resnet152", **kwargs)


def load_torchvision_weights(model: ResNet, path: str | Path) -> None:
    """Load a torchvision-format ResNet state dict (``.pth``) into ``model``.

    ``fc.*`` is dropped when ``model.fc`` is an ``Identity``; ``module.`` prefixes (DDP) are
    stripped. Any other missing or unexpected key is an error naming the keys.
    """
    load_torchvision_state(model, torch.load(path, map_location="cpu", weights_only=True), path)


def load_torchvision_state(
    model: ResNet, state: dict[str, torch.Tensor], source: str | Path = "the state dict"
) -> None:
    """:func:`load_torchvision_weights` for an already loaded state dict (``source`` names it in errors)."""
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    state = {k.removeprefix("module."): v for k, v in state.items()}
    if isinstance(model.fc, nn.Identity):
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of another shape: another architecture or width
        shapes = [line.strip() for line in str(exc).splitlines() if "size mismatch" in line][:2]
        raise ValueError(f"{source} does not match the model (another arch / cifar_stem / width): "
                         + ("; ".join(shapes) or str(exc).splitlines()[0])) from None  # fmt: skip
    if missing or unexpected:
        raise ValueError(
            f"{source} does not match the model (arch / cifar_stem / width?): missing {missing[:5]}"
            f"{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
