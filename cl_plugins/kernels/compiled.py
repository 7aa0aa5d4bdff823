"""Per-pair maps compiled into one loop: a loss's ``compile_maps=True``, or ``CL_PLUGINS_COMPILE=1`` (or
:func:`set_compile`) for every loss.

A per-pair strategy's map (temperature-free's closed form, DySTreSS's ``s / tau(s)`` with its derivative and
statistic) is several elementwise operations over each tile of the [A, M] similarities; eagerly each is a pass of
its own over the tile, and on a CPU those passes, not their arithmetic, set the time. ``torch.compile`` (inductor)
turns the map into one fused loop (C++ on a CPU, Triton on a GPU) that reads the tile once and writes its outputs
once. The kernels of :mod:`cl_plugins.kernels` then run the compiled map where they ran the eager one: the same
values to rounding (tested), the same masks, reductions and gradients around it. Where the sums need no maximum, the
streaming kernels compile the whole tile instead: map, masks, ``exp``, sums and statistics forward, the softmax
gradient backward (:mod:`cl_plugins.kernels.tiles`).

Off by default: the first call compiles (seconds to a minute, once per process and dtype: shapes are dynamic),
which a short script or a test does not win back. Where compilation is unavailable (no C++ compiler, an
unsupported platform) the first failure is warned about once and the eager map runs from then on.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import torch

from .health import KernelHealth

ENV = "CL_PLUGINS_COMPILE"
#: what :func:`set_compile` set in this context (None: follow ``$CL_PLUGINS_COMPILE``)
_setting: ContextVar[bool | None] = ContextVar("cl_plugins_compile_maps", default=None)


def set_compile(enabled: bool | None) -> None:
    """Compile the per-pair maps (True), run them eagerly (False), or follow ``$CL_PLUGINS_COMPILE`` (None), for the
    losses built without ``compile_maps`` from here on in this context (thread or task)."""
    _setting.set(enabled)


def compile_enabled() -> bool:
    """Whether the per-pair maps run compiled: :func:`set_compile`, else ``CL_PLUGINS_COMPILE=1``."""
    if _setting.get() is not None:
        return bool(_setting.get())
    return os.environ.get(ENV, "0").strip().lower() in ("1", "true", "yes")


def resolve(enabled: bool | None) -> bool:
    """A loss's ``compile_maps`` (None: :func:`compile_enabled`); never inside a compiled region, whose compiler
    fuses the maps with the rest of the loss."""
    if torch.compiler.is_compiling():
        return False
    return compile_enabled() if enabled is None else bool(enabled)


@functools.cache
def compiled_form(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` under ``torch.compile`` (dynamic shapes), one wrapper per function for the process: torch.compile's
    own cache of compiled graphs hangs off this wrapper, so a second one would compile again."""
    return torch.compile(fn, dynamic=True)


def maybe_compiled(fn: Callable[..., Any], enabled: bool | None = None,
                   health: KernelHealth | None = None) -> Callable[..., Any]:  # fmt: skip
    """``fn`` compiled when ``enabled`` (a loss's ``compile_maps``; None: :func:`compile_enabled`), else ``fn``. A
    compilation that fails runs ``fn`` and, with the loss's ``health``, turns compiling off for that loss (one
    warning; other losses keep theirs)."""
    if not resolve(enabled) or (health is not None and not health.usable("compiled map")):
        return fn
    compiled = compiled_form(fn)

    def call(*args: Any) -> Any:
        if health is not None and not health.usable("compiled map"):  # failed earlier in this loss call
            return fn(*args)
        try:
            return compiled(*args)
        except Exception as error:  # noqa: BLE001 - any backend failure: the eager map is always right
            if health is None:
                raise
            health.fail("compiled map", error)
            return fn(*args)

    return call
