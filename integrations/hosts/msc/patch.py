"""Put a cl-plugins loss into the original MSC code (``talreiss/Mean-Shifted-Anomaly-Detection``).

MSC's seam is ``main.contrastive_loss(out_1, out_2)``: the two views' mean-shifted features
[B, D] (not yet re-normalised) -> a scalar. Its formula is NT-Xent at τ = 0.25 with 2B anchors,
each against the other view's copy as positive and the 2B − 2 other features as negatives, the
positive inside the denominator: the ``simclr`` layout. ``infonce`` at τ 0.25 reproduces it
exactly (``tests/integrations/hosts/msc/test_msc.py``).

``run_epoch`` resolves ``contrastive_loss`` from the module's globals, so one assignment
replaces it; :func:`patch_msc` follows the contract of ``docs/patching.md`` (the loss becomes
``model.cl_plugins_loss`` of every ``utils.Model`` built afterwards, so MSC's SGD trains learned
temperatures)::

    import sys; sys.path.insert(0, "Mean-Shifted-Anomaly-Detection")
    import main as msc
    from cl_plugins.integrations.hosts.msc.patch import patch_msc
    handle = patch_msc(msc, "temperature_free")
    msc.main(argparse.Namespace(dataset="cifar10", epochs=20, label=0, lr=1e-5, batch_size=64,
                                backbone=152, angular=False))

MSC's code is under a research-only licence, so it is not among the test fixtures: the tests check
the formula and the seam on a module written in the test.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.hosts.msc.configs import MSC_TAU
from cl_plugins.integrations.patching import PatchHandle, check_built, gathering


class MSCContrastiveLoss(torch.nn.Module):
    """``contrastive_loss(out_1, out_2)`` of MSC under strategy ``loss`` (τ 0.25 goes to its own parameter).

    Shapes: out_1, out_2: [B, D] -> scalar. Inputs are L2-normalised here (MSC's inputs are
    shifted by the centre and not re-normalised). ``amcl`` builds its heads on the features and
    needs ``feature_dim=D`` (2048 for ResNet-152, 512 for ResNet-18).
    """

    def __init__(self, loss: str | torch.nn.Module = "infonce", tau: float = MSC_TAU, feature_dim: int | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__()
        if isinstance(loss, torch.nn.Module):
            self.loss_fn = loss
            return
        arg = clp.get_loss_class(loss).feature_dim_arg
        if arg is not None and feature_dim is None and arg not in kwargs:
            raise ValueError(f"{loss} needs feature_dim=<feature size> (2048 for MSC's ResNet-152, 512 for ResNet-18)")
        self.loss_fn = clp.build_host_loss(loss, host_tau=tau, layout="simclr", feature_dim=feature_dim, **kwargs)

    def forward(self, out_1: torch.Tensor, out_2: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(F.normalize(out_1, dim=-1), F.normalize(out_2, dim=-1))


@strict_flags
def patch_msc(target: ModuleType, loss: str | torch.nn.Module = "infonce", *, model: torch.nn.Module | None = None,
              model_cls: type | None = None, tau: float = MSC_TAU, feature_dim: int | None = None,
              global_batch: bool = False, **loss_args: Any) -> PatchHandle:  # fmt: skip
    """Replace ``target.contrastive_loss`` (MSC's ``main``) by a cl-plugins strategy.

    Args:
        target: MSC's ``main`` module.
        loss: a registry name (host τ ``tau``, ``simclr`` layout) or a built ``simclr`` loss.
        model: an MSC model already built: it gets the loss as ``model.cl_plugins_loss`` at once.
        model_cls: the model class whose instances get the loss when built (default: MSC's
            ``utils.Model`` as ``main`` imports it).
        tau: MSC's temperature (default: 0.25).
        feature_dim: the backbone's feature width, for AMCL's heads (2048 for MSC's ResNet-152).
        global_batch: gather both views across processes (default: False, MSC's local batch).

    One loss (MSC's τ is a constant) is shared by every model and by ``contrastive_loss``.
    """
    if not callable(getattr(target, "contrastive_loss", None)):
        raise AttributeError(f"patch_msc: {target!r} has no contrastive_loss(out_1, out_2): pass MSC's main module")
    check_built(loss, "patch_msc", layouts=("simclr",))
    shared = MSCContrastiveLoss(loss, tau, feature_dim, **loss_args)
    handle = PatchHandle("patch_msc", shared.loss_fn, lambda host: shared.loss_fn)

    def contrastive_loss(out_1: torch.Tensor, out_2: torch.Tensor) -> torch.Tensor:
        with gathering(shared.loss_fn, global_batch):
            return shared(out_1, out_2)

    handle.replace(target, "contrastive_loss", contrastive_loss)
    model_cls = model_cls or getattr(getattr(target, "utils", None), "Model", None)
    if model_cls is not None:
        handle.attach_after(model_cls, "__init__")
    if model is not None:
        handle.attach(model)
    elif model_cls is None and any(p.requires_grad for p in shared.parameters()):
        warnings.warn("patch_msc: the loss has parameters but no model holds it: pass model= so that MSC's "
                      "optimizer (built from model.parameters()) trains them", stacklevel=2)  # fmt: skip
    return handle
