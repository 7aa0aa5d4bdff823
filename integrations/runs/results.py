"""Small helpers for results files: mean ± std, JSON next to a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cl_plugins.integrations.runs import atomic


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0


def fmt_mean_std(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    m, s = mean_std([v * scale for v in values])
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def write_json(path: str | Path, payload: dict[str, Any]) -> Path:
    """Written atomically (a temporary sibling, then renamed)."""
    path = Path(path)
    atomic.write_json(path, payload)
    return path
