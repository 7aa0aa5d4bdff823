"""SentEval-protocol evaluation of sentence encoders (STS and transfer tasks), without SentEval.

SentEval is not on PyPI and its transfer tasks break on Python >= 3.11; this package reads
SentEval's on-disk layout (``<root>/sentence/SentEval/data/downstream``) and re-implements
SimCSE's evaluation conventions. If an importable ``senteval`` is installed it can be used as
an alternative backend (see :mod:`cl_plugins.integrations.hosts.simcse.evaluate`).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["STS_TASKS", "TRANSFER_TASKS", "evaluate", "format_table", "spearman"]
_HOME = {"STS_TASKS": "engine", "TRANSFER_TASKS": "engine", "evaluate": "engine", "format_table": "engine",
         "spearman": "sts"}  # fmt: skip


def __getattr__(name: str) -> Any:
    # imported on first use: the hosts' declarations (simcse's and mabel's host.py, which `cl-plugins --help` reads)
    # name this package, and that must not load torch
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
