"""Put a cl-plugins strategy into the original DCRec code through ``CLLayer.vanilla_loss``.

DCRec computes both CL terms with ``self.contrastive_learning_layer.vanilla_loss(z1, z2)``, a
per-row loss ``[B]`` (InfoNCE at ``tau = cl_temp`` with the positive in the denominator).
:func:`patch_dcrec` replaces that method on the ``CLLayer`` class, before the model is built:

.. code-block:: python

    from integrations.dcrec.patch import patch_dcrec
    patch_dcrec("temperature_free")                  # recbole.model.layers.CLLayer from DCRec's tree
    runpy.run_path("run_DCRec.py", run_name="__main__")

The strategy is built in ``CLLayer.__init__`` (so its parameters, if any, are in the model when
DCRec's trainer builds Adam) with the layer's ``tau`` as the host temperature; it returns
per-row losses, never reduced. The alternative seam, ``model.contrastive_learning_layer =
DCRecCLLayer(...)`` after ``get_model`` and before ``get_trainer``, takes :class:`DCRecCLLayer`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .model import build_dcrec_loss


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


def patch_dcrec(loss: str = "infonce", cl_layer: type | None = None, **loss_args: Any) -> Callable[[], None]:
    """Replace ``CLLayer.vanilla_loss`` (default: ``recbole.model.layers.CLLayer``); returns an undo function."""
    cls = cl_layer if cl_layer is not None else importlib.import_module("recbole.model.layers").CLLayer
    for name in ("__init__", "vanilla_loss"):
        if not hasattr(cls, name):
            raise TypeError(f"{cls.__name__} has no {name}: expected DCRec's recbole.model.layers.CLLayer")
    original_init, original_loss = cls.__init__, cls.vanilla_loss

    @functools.wraps(original_init)
    def __init__(self: nn.Module, num_hidden: int, tau: float = 0.5, *args: Any, **kwargs: Any) -> None:
        original_init(self, num_hidden, tau, *args, **kwargs)
        self.cl_plugins_loss = build_dcrec_loss(loss, float(tau), num_hidden, **loss_args)

    @functools.wraps(original_loss)
    def vanilla_loss(self: nn.Module, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return self.cl_plugins_loss(z1, z2)

    cls.__init__, cls.vanilla_loss = __init__, vanilla_loss

    def undo() -> None:
        cls.__init__, cls.vanilla_loss = original_init, original_loss

    return undo
