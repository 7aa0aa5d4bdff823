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

import os
import warnings
from collections.abc import Callable
from typing import Any

import torch

ENV = "CL_PLUGINS_COMPILE"

_state: dict[str, Any] = {"enabled": None, "failed": False, "compiled": {}}


def set_compile(enabled: bool | None) -> None:
    """Compile the per-pair maps (True), run them eagerly (False), or follow ``$CL_PLUGINS_COMPILE`` (None)."""
    _state["enabled"] = enabled


def compile_enabled() -> bool:
    """Whether the per-pair maps run compiled: :func:`set_compile`, else ``CL_PLUGINS_COMPILE=1``."""
    if _state["failed"]:
        return False
    if _state["enabled"] is not None:
        return bool(_state["enabled"])
    return os.environ.get(ENV, "0").strip().lower() in ("1", "true", "yes")


def resolve(enabled: bool | None) -> bool:
    """A loss's ``compile_maps`` (None: :func:`compile_enabled`), False for good once a compilation has failed."""
    return not _state["failed"] and (compile_enabled() if enabled is None else bool(enabled))


def maybe_compiled(fn: Callable[..., Any], enabled: bool | None = None) -> Callable[..., Any]:
    """``fn`` compiled (dynamic shapes) when ``enabled`` (a loss's ``compile_maps``; None: :func:`compile_enabled`),
    else ``fn``; a compilation that fails falls back to ``fn`` for good, with one warning."""
    if not resolve(enabled):
        return fn
    compiled = _state["compiled"].get(fn)
    if compiled is None:
        compiled = _state["compiled"][fn] = torch.compile(fn, dynamic=True)

    def call(*args: Any) -> Any:
        if _state["failed"]:  # an earlier call failed (this wrapper may outlive it within one loss call)
            return fn(*args)
        try:
            return compiled(*args)
        except Exception as error:  # noqa: BLE001 - any backend failure: the eager map is always right
            _state["failed"] = True
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            warnings.warn(f"cl_plugins: compiling the per-pair maps failed ({type(error).__name__}: {first}); "
                          "running them eagerly", RuntimeWarning, stacklevel=2)  # fmt: skip
            return fn(*args)

    return call
