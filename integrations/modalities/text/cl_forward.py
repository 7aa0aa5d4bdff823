"""SimCSE-style code (SimCSE's ``simcse/models.py`` and MABEL's fork of it): the module-level ``cl_init`` builds a
model's head, ``cl_forward`` computes its loss. :func:`patch_cl_module` replaces both for any such module (the
simcse and mabel hosts' patches give it their forward); :func:`enable_modern_transformers` lets their models be
built on transformers >= 4.30."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torch import nn

import cl_plugins as clp
from cl_plugins.integrations.patching import PatchHandle, check_built


def host_module(target: Any, patch: str, default: str | None) -> tuple[ModuleType, nn.Module | None]:
    """The module that holds ``cl_init`` / ``cl_forward``: given, imported (``default``), or a model's own."""
    if target is None and default is not None:
        return importlib.import_module(default), None
    if isinstance(target, ModuleType):
        return target, None
    if isinstance(target, nn.Module):
        return sys.modules[type(target).__module__], target
    raise TypeError(f"{patch}: target must be the models module or a model built from it, got {type(target).__name__}")


def patch_cl_module(patch: str, target: ModuleType | nn.Module | None, default: str | None, loss: str | nn.Module,
                    tau_field: str, make_forward: Callable[[PatchHandle], Callable[..., Any]],
                    loss_args: dict[str, Any]) -> PatchHandle:  # fmt: skip
    """SimCSE-style code (SimCSE, MABEL): the module-level ``cl_init`` builds a model's head, ``cl_forward``
    computes its loss; the host τ is ``model_args.<tau_field>``, the feature width the hidden size."""
    module, model = host_module(target, patch, default)
    if not callable(getattr(module, "cl_forward", None)) or not callable(getattr(module, "cl_init", None)):
        raise TypeError(f"{patch}: {module!r} has no cl_init / cl_forward: pass the module that defines the models")
    check_built(loss, patch, layouts=("cross_view",))

    def build(cls: nn.Module) -> nn.Module:
        return clp.build_host_loss(str(loss), host_tau=float(getattr(cls.model_args, tau_field)), layout="cross_view",
                               feature_dim=cls.config.hidden_size, **loss_args)  # fmt: skip

    handle = PatchHandle(patch, loss, build)
    handle.attach_after(module, "cl_init")
    handle.replace(module, "cl_forward", make_forward(handle))
    if model is not None:
        handle.attach(model)
    return handle


def enable_modern_transformers(module: Any = None) -> None:
    """Let SimCSE's (or MABEL's) ``cl_init`` run on recent transformers: it calls ``init_weights`` before
    ``post_init`` has run, which fails on transformers 5 (``no attribute 'all_tied_weights_keys'``); skip
    that call and run ``post_init`` instead. Idempotent; ``module`` defaults to ``simcse.models``."""
    if module is None:
        import simcse.models as module  # noqa: PLC0415
    if getattr(module.cl_init, "_cl_plugins_shim", False):
        return
    original = module.cl_init

    def cl_init(cls, config):  # type: ignore[no-untyped-def]
        saved = cls.init_weights
        cls.init_weights = lambda: None
        try:
            original(cls, config)
        finally:
            cls.init_weights = saved
        cls.post_init()

    cl_init._cl_plugins_shim = True  # type: ignore[attr-defined]
    module.cl_init = cl_init
