"""How the tasks get their embeddings: SentEval's batches or one padding-free embedding per distinct sentence,
through the on-disk cache when the encoder has a fingerprint, with the time spent encoding counted."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cl_plugins.integrations.evaluation.senteval.embedding_cache import (
    ListCache,
    SentenceTable,
    encode_in_batches,
    prune,
)

Encoder = Callable[[Sequence[str]], np.ndarray]
#: sentences per encoder call in SentEval's transfer tasks (its default ``params.batch_size``; SimCSE keeps it)
ENCODE_BATCH = 128
BATCHINGS = ("auto", "senteval", "distinct")


class Embedder:
    """Embeddings for the STS and transfer tasks of one evaluation.

    Args:
        encoder: ``list[str] -> [n, d]`` array; with a ``fingerprint`` attribute its embeddings are cached on
            disk, with ``encode_unpadded`` it supports ``batching="distinct"``.
        batching: ``"senteval"``: each task's sentences in SentEval's order and batches, the original's
            numbers to the last digit; ``"distinct"``: every distinct sentence once, without padding, shared
            across tasks (fewer and unpadded tokens; embeddings differ from padded ones by float rounding, which
            changed none of the transfer numbers of all-MiniLM-L6-v2, see docs/results/senteval_speed.md);
            ``"auto"`` (default): ``"distinct"`` for an encoder with ``encode_unpadded``, else ``"senteval"``.
        cache: ``True`` (default root), a folder, or ``False`` (no disk cache).
    """

    def __init__(self, encoder: Encoder, batching: str = "auto", cache: bool | Path = True) -> None:
        if batching not in BATCHINGS:
            raise ValueError(f"batching must be one of {BATCHINGS}, got {batching!r}")
        if batching == "auto":
            batching = "distinct" if hasattr(encoder, "encode_unpadded") else "senteval"
        if batching == "distinct" and not hasattr(encoder, "encode_unpadded"):
            raise ValueError("batching='distinct' needs an encoder with encode_unpadded (load_encoder's has one); "
                             "use batching='senteval'")  # fmt: skip
        self.encoder, self.batching, self.seconds = encoder, batching, 0.0
        self.fingerprint: str | None = getattr(encoder, "fingerprint", None) if cache else None
        self.root = cache if isinstance(cache, Path) else None
        self.lists = ListCache(self.fingerprint, self.root) if self.fingerprint and batching == "senteval" else None
        self.table = SentenceTable(self.fingerprint, self.root) if batching == "distinct" else None

    def transfer(self, sentences: Sequence[str]) -> np.ndarray:
        """Embeddings of an ordered task list, encoded in consecutive batches of 128 as SentEval's tasks do."""
        return self._timed(sentences, ENCODE_BATCH)

    def sts(self, sentences: Sequence[str]) -> np.ndarray:
        """Embeddings of an STS set's distinct sentences, in one encoder call (the encoder batches them)."""
        return self._timed(sentences, None)

    def close(self) -> None:
        """Save what was added to the distinct-sentence table and keep the cache under its size limit."""
        if self.table is not None:
            self.table.save()
        if self.fingerprint:
            prune(self.root, keep=[self.fingerprint])

    def _timed(self, sentences: Sequence[str], batch_size: int | None) -> np.ndarray:
        start = time.perf_counter()
        if self.table is not None:
            out = self.table.lookup(self.encoder.encode_unpadded, sentences)  # type: ignore[attr-defined]
        elif self.lists is not None:
            out = self.lists.encode(self.encoder, sentences, batch_size)
        else:
            out = encode_in_batches(self.encoder, sentences, batch_size)
        self.seconds += time.perf_counter() - start
        return out
