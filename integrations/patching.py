"""The one contract every ``patch_<target>`` follows (``docs/patching.md``).

.. code-block:: python

    handle = patch_<target>(target, loss, *, global_batch=False, **loss_args)

* ``target`` is the object that owns the seam (a module, a class) or a model already built
  from it; ``loss`` is a registry name (built per host model from the host's temperature) or a
  built cl-plugins loss (used as is, shared by every host model).
* The loss becomes the submodule ``cl_plugins_loss`` of each host model, when the model is built
  after the call, or at once when ``target`` is the model: ``.parameters()``, ``.to()``,
  ``.double()`` and ``state_dict()`` include it.
* ``handle.undo()`` (or leaving ``with patch_<target>(...):``) puts back every replaced function
  object and removes the losses it attached.
* ``clp.after_optimizer_step(model)`` (or ``handle.after_optimizer_step()``) runs the per-step
  upkeep of learned temperatures and schedules.
* ``global_batch=False`` reproduces the host's own gradient under ``torch.distributed``;
  ``global_batch=True`` gives the single-process gradient of the global batch (see
  :func:`host_gradient`).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

import cl_plugins as clp

LOSS_ATTR = "cl_plugins_loss"
_MISSING = object()
_MARK = "_cl_plugins_patch"


class PatchHandle:
    """What ``patch_<target>`` returns: undo, the attached losses, per-step upkeep.

    Args:
        patch: the patch function's name, for messages.
        loss: a registry name or a built loss (shared by every host).
        build: ``build(host) -> loss module`` for a registry name (reads the host's τ, width).
    """

    def __init__(self, patch: str, loss: str | nn.Module, build: Callable[[nn.Module], nn.Module]) -> None:
        if not isinstance(loss, (str, nn.Module)):
            raise TypeError(f"{patch}: loss must be a registry name or a cl-plugins loss module, got {type(loss)}")
        self.patch = patch
        self._shared = loss if isinstance(loss, nn.Module) else None
        self._build = build
        self._saved: list[tuple[Any, str, Any]] = []
        self._hosts: weakref.WeakSet[nn.Module] = weakref.WeakSet()

    # ------------------------------------------------------------------ used by the patch functions
    def replace(self, owner: Any, name: str, new: Callable[..., Any]) -> None:
        """``owner.name = new`` (a module's or a class's attribute), remembered for :meth:`undo`."""
        current = getattr(owner, name, None)
        if getattr(current, _MARK, False):
            raise RuntimeError(
                f"{self.patch}: {getattr(owner, '__name__', owner)}.{name} is already patched by cl-plugins; "
                "call undo() on the earlier handle first"
            )
        setattr(new, _MARK, True)
        self._saved.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, new)

    def attach_after(self, owner: Any, name: str) -> None:
        """Wrap ``owner.name(host, ...)`` (an ``__init__`` or an ``init(cls, config)`` hook) so that every
        host it builds gets its loss right away, before the host's optimizer is made."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(host: nn.Module, *args: Any, **kwargs: Any) -> Any:
            result = original(host, *args, **kwargs)
            self.attach(host)
            return result

        self.replace(owner, name, wrapper)

    def attach(self, host: nn.Module) -> nn.Module:
        """Register the loss as ``host.cl_plugins_loss`` (once) and return it."""
        if not isinstance(host, nn.Module):
            raise TypeError(f"{self.patch}: the host model must be an nn.Module, got {type(host).__name__}")
        if isinstance(host, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            raise TypeError(f"{self.patch}: a {type(host).__name__} would run or iterate the loss as one of its "
                            "layers; attach it to the model that holds this container")  # fmt: skip
        loss = host._modules.get(LOSS_ATTR)
        if loss is None:
            loss = self._shared if self._shared is not None else _like(self._build(host), host)
            host.add_module(LOSS_ATTR, loss)
            self._hosts.add(host)
        return loss

    def loss_of(self, host: nn.Module) -> nn.Module:
        """The host's loss; a host built before the patch gets one now (with a warning if it has parameters)."""
        loss = host._modules.get(LOSS_ATTR)
        if loss is None:
            loss = self.attach(host)
            if any(p.requires_grad for p in loss.parameters()):
                warnings.warn(
                    f"{self.patch}: the {type(host).__name__} was built before the patch, so its loss's parameters "
                    f"were created at its first call and miss an optimizer made earlier; pass the model as the "
                    f"target ({self.patch}(model, ...)) before building the optimizer",
                    stacklevel=3,
                )
        return loss

    # ------------------------------------------------------------------ public
    @property
    def losses(self) -> list[nn.Module]:
        """The distinct losses attached so far."""
        seen: dict[int, nn.Module] = {}
        for host in list(self._hosts):
            loss = host._modules.get(LOSS_ATTR)
            if loss is not None:
                seen.setdefault(id(loss), loss)
        if self._shared is not None:
            seen.setdefault(id(self._shared), self._shared)
        return list(seen.values())

    def after_optimizer_step(self) -> None:
        """Per-step upkeep of every attached loss (same as ``clp.after_optimizer_step(model)``)."""
        for loss in self.losses:
            clp.after_optimizer_step(loss)

    def undo(self) -> None:
        """Put back every replaced attribute (the same objects) and remove the attached losses."""
        for owner, name, previous in reversed(self._saved):
            if previous is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, previous)
        self._saved.clear()
        for host in list(self._hosts):
            host._modules.pop(LOSS_ATTR, None)
        self._hosts = weakref.WeakSet()

    def __enter__(self) -> PatchHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.undo()


def _like(loss: nn.Module, host: nn.Module) -> nn.Module:
    """A freshly built loss on the host's device and floating dtype."""
    param = next(host.parameters(), None)
    if param is None:
        return loss
    return loss.to(device=param.device, dtype=param.dtype if param.is_floating_point() else None)


def class_and_model(target: Any, patch: str) -> tuple[type, nn.Module | None]:
    """A seam class, or a model built from it: ``(class, model or None)``."""
    if isinstance(target, type):
        return target, None
    if isinstance(target, nn.Module):
        return type(target), target
    raise TypeError(f"{patch}: target must be the host class or a model built from it, got {type(target).__name__}")


def check_built(loss: str | nn.Module, patch: str, *, layouts: tuple[str, ...], reduction: str | None = None) -> None:
    """A built loss must have a layout (and reduction) the seam can use; names are built right."""
    if isinstance(loss, str):
        return
    layout = getattr(loss, "layout", None)
    if layout is not None and layout not in layouts:
        raise ValueError(f"{patch}: build the loss with layout={layouts[0]!r} (got {layout!r})")
    if reduction is not None and getattr(loss, "reduction", reduction) != reduction:
        raise ValueError(f"{patch}: build the loss with reduction={reduction!r} (the host reduces it itself)")


@contextlib.contextmanager
def gathering(loss: nn.Module, enabled: bool) -> Iterator[None]:
    """Let ``loss`` gather candidates across processes (or not) for one call."""
    if not hasattr(loss, "gather_distributed"):
        yield
        return
    saved, loss.gather_distributed = loss.gather_distributed, bool(enabled)
    try:
        yield
    finally:
        loss.gather_distributed = saved


def host_gradient(value: torch.Tensor, global_batch: bool) -> torch.Tensor:
    """The host's gradient scale for a loss that gathers embeddings with gradient.

    SimCSE and MABEL gather the other processes' embeddings *without* gradient: each rank
    back-propagates the global loss through its own rows only, and DDP averages, so they train at
    1/W of the global-batch gradient. A cl-plugins loss gathers with gradient (the exact
    global-batch gradient); ``global_batch=False`` scales its gradient by 1/W to give the host's
    step size, ``True`` keeps the global-batch gradient (W times the host's: divide the host's
    learning rate by W to keep its steps). The value is unchanged either way.
    """
    if global_batch or not clp.is_distributed():
        return value
    return clp.scale_gradient(value, 1.0 / clp.world_size())
