"""Triton, where it is installed: ``triton`` and ``tl`` (None without it) and :func:`triton_map`, the decorator of a
per-pair map's Triton form (a strategy's own file uses it through :mod:`cl_plugins.extension`). No kernel here."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

try:  # optional: pip install "cl-plugins[triton]"
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None  # type: ignore[assignment]
    tl = None  # type: ignore[assignment]


def triton_map(function: Callable[..., Any]) -> Any:
    """Decorates a per-pair map's Triton form, ``function(x, params, constant) -> (phi(x), phi'(x), stat(x))`` on a
    block of float32 cosines ``x``: ``params`` is the tuple of ``TritonMap.params`` (runtime floats), ``constant``
    the compile-time ``TritonMap.constant`` (branch on it freely). The ``triton.jit`` function, or None where Triton
    is absent (the strategy's map then has no Triton form). Write numbers as literals: a jitted function reads no
    module globals; define it at a module's top level, where the kernels' operators find it (:func:`map_key`)."""
    if triton is None:
        return None
    return keyed(triton.jit(function), f"{function.__module__}:{function.__qualname__}")


def keyed(jitted: Any, key: str) -> Any:
    """``jitted``, found by the kernels' operators at ``key``: ``"module:attribute.path"``, where its module holds it
    (a jitted function is no operator argument, so they take the map by where it is defined)."""
    jitted.cl_plugins_key = key
    return jitted


def map_key(function: Any) -> str:
    """The key the kernels' operators take the map ``function`` (made by :func:`triton_map`) by."""
    return function.cl_plugins_key


def registered_map(key: str) -> Any:
    """The jitted map at ``key`` (:func:`keyed`), looked up in its module."""
    module, _, path = key.partition(":")
    found: Any = sys.modules.get(module)
    for name in path.split("."):
        found = getattr(found, name, None)
    if found is None or getattr(found, "cl_plugins_key", None) != key:
        raise ValueError(f"the Triton map {key} is not where it was defined: define a map's Triton form at the top "
                         "level of a module (the kernels' operators find it by module and name)")  # fmt: skip
    return found


def available() -> bool:
    """Triton imports; a kernel can then run on CUDA tensors, or on CPU ones under ``TRITON_INTERPRET=1``."""
    return triton is not None


def usable_on(device: torch.device) -> bool:
    return available() and (device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1")


def refuse_unusable(device: torch.device) -> None:
    if not available():
        raise ValueError("kernel='triton' needs the triton package: pip install 'cl-plugins[triton]'")
    if not usable_on(device):
        raise ValueError(f"kernel='triton' runs on CUDA tensors (these are on {device}); use kernel='auto' here "
                         "(Triton's interpreter, TRITON_INTERPRET=1, runs it on the CPU for tests)")  # fmt: skip
