"""The bundled strategies' names without importing them (no torch): read from the ``@register_loss("...")``
decorators in :mod:`cl_plugins.losses`' files, for command-line help that answers before torch loads. The registry
(:func:`cl_plugins.available_losses`) stays the authority; a test keeps the two equal."""

from __future__ import annotations

import functools
import re
from pathlib import Path

_DECORATOR = re.compile(r'^@register_loss\("([A-Za-z0-9_]+)"\)', re.MULTILINE)


@functools.lru_cache(maxsize=1)
def bundled_strategy_names() -> tuple[str, ...]:
    """Sorted names of the strategies that ship with cl-plugins."""
    files = Path(__file__).with_name("losses").rglob("*.py")
    return tuple(sorted({name for f in files for name in _DECORATOR.findall(f.read_text(encoding="utf-8"))}))
