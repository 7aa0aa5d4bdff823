"""The results file the strategy benchmarks share: rows accumulate, a re-run replaces its own rows."""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any


def machine() -> str:
    import torch

    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads{gpu}, "
        f"torch {torch.__version__}, {datetime.date.today()}"
    )


def load(path: Path) -> dict[str, Any]:
    results = json.loads(path.read_text()) if path.exists() else {"rows": []}
    results["machine"] = machine()
    return results


def merge(
    results: dict[str, Any],
    new: list[dict[str, Any]],
    key: Callable[[dict[str, Any]], Hashable],
    path: Path,
    output: Path,
    render: Callable[[dict[str, Any]], str],
) -> None:
    """Replace the rows of ``results`` that ``new`` re-measures, then write the JSON and the markdown."""
    replaced = {key(r) for r in new}
    results["rows"] = [r for r in results["rows"] if key(r) not in replaced] + new
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    output.write_text(render(results))


def paired_difference(a: list[float], b: list[float]) -> str:
    """``a - b`` over matched runs (same seeds / splits): mean with its 95% t interval, n, the wins of a and the
    mark (see :mod:`benchmarks.paired_stats`)."""
    from benchmarks.paired_stats import paired

    d = paired(a, b)
    return f"{d.text()}, {d.wins} wins: {d.mark()}"
