"""Put a cl-plugins loss into the original MSC code (``talreiss/Mean-Shifted-Anomaly-Detection``).

MSC's seam is ``main.contrastive_loss(out_1, out_2)``: the two views' mean-shifted features
[B, D] (not yet re-normalised) -> a scalar. Its formula is NT-Xent at τ = 0.25 with 2B anchors,
each against the other view's copy as positive and the 2B − 2 other features as negatives, the
positive inside the denominator: the ``simclr`` layout. ``infonce`` at τ 0.25 reproduces it
exactly (``tests/integrations/test_msc.py``).

``run_epoch`` resolves ``contrastive_loss`` from the module's globals, so one assignment
replaces it::

    import sys; sys.path.insert(0, "Mean-Shifted-Anomaly-Detection")
    import main as msc
    from integrations.msc.patch import patch_msc
    patch_msc(msc, "temperature_free")
    msc.main(argparse.Namespace(dataset="cifar10", epochs=20, label=0, lr=1e-5, batch_size=64,
                                backbone=152, angular=False))
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from integrations.common.host_loss import build_host_loss

MSC_TAU = 0.25


class MSCContrastiveLoss(torch.nn.Module):
    """``contrastive_loss(out_1, out_2)`` of MSC under strategy ``name`` (τ 0.25 goes to its own parameter).

    Shapes: out_1, out_2: [B, D] -> scalar. Inputs are L2-normalised here (MSC's inputs are
    shifted by the centre and not re-normalised). ``amcl`` builds its heads on the features and
    needs ``dim=D`` (2048 for ResNet-152, 512 for ResNet-18).
    """

    def __init__(self, name: str = "infonce", tau: float = MSC_TAU, **kwargs: Any) -> None:
        super().__init__()
        if name == "amcl" and "dim" not in kwargs:
            raise ValueError("amcl needs dim=<feature size> (2048 for MSC's ResNet-152, 512 for ResNet-18)")
        self.loss_fn = build_host_loss(name, host_tau=tau, layout="simclr", **kwargs)

    def forward(self, out_1: torch.Tensor, out_2: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(F.normalize(out_1, dim=-1), F.normalize(out_2, dim=-1))


def patch_msc(module: ModuleType, name: str = "infonce", tau: float = MSC_TAU, **kwargs: Any) -> MSCContrastiveLoss:
    """Replace ``module.contrastive_loss`` (MSC's ``main``) by :class:`MSCContrastiveLoss`; returns it.

    The original function is kept as ``module.contrastive_loss_original``. Strategies with
    parameters (``learnable``, ``amcl``) need ``loss.parameters()`` added to MSC's optimizer.
    """
    if not callable(getattr(module, "contrastive_loss", None)):
        raise AttributeError(f"{module!r} has no contrastive_loss(out_1, out_2): pass MSC's main module")
    loss = MSCContrastiveLoss(name, tau, **kwargs)
    original: Callable[..., torch.Tensor] = module.contrastive_loss
    if not hasattr(module, "contrastive_loss_original"):
        module.contrastive_loss_original = original  # type: ignore[attr-defined]
    module.contrastive_loss = loss  # type: ignore[attr-defined]
    return loss
