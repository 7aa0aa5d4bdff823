"""SEAT (May et al., 2019): WEAT effect sizes and permutation p-values for sentence encoders.

Target sets X, Y and attribute sets A, B (bias-bench's ``data/seat/*.jsonl``: ``targ1``, ``targ2``,
``attr1``, ``attr2`` with ``examples``) are encoded; with cosine similarities,

    s(w, A, B) = mean_a cos(w, a) − mean_b cos(w, b)
    d = (mean_x s(x) − mean_y s(y)) / std_{w ∈ X ∪ Y} s(w)        (sample std, ddof 1)

and the one-sided p-value is the share of re-partitions (Xi, Yi) of X ∪ Y (|Xi| = |X|) whose
statistic Σ_x s(x) − Σ_y s(y) is at least the observed one (SEAT's conservative test counts
ties): all partitions when there are at most ``n_samples`` of them, else the observed one and
``n_samples − 1`` random ones (as SEAT's ``weat.py``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

SEAT_DIR = "bias/bias-bench/data/seat"
#: the gender tests MABEL and bias-bench report
GENDER_TESTS = ("sent-weat6", "sent-weat6b", "sent-weat7", "sent-weat7b", "sent-weat8", "sent-weat8b")


def load_seat_test(name: str, root: str | Path | None = None) -> dict[str, list[str]]:
    """``{"X": [...], "Y": [...], "A": [...], "B": [...]}`` of ``<name>.jsonl``."""
    from cl_plugins.integrations.data.catalogue import data_path

    path = data_path(f"{SEAT_DIR}/{name}.jsonl", hint="McGill-NLP/bias-bench data/seat/", root=root)
    raw = json.loads(path.read_text())
    return {
        key: raw[field]["examples"] for key, field in zip("XYAB", ("targ1", "targ2", "attr1", "attr2"), strict=True)
    }


def association(w: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """s(w, A, B) for every row of ``w``: [n]."""
    w, a, b = F.normalize(w.double(), dim=1), F.normalize(a.double(), dim=1), F.normalize(b.double(), dim=1)
    return (w @ a.T).mean(1) - (w @ b.T).mean(1)


def effect_size(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    sx, sy = association(x, a, b), association(y, a, b)
    spread = torch.cat([sx, sy]).std(correction=1)
    if float(spread) == 0.0:  # every target word is equally associated: no difference to measure (not 0/0)
        return 0.0
    return float((sx.mean() - sy.mean()) / spread)


def p_value(
    x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, b: torch.Tensor, n_samples: int = 100_000, seed: int = 0
) -> float:
    """One-sided permutation p-value of Σ_x s(x) − Σ_y s(y) (ties count as at least as large)."""
    s = torch.cat([association(x, a, b), association(y, a, b)])
    n, k = len(s), len(x)
    total = float(s.sum())
    observed = 2 * float(s[:k].sum()) - total
    if math.comb(n, k) <= n_samples:
        subsets = torch.tensor(list(itertools.combinations(range(n), k)))
        stats = 2 * s[subsets].sum(1) - total
    else:
        gen = torch.Generator().manual_seed(seed)
        idx = torch.argsort(torch.rand(n_samples - 1, n, generator=gen), dim=1)[:, :k]
        stats = torch.cat([2 * s[idx].sum(1) - total, torch.tensor([observed], dtype=s.dtype)])
    # a tolerance for the float round-off of equal sums taken in another order
    return float((stats >= observed - 1e-12 * max(1.0, abs(observed))).double().mean())


def run_seat(
    encode: Callable[[list[str]], torch.Tensor],
    tests: tuple[str, ...] = GENDER_TESTS,
    *,
    n_samples: int = 100_000,
    seed: int = 0,
    root: str | Path | None = None,
) -> dict[str, Any]:
    """Effect size and p-value per test, and the mean absolute effect size (bias-bench's summary)."""
    out: dict[str, Any] = {}
    for name in tests:
        sets = load_seat_test(name, root)
        emb = {k: encode(v) for k, v in sets.items()}
        out[name] = {
            "effect_size": effect_size(emb["X"], emb["Y"], emb["A"], emb["B"]),
            "p_value": p_value(emb["X"], emb["Y"], emb["A"], emb["B"], n_samples, seed),
        }
    out["mean_abs_effect_size"] = sum(abs(out[t]["effect_size"]) for t in tests) / len(tests)
    return out
