"""The seven SentEval transfer tasks SimCSE reports, on frozen embeddings, in SentEval's order.

SentEval sorts every task's samples by (token count, label) — MRPC's pairs by (tokens of A, tokens of B,
label) — with Python's stable sort, encodes them in that order in batches of 128 (its ``params.batch_size``),
and hands the classifiers the sorted arrays: the k-fold splits and the minibatches index into that order.
:func:`senteval_order` does the same, so the probes see SentEval's folds and minibatches; ``embed`` gets each
list in that order (:meth:`.embedders.Embedder.transfer` encodes it in SentEval's batches: the same padding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cl_plugins.integrations.evaluation.senteval import readers
from cl_plugins.integrations.evaluation.senteval.classifier import ProbeConfig, inner_kfold, kfold_then_test, split

Embed = Callable[[Sequence[str]], np.ndarray]


def senteval_order(keys: Sequence[tuple]) -> list[int]:
    """Indices sorted by ``keys`` (token counts, then label); ties keep file order, as Python's sort does."""
    return sorted(range(len(keys)), key=keys.__getitem__)


def _subsample(n: int, limit: int | None, seed: int = 1111) -> np.ndarray:
    idx = np.arange(n)
    if limit is not None and n > limit:
        idx = np.sort(np.random.RandomState(seed).choice(n, limit, replace=False))
    return idx


def _kept_in_order(keys: Sequence[tuple], limit: int | None) -> list[int]:
    """Indices of the (subsampled) items in SentEval's order of their ``keys``."""
    keep = _subsample(len(keys), limit)
    return [keep[j] for j in senteval_order([keys[i] for i in keep])]


def _sorted(sents: list[str], labels: Sequence[int], limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """(sentences, labels) of a (subsampled) split in SentEval's order."""
    order = _kept_in_order([(len(s.split()), y) for s, y in zip(sents, labels, strict=True)], limit)
    return [sents[i] for i in order], np.asarray([labels[i] for i in order])


def _binary(embed: Embed, task: str, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    sents, labels = _sorted(*readers.read_binary(task, root), limit)
    return inner_kfold(embed(sents), labels, 2, cfg)


def _sst2(embed: Embed, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    data = readers.read_sst2(root)
    xs, ys = {}, {}
    for key, (sents, labels) in data.items():
        ordered, ys[key] = _sorted(sents, labels, limit if key == "train" else None)
        xs[key] = embed(ordered)
    return split(xs["train"], ys["train"], xs["dev"], ys["dev"], xs["test"], ys["test"], 2, cfg)


def _trec(embed: Embed, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    data = readers.read_trec(root)
    train, ytr = _sorted(*data["train"], limit)
    test, yte = _sorted(*data["test"])
    return kfold_then_test(embed(train), ytr, embed(test), yte, 6, cfg)


def _mrpc_features(embed: Embed, a: list[str], b: list[str], y: list[int],
                   limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    order = _kept_in_order([(len(p.split()), len(q.split()), t) for p, q, t in zip(a, b, y, strict=True)], limit)
    u = embed([a[i] for i in order])
    v = embed([b[i] for i in order])
    return np.concatenate([np.abs(u - v), u * v], axis=1), np.asarray([y[i] for i in order])


def _mrpc(embed: Embed, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from sklearn.metrics import f1_score

    data = readers.read_mrpc(root)
    xtr, ytr = _mrpc_features(embed, *data["train"], limit=limit)
    xte, yte = _mrpc_features(embed, *data["test"])
    out = kfold_then_test(xtr, ytr, xte, yte, 2, cfg, keep_predictions=True)
    out["f1"] = round(100 * float(f1_score(yte, out.pop("predictions"))), 2)  # SentEval: F1 of the paraphrase class
    return out


def eval_transfer(
    embed: Embed, task: str, cfg: ProbeConfig, root=None, limit: int | None = None
) -> dict[str, float]:
    """Accuracy (``acc``, test) and ``devacc`` of one task (and ``f1`` for MRPC). ``limit`` subsamples training
    data (for smoke tests only; results are then not comparable and are marked ``subsampled``)."""
    if task in ("MR", "CR", "SUBJ", "MPQA"):
        out = _binary(embed, task, cfg, root, limit)
    elif task == "SST2":
        out = _sst2(embed, cfg, root, limit)
    elif task == "TREC":
        out = _trec(embed, cfg, root, limit)
    elif task == "MRPC":
        out = _mrpc(embed, cfg, root, limit)
    else:
        raise ValueError(f"unknown transfer task {task!r}; valid: MR, CR, SUBJ, MPQA, SST2, TREC, MRPC")
    if limit is not None:
        out["subsampled"] = float(limit)
    return out
