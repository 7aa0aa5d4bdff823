"""Put a cl-plugins strategy into the original DCRec code through ``CLLayer.vanilla_loss``.

DCRec computes both CL terms with ``self.contrastive_learning_layer.vanilla_loss(z1, z2)``, a
per-row loss ``[B]`` (InfoNCE at ``tau = cl_temp`` with the positive in the denominator).
:func:`patch_dcrec` follows the contract of ``docs/patching.md``: it replaces that method on the
``CLLayer`` class and wraps its ``__init__``, so every layer built afterwards holds the strategy as
``layer.cl_plugins_loss`` (inside DCRec's model, so DCRec's trainer puts its parameters into Adam):

.. code-block:: python

    from cl_plugins.integrations.hosts.dcrec.patch import patch_dcrec
    handle = patch_dcrec(None, "temperature_free")   # recbole.model.layers.CLLayer from DCRec's tree
    runpy.run_path("run_DCRec.py", run_name="__main__")

The layer's ``tau`` is the host temperature; the loss returns per-row losses, never reduced. A
layer built before the patch gets its loss at its first call (pass it as the target to have it at
once). The alternative seam, ``model.contrastive_learning_layer = DCRecCLLayer(...)`` after
``get_model`` and before ``get_trainer``, takes :class:`DCRecCLLayer`.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import nn

from cl_plugins.integrations.hosts.dcrec.model import build_dcrec_loss
from cl_plugins.integrations.patching import PatchHandle, check_built, class_and_model


class DCRecCLLayer(nn.Module):
    """A stand-in for DCRec's ``CLLayer``: ``vanilla_loss(z1, z2) -> [B]`` with any strategy.

    Shapes: z1, z2 [B, H] (row i of z2 is the positive of row i of z1) -> [B].
    """

    def __init__(self, num_hidden: int, tau: float = 1.0, loss: str = "infonce", **loss_args: Any) -> None:
        super().__init__()
        self.tau = tau
        self.loss_fn = build_dcrec_loss(loss, tau, num_hidden, **loss_args)

    def vanilla_loss(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(z1, z2)

    forward = vanilla_loss


def patch_dcrec(target: Any = None, loss: str | nn.Module = "infonce", **loss_args: Any) -> PatchHandle:
    """Replace ``CLLayer.vanilla_loss`` so that DCRec's CL terms use ``loss``.

    Args:
        target: DCRec's ``CLLayer`` class (default: ``recbole.model.layers.CLLayer``) or a layer built
            from it.
        loss: a registry name (host τ = the layer's ``tau``, per-row losses, AMCL on ``num_hidden``) or
            a built ``cross_view`` loss with ``reduction="none"``.

    DCRec trains on one process's batch, so there is no ``global_batch`` option.
    """
    if "global_batch" in loss_args:
        raise TypeError("patch_dcrec: DCRec weights and reduces per-row losses itself; there is no global batch")
    if target is None:
        target = importlib.import_module("recbole.model.layers").CLLayer
    cls, layer = class_and_model(target, "patch_dcrec")
    if not hasattr(cls, "vanilla_loss"):
        raise TypeError(f"patch_dcrec: {cls.__name__} has no vanilla_loss: pass DCRec's recbole.model.layers.CLLayer")
    check_built(loss, "patch_dcrec", layouts=("cross_view",), reduction="none")

    def build(host: nn.Module) -> nn.Module:
        return build_dcrec_loss(str(loss), float(host.tau), host.fc1.in_features, **loss_args)

    handle = PatchHandle("patch_dcrec", loss, build)

    def vanilla_loss(self: nn.Module, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return handle.loss_of(self)(z1, z2)

    handle.attach_after(cls, "__init__")
    handle.replace(cls, "vanilla_loss", vanilla_loss)
    if layer is not None:
        handle.attach(layer)
    return handle
