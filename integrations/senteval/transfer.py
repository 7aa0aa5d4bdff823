"""The seven SentEval transfer tasks SimCSE reports, on frozen embeddings, in SentEval's order.

SentEval sorts every task's samples by (token count, label) — MRPC's pairs by (tokens of A, tokens of B,
label) — with Python's stable sort, encodes them in that order in batches of 128 (its ``params.batch_size``),
and hands the classifiers the sorted arrays: the k-fold splits and the minibatches index into that order.
:func:`senteval_order` and :func:`encode_in_batches` do the same, so the probes see SentEval's folds and
minibatches and the encoder SentEval's batches (the same padding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import readers
from .classifier import ProbeConfig, inner_kfold, kfold_then_test, split

Encoder = Callable[[Sequence[str]], np.ndarray]
#: sentences per encoder call: SentEval's default ``params.batch_size`` (SimCSE's evaluation keeps it)
ENCODE_BATCH = 128


def senteval_order(keys: Sequence[tuple]) -> list[int]:
    """Indices sorted by ``keys`` (token counts, then label); ties keep file order, as Python's sort does."""
    return sorted(range(len(keys)), key=keys.__getitem__)


def encode_in_batches(encoder: Encoder, sentences: Sequence[str], batch_size: int = ENCODE_BATCH) -> np.ndarray:
    """Embeddings of ``sentences`` in consecutive batches of ``batch_size``, as SentEval's tasks call the batcher."""
    parts = [np.asarray(encoder(sentences[i : i + batch_size])) for i in range(0, len(sentences), batch_size)]
    return np.vstack(parts)


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


def _binary(encoder: Encoder, task: str, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    sents, labels = _sorted(*readers.read_binary(task, root), limit)
    return inner_kfold(encode_in_batches(encoder, sents), labels, 2, cfg)


def _sst2(encoder: Encoder, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    data = readers.read_sst2(root)
    xs, ys = {}, {}
    for key, (sents, labels) in data.items():
        ordered, ys[key] = _sorted(sents, labels, limit if key == "train" else None)
        xs[key] = encode_in_batches(encoder, ordered)
    return split(xs["train"], ys["train"], xs["dev"], ys["dev"], xs["test"], ys["test"], 2, cfg)


def _trec(encoder: Encoder, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    data = readers.read_trec(root)
    train, ytr = _sorted(*data["train"], limit)
    test, yte = _sorted(*data["test"])
    return kfold_then_test(encode_in_batches(encoder, train), ytr, encode_in_batches(encoder, test), yte, 6, cfg)


def _mrpc_features(encoder: Encoder, a: list[str], b: list[str], y: list[int],
                   limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    order = _kept_in_order([(len(p.split()), len(q.split()), t) for p, q, t in zip(a, b, y, strict=True)], limit)
    u = encode_in_batches(encoder, [a[i] for i in order])
    v = encode_in_batches(encoder, [b[i] for i in order])
    return np.concatenate([np.abs(u - v), u * v], axis=1), np.asarray([y[i] for i in order])


def _mrpc(encoder: Encoder, cfg: ProbeConfig, root, limit: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from sklearn.metrics import f1_score

    data = readers.read_mrpc(root)
    xtr, ytr = _mrpc_features(encoder, *data["train"], limit=limit)
    xte, yte = _mrpc_features(encoder, *data["test"])
    out = kfold_then_test(xtr, ytr, xte, yte, 2, cfg, keep_predictions=True)
    out["f1"] = round(100 * float(f1_score(yte, out.pop("predictions"))), 2)  # SentEval: F1 of the paraphrase class
    return out


def eval_transfer(
    encoder: Encoder, task: str, cfg: ProbeConfig, root=None, limit: int | None = None
) -> dict[str, float]:
    """Accuracy (``acc``, test) and ``devacc`` of one task (and ``f1`` for MRPC). ``limit`` subsamples training
    data (for smoke tests only; results are then not comparable and are marked ``subsampled``)."""
    if task in ("MR", "CR", "SUBJ", "MPQA"):
        out = _binary(encoder, task, cfg, root, limit)
    elif task == "SST2":
        out = _sst2(encoder, cfg, root, limit)
    elif task == "TREC":
        out = _trec(encoder, cfg, root, limit)
    elif task == "MRPC":
        out = _mrpc(encoder, cfg, root, limit)
    else:
        raise ValueError(f"unknown transfer task {task!r}; valid: MR, CR, SUBJ, MPQA, SST2, TREC, MRPC")
    if limit is not None:
        out["subsampled"] = float(limit)
    return out
