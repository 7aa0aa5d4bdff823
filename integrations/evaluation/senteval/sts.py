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

from cl_plugins.integrations.evaluation.senteval import readers

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


def encode_unique(encoder: Encoder, groups: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
    """Embeddings of every distinct sentence of ``groups``, in one encoder call (the encoder is
    deterministic at evaluation, so repeated sentences need not be encoded twice)."""
    unique = list(dict.fromkeys(s for group in groups for s in group))
    return dict(zip(unique, encoder(unique)))


def pair_scores(encoder: Encoder | dict[str, np.ndarray], pairs: readers.Pairs) -> np.ndarray:
    table = encoder if isinstance(encoder, dict) else encode_unique(encoder, [pairs.a, pairs.b])
    return cosine(np.stack([table[s] for s in pairs.a]), np.stack([table[s] for s in pairs.b]))


def eval_sts_year(encoder: Encoder, year: str, root=None) -> dict[str, float]:
    subsets = readers.read_sts_year(year, root)
    table = encode_unique(encoder, [side for p in subsets.values() for side in (p.a, p.b)])
    per, sizes, sys_all, gold_all = {}, {}, [], []
    for name, pairs in subsets.items():
        sys = pair_scores(table, pairs)
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
