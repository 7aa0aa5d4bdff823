"""The seven SentEval transfer tasks SimCSE reports, on frozen embeddings."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import readers
from .classifier import ProbeConfig, inner_kfold, kfold_then_test, split

Encoder = Callable[[Sequence[str]], np.ndarray]


def _subsample(n: int, limit: int | None, seed: int = 1111) -> np.ndarray:
    idx = np.arange(n)
    if limit is not None and n > limit:
        idx = np.sort(np.random.RandomState(seed).choice(n, limit, replace=False))
    return idx


def eval_transfer(
    encoder: Encoder, task: str, cfg: ProbeConfig, root=None, limit: int | None = None
) -> dict[str, float]:
    """Accuracy (``acc``, test) and ``devacc`` of one task. ``limit`` subsamples training data
    (for smoke tests only; results are then not comparable and are marked ``subsampled``)."""
    if task in ("MR", "CR", "SUBJ", "MPQA"):
        sents, labels = readers.read_binary(task, root)
        idx = _subsample(len(sents), limit)
        x = encoder([sents[i] for i in idx])
        out = inner_kfold(x, np.asarray(labels)[idx], 2, cfg)
    elif task == "SST2":
        data = readers.read_sst2(root)
        tr = _subsample(len(data["train"][0]), limit)
        xs = {k: encoder(v[0] if k != "train" else [v[0][i] for i in tr]) for k, v in data.items()}
        ys = {k: np.asarray(v[1]) for k, v in data.items()}
        ys["train"] = ys["train"][tr]
        out = split(xs["train"], ys["train"], xs["dev"], ys["dev"], xs["test"], ys["test"], 2, cfg)
    elif task == "TREC":
        data = readers.read_trec(root)
        tr = _subsample(len(data["train"][0]), limit)
        xtr = encoder([data["train"][0][i] for i in tr])
        xte = encoder(data["test"][0])
        out = kfold_then_test(xtr, np.asarray(data["train"][1])[tr], xte, np.asarray(data["test"][1]), 6, cfg)
    elif task == "MRPC":
        data = readers.read_mrpc(root)
        tr = _subsample(len(data["train"][0]), limit)

        def features(a: list[str], b: list[str]) -> np.ndarray:
            u, v = encoder(a), encoder(b)
            return np.concatenate([np.abs(u - v), u * v], axis=1)

        a, b, y = data["train"]
        xtr = features([a[i] for i in tr], [b[i] for i in tr])
        xte = features(data["test"][0], data["test"][1])
        out = kfold_then_test(xtr, np.asarray(y)[tr], xte, np.asarray(data["test"][2]), 2, cfg)
    else:
        raise ValueError(f"unknown transfer task {task!r}; valid: MR, CR, SUBJ, MPQA, SST2, TREC, MRPC")
    if limit is not None:
        out["subsampled"] = float(limit)
    return out
