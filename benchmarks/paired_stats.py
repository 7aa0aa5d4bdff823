"""Paired statistics for strategy-vs-baseline comparisons: the same seeds (or splits) run under both, and the
difference per seed summarised with a 95% interval, never two independent mean ± std side by side.

    from benchmarks.paired_stats import paired, mean_interval
    d = paired(strategy_scores, baseline_scores)    # matched by position: seed i of both
    d.mean, d.low, d.high, d.mark()                 # "better" / "worse" / "no detectable difference"

Two intervals: Student's t (default; exact for normal differences, what the papers' "± std over seeds" invites)
and the percentile bootstrap (``method="bootstrap"``; no normality assumption, too narrow for n < 10, so the
t interval is the default for the 3-5 seeds a CPU affords).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided interval over ``n`` values (``low``/``high`` NaN when ``n < 2``)."""

    mean: float
    low: float
    high: float
    n: int
    method: str = "t"

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def mark(self) -> str:
        """For a difference (strategy − baseline, higher is better): which side of 0 the interval lies on."""
        if self.n < 2 or math.isnan(self.low):
            return "too few runs"
        if self.low > 0:
            return "better"
        if self.high < 0:
            return "worse"
        return "no detectable difference"

    def text(self, digits: int = 2) -> str:
        if self.n < 2:
            return f"{self.mean:+.{digits}f} (n {self.n})"
        if 0 < min(abs(self.low), abs(self.high)) < 0.5 * 10**-digits:
            digits += 2  # a bound that would print as ±0.00 decides the mark: show it
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}] (n {self.n})"


@dataclass(frozen=True)
class PairedDifference(Interval):
    """``a − b`` over matched runs, with how many runs ``a`` won."""

    wins: int = 0


def mean_interval(values: Sequence[float], level: float = LEVEL, method: str = "t", n_boot: int = 10_000,
                  seed: int = 0) -> Interval:  # fmt: skip
    """Mean of ``values`` with a ``level`` interval: Student's t, or the percentile bootstrap of the mean."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"values must be a non-empty 1-D sequence, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite (a NaN run is a failed run: rerun it, do not average it)")
    mean, n = float(x.mean()), len(x)
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, method)
    if method == "t":
        from scipy.stats import t

        half = float(t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
        return Interval(mean, mean - half, mean + half, n, method)
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        means = x[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
        low, high = np.quantile(means, [0.5 - level / 2, 0.5 + level / 2])
        return Interval(mean, float(low), float(high), n, method)
    raise ValueError(f"method must be 't' or 'bootstrap', got {method!r}")


def paired(a: Sequence[float], b: Sequence[float], level: float = LEVEL, method: str = "t") -> PairedDifference:
    """``a − b`` over runs matched one to one (seed i of ``a`` with seed i of ``b``)."""
    if len(a) != len(b) or not len(a):
        raise ValueError(f"paired runs must match one to one, got {len(a)} and {len(b)}")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    i = mean_interval(d, level, method)
    return PairedDifference(i.mean, i.low, i.high, i.n, i.method, wins=int((d > 0).sum()))


def paired_by_key(a: dict, b: dict, level: float = LEVEL, method: str = "t") -> PairedDifference:
    """Like :func:`paired` for ``{seed: score}`` dicts, on the seeds both have (a seed only one has is dropped)."""
    common = sorted(set(a) & set(b))
    return paired([a[k] for k in common], [b[k] for k in common], level, method)
