"""Batched image augmentations on tensors (there is no torchvision here, and batching is faster).

Every op takes a float batch ``x`` [B, C, H, W] with values in [0, 1] and draws its random
parameters per image from torch's global generator (so ``accelerate.utils.set_seed`` and
checkpointed RNG states make runs reproducible). :class:`SSLAugment` chains them into the
SimCLR / MoCo v2 recipes.

Differences from torchvision's per-image transforms, all deliberate:

* ``random_resized_crop`` clamps an out-of-range crop box to the image instead of retrying ten
  times and falling back to a centre crop; the flip is fused into the same resampling.
* ``color_jitter`` applies its four adjustments in one random order per batch (torchvision:
  one per image).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_LUMA = (0.299, 0.587, 0.114)


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 [B, C, H, W] -> float32 in [0, 1] (float input is returned as float32)."""
    return images.float().div_(255) if images.dtype == torch.uint8 else images.float()


def _uniform(n: int, low: float, high: float, like: torch.Tensor) -> torch.Tensor:
    return torch.rand(n, device=like.device) * (high - low) + low


def _chance(n: int, p: float, like: torch.Tensor) -> torch.Tensor:
    return torch.rand(n, device=like.device) < p


def random_resized_crop(
    x: torch.Tensor,
    size: int,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    flip_p: float = 0.0,
) -> torch.Tensor:
    """Crop a random box (area fraction in ``scale``, aspect in ``ratio``), resize to ``size``; flip with ``flip_p``.

    Shapes: x [B, C, H, W] -> [B, C, size, size].
    """
    b = x.shape[0]
    area = _uniform(b, scale[0], scale[1], x)
    log_r = _uniform(b, math.log(ratio[0]), math.log(ratio[1]), x)
    aspect = torch.exp(log_r)
    # box width and height as fractions of the image's (the box holds area * H * W pixels)
    w = torch.sqrt(area * aspect).clamp(max=1.0)
    h = torch.sqrt(area / aspect).clamp(max=1.0)
    cx = torch.rand(b, device=x.device) * (1 - w) + w / 2
    cy = torch.rand(b, device=x.device) * (1 - h) + h / 2
    sign = torch.where(_chance(b, flip_p, x), -1.0, 1.0)
    theta = torch.zeros(b, 2, 3, device=x.device)
    theta[:, 0, 0] = w * sign
    theta[:, 0, 2] = 2 * cx - 1
    theta[:, 1, 1] = h
    theta[:, 1, 2] = 2 * cy - 1
    grid = F.affine_grid(theta, [b, x.shape[1], size, size], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def horizontal_flip(x: torch.Tensor, p: float = 0.5) -> torch.Tensor:
    """Mirror each image left-right with probability ``p``."""
    flip = _chance(x.shape[0], p, x).view(-1, 1, 1, 1)
    return torch.where(flip, x.flip(-1), x)


def grayscale(x: torch.Tensor) -> torch.Tensor:
    """ITU-R 601 luma [B, 1, H, W] of RGB images (one-channel input is returned as is)."""
    if x.shape[1] == 1:
        return x
    w = x.new_tensor(_LUMA).view(1, 3, 1, 1)
    return (x * w).sum(dim=1, keepdim=True)


def random_grayscale(x: torch.Tensor, p: float = 0.2) -> torch.Tensor:
    """Replace each image by its luma (on all channels) with probability ``p``."""
    mask = _chance(x.shape[0], p, x).view(-1, 1, 1, 1)
    return torch.where(mask, grayscale(x).expand_as(x), x)


def rgb_to_hsv(x: torch.Tensor) -> torch.Tensor:
    """RGB in [0, 1] -> HSV with hue in [0, 1)."""
    r, g, b = x.unbind(dim=1)
    maxc, _ = x.max(dim=1)
    minc, _ = x.min(dim=1)
    delta = maxc - minc
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    hr = ((g - b) / safe) % 6
    hg = (b - r) / safe + 2
    hb = (r - g) / safe + 4
    h = torch.where(maxc == r, hr, torch.where(maxc == g, hg, hb))
    h = torch.where(delta > 0, h / 6, torch.zeros_like(h)) % 1.0
    s = torch.where(maxc > 0, delta / torch.where(maxc > 0, maxc, torch.ones_like(maxc)), torch.zeros_like(maxc))
    return torch.stack([h, s, maxc], dim=1)


def hsv_to_rgb(x: torch.Tensor) -> torch.Tensor:
    """HSV (hue in [0, 1)) -> RGB in [0, 1]."""
    h, s, v = x.unbind(dim=1)
    k = torch.stack([(5 + h * 6) % 6, (3 + h * 6) % 6, (1 + h * 6) % 6], dim=1)
    ramp = torch.minimum(k, 4 - k).clamp(0, 1)
    return v.unsqueeze(1) - (v * s).unsqueeze(1) * ramp


def adjust_brightness(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    return (x * factor.view(-1, 1, 1, 1)).clamp(0, 1)


def adjust_contrast(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    mean = grayscale(x).mean(dim=(1, 2, 3), keepdim=True)
    return (mean + (x - mean) * factor.view(-1, 1, 1, 1)).clamp(0, 1)


def adjust_saturation(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    gray = grayscale(x)
    return (gray + (x - gray) * factor.view(-1, 1, 1, 1)).clamp(0, 1)


def adjust_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the hue by ``shift`` (fractions of a turn, in [-0.5, 0.5])."""
    if x.shape[1] == 1:
        return x
    hsv = rgb_to_hsv(x)
    hue = (hsv[:, 0] + shift.view(-1, 1, 1)) % 1.0
    return hsv_to_rgb(torch.stack([hue, hsv[:, 1], hsv[:, 2]], dim=1)).clamp(0, 1)


def color_jitter(
    x: torch.Tensor,
    brightness: float = 0.4,
    contrast: float = 0.4,
    saturation: float = 0.4,
    hue: float = 0.1,
    p: float = 0.8,
) -> torch.Tensor:
    """torchvision's ``RandomApply([ColorJitter(b, c, s, h)], p)``, batched.

    Factors are drawn per image from [1 − b, 1 + b] (and the hue shift from [−h, h]); the four
    adjustments run in one random order per batch.
    """
    if not 0 <= hue <= 0.5:
        raise ValueError(f"hue must be in [0, 0.5], got {hue}")
    b = x.shape[0]
    ops = []
    if brightness > 0:
        ops.append((adjust_brightness, _uniform(b, max(0.0, 1 - brightness), 1 + brightness, x)))
    if contrast > 0:
        ops.append((adjust_contrast, _uniform(b, max(0.0, 1 - contrast), 1 + contrast, x)))
    if saturation > 0:
        ops.append((adjust_saturation, _uniform(b, max(0.0, 1 - saturation), 1 + saturation, x)))
    if hue > 0:
        ops.append((adjust_hue, _uniform(b, -hue, hue, x)))
    out = x
    for i in torch.randperm(len(ops)).tolist():
        fn, arg = ops[i]
        out = fn(out, arg)
    apply = _chance(b, p, x).view(-1, 1, 1, 1)
    return torch.where(apply, out, x)


def gaussian_blur(
    x: torch.Tensor, p: float = 0.5, sigma: tuple[float, float] = (0.1, 2.0), kernel_size: int | None = None
) -> torch.Tensor:
    """Blur each image with probability ``p`` by a Gaussian of σ ~ U(sigma) (pixels).

    ``kernel_size`` defaults to about 10 % of the image side, odd (SimCLR's choice); the
    separable kernels are applied per image with a grouped convolution and reflect padding.
    """
    b, c, h, w = x.shape
    k = kernel_size or max(3, int(0.1 * min(h, w)) // 2 * 2 + 1)
    if k % 2 == 0:
        raise ValueError(f"kernel_size must be odd, got {k}")
    s = _uniform(b, sigma[0], sigma[1], x)
    offsets = torch.arange(k, device=x.device, dtype=x.dtype) - k // 2
    kernel = torch.exp(-(offsets.view(1, -1) ** 2) / (2 * s.view(-1, 1) ** 2))
    kernel = (kernel / kernel.sum(dim=1, keepdim=True)).repeat_interleave(c, dim=0)  # [B*C, k]
    flat = F.pad(x.reshape(1, b * c, h, w), (k // 2, k // 2, k // 2, k // 2), mode="reflect")
    flat = F.conv2d(flat, kernel.view(b * c, 1, 1, k), groups=b * c)
    flat = F.conv2d(flat, kernel.view(b * c, 1, k, 1), groups=b * c)
    blurred = flat.view(b, c, h, w)
    return torch.where(_chance(b, p, x).view(-1, 1, 1, 1), blurred, x)


def normalize(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    m = x.new_tensor(mean).view(1, -1, 1, 1)
    s = x.new_tensor(std).view(1, -1, 1, 1)
    return (x - m) / s


def resize(x: torch.Tensor, size: int, mode: str = "bilinear") -> torch.Tensor:
    """Resize the shorter side to ``size`` (antialiased), keeping the aspect ratio."""
    h, w = x.shape[-2:]
    scale = size / min(h, w)
    out = (max(size, round(h * scale)), max(size, round(w * scale)))
    if out == (h, w):
        return x
    return F.interpolate(x, size=out, mode=mode, antialias=True, align_corners=False).clamp(0, 1)


def center_crop(x: torch.Tensor, size: int) -> torch.Tensor:
    h, w = x.shape[-2:]
    top, left = (h - size) // 2, (w - size) // 2
    return x[..., top : top + size, left : left + size]


@dataclass
class SSLAugment:
    """One random view of a batch: crop + flip, colour jitter, grayscale, optional blur, normalise.

    Defaults are SimCLR's CIFAR recipe (crop scale 0.08–1, jitter 0.4/0.4/0.4/0.1 with p 0.8,
    grayscale p 0.2, no blur); :meth:`moco_v2` is MoCo v2's / MSC's (crop scale 0.2–1, blur p 0.5).
    """

    size: int = 32
    scale: tuple[float, float] = (0.08, 1.0)
    jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1)
    jitter_p: float = 0.8
    grayscale_p: float = 0.2
    blur_p: float = 0.0
    flip_p: float = 0.5
    mean: tuple[float, ...] = CIFAR10_MEAN
    std: tuple[float, ...] = CIFAR10_STD

    @classmethod
    def moco_v2(cls, size: int = 224, **kwargs: object) -> SSLAugment:
        kwargs = {"scale": (0.2, 1.0), "blur_p": 0.5, "mean": IMAGENET_MEAN, "std": IMAGENET_STD, **kwargs}
        return cls(size=size, **kwargs)  # type: ignore[arg-type]

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        x = random_resized_crop(to_float(images), self.size, self.scale, flip_p=self.flip_p)
        if x.shape[1] == 3:
            x = color_jitter(x, *self.jitter, p=self.jitter_p)
            x = random_grayscale(x, self.grayscale_p)
        elif self.jitter_p > 0:
            # one channel: brightness and contrast only
            x = color_jitter(x, self.jitter[0], self.jitter[1], 0.0, 0.0, p=self.jitter_p)
        if self.blur_p > 0:
            x = gaussian_blur(x, self.blur_p)
        return normalize(x, self.mean[: x.shape[1]], self.std[: x.shape[1]])


@dataclass
class EvalTransform:
    """The deterministic view used for features: resize (shorter side), centre crop, normalise."""

    size: int = 32
    resize_to: int | None = None
    mean: tuple[float, ...] = CIFAR10_MEAN
    std: tuple[float, ...] = CIFAR10_STD
    mode: str = "bilinear"

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        x = to_float(images)
        x = resize(x, self.resize_to or self.size, self.mode)
        x = center_crop(x, self.size)
        return normalize(x, self.mean[: x.shape[1]], self.std[: x.shape[1]])
