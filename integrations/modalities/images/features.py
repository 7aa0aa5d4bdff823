"""Frozen features of an image tensor, batched, in evaluation mode."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from tqdm.auto import tqdm

from cl_plugins.arguments import strict_flags


@strict_flags
@torch.no_grad()
def extract_features(
    model: nn.Module | Callable[[torch.Tensor], torch.Tensor],
    images: torch.Tensor,
    transform: Callable[[torch.Tensor], torch.Tensor],
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    progress: bool = False,
    desc: str = "features",
) -> torch.Tensor:
    """``model(transform(images))`` for every chunk of ``batch_size``, float32 on the CPU.

    Shapes: images [N, C, H, W] (uint8 or float) -> [N, F]. ``nn.Module`` s run in eval mode
    and are put back in their previous mode afterwards.
    """
    was_training = isinstance(model, nn.Module) and model.training
    if isinstance(model, nn.Module):
        model.eval()
    out = []
    for start in tqdm(range(0, images.shape[0], batch_size), desc=desc, disable=not progress, leave=False):
        x = transform(images[start : start + batch_size].to(device))
        out.append(model(x).float().cpu())
    if was_training:
        model.train()  # type: ignore[union-attr]
    return torch.cat(out) if out else torch.empty(0)
