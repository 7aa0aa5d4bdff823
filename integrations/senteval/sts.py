"""STS evaluation as SimCSE reports it: cosine similarity of the two embeddings vs gold.

* STS12-16: Spearman in SimCSE's ``"all"`` setting (all subsets of a year concatenated, one
  Spearman), plus original SentEval's ``mean`` and ``wmean`` (weighted by subset size) of the
  per-subset Spearman.
* STS-B and SICK-R: Spearman on ``test`` (no regressor; SimCSE replaced SentEval's), and on
  ``dev`` for model selection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.stats import spearmanr

from . import readers

Encoder = Callable[[Sequence[str]], np.ndarray]


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get average ranks) x 100."""
    return float(spearmanr(np.asarray(x), np.asarray(y)).correlation) * 100


COSINE_DECIMALS = 10


def cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise cosine in float64, rounded to ``COSINE_DECIMALS`` places.

    STS sets repeat some pairs; vectorised arithmetic can round identical rows differently
    depending on their position, which would break their tie in the Spearman ranking.
    """
    u_t = torch.nn.functional.normalize(torch.as_tensor(u, dtype=torch.float64), dim=1)
    v_t = torch.nn.functional.normalize(torch.as_tensor(v, dtype=torch.float64), dim=1)
    return np.round((u_t * v_t).sum(dim=1).numpy(), COSINE_DECIMALS)


def pair_scores(encoder: Encoder, pairs: readers.Pairs) -> np.ndarray:
    return cosine(encoder(pairs.a), encoder(pairs.b))


def eval_sts_year(encoder: Encoder, year: str, root=None) -> dict[str, float]:
    subsets = readers.read_sts_year(year, root)
    per, sizes, sys_all, gold_all = {}, {}, [], []
    for name, pairs in subsets.items():
        sys = pair_scores(encoder, pairs)
        per[name] = spearman(sys, pairs.scores)
        sizes[name] = len(pairs.scores)
        sys_all.extend(sys.tolist())
        gold_all.extend(pairs.scores)
    total = sum(sizes.values())
    return {
        "all": spearman(sys_all, gold_all),
        "mean": float(np.mean(list(per.values()))),
        "wmean": float(sum(per[k] * sizes[k] for k in per) / total),
        **{f"subset/{k}": v for k, v in per.items()},
        "n": float(total),
    }


def eval_relatedness(
    encoder: Encoder, task: str, splits: Sequence[str] = ("dev", "test"), root=None
) -> dict[str, float]:
    read = readers.read_stsb if task == "STSBenchmark" else readers.read_sick
    out = {}
    for split in splits:
        pairs = read(split, root)
        out[split] = spearman(pair_scores(encoder, pairs), pairs.scores)
        out[f"n_{split}"] = float(len(pairs.scores))
    return out
