"""Sentence embeddings on disk, keyed by what computed them, so an unchanged model is encoded once.

An entry lives under ``<root>/<fingerprint>/``, where the fingerprint (:func:`model_fingerprint`) hashes the
model's weights (every tensor of its state dict), its tokenizer, the pooling settings, the torch version and
:data:`ENCODING_VERSION`: changed weights, a new tokenizer or another pooler give another folder, never a stale
hit. Two kinds of entry, one per batching policy of :func:`cl_plugins.integrations.evaluation.senteval.engine.evaluate`:

* :class:`ListCache` (``batching="senteval"``): the embeddings of one ordered sentence list encoded in
  consecutive batches of a given size (SentEval's batches, the same padding), keyed by a hash of the list and
  the batch size. Exact: the cached array is bit for bit what encoding the list again returns.
* :class:`SentenceTable` (``batching="distinct"``): one embedding per distinct sentence, computed without
  padding (batches of equal token length, in a canonical order), shared across tasks and evaluations. A
  sentence keeps the embedding of the batch it was first encoded in; another batch composition could differ
  in the last bits (kernel choice by batch shape), the order of SentEval's own padding noise.

Files are written to a temporary sibling and renamed; an unreadable or mis-shaped file is deleted and
recomputed. :func:`prune` keeps the cache under a size limit by deleting the least recently used folders.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.data.paths import cache_root
from cl_plugins.integrations.runs import atomic

#: bump when the way embeddings are computed changes (pooling, batching), to retire old entries
ENCODING_VERSION = 1
#: default size limit of the whole embedding cache (least recently used fingerprints are deleted beyond it)
MAX_BYTES = 4 * 2**30


def default_root() -> Path:
    """``$CL_PLUGINS_CACHE/senteval_embeddings``."""
    return cache_root() / "senteval_embeddings"


def tokenizer_text(tokenizer: Any) -> str:
    """Everything that decides a tokenizer's output: the fast tokenizer's JSON, else its vocabulary and class."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.to_str()
    return json.dumps({"class": type(tokenizer).__name__, "vocab": sorted(tokenizer.get_vocab().items())})


def model_fingerprint(model: torch.nn.Module, tokenizer: Any, **settings: Any) -> str:
    """SHA-256 of the model's state dict (names, dtypes, shapes, bytes), the tokenizer and ``settings``."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy())
    digest.update(tokenizer_text(tokenizer).encode())
    meta = {**settings, "torch": torch.__version__, "encoding_version": ENCODING_VERSION}
    digest.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _save_npz(path: Path, **arrays: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to the temporary name
            np.savez(f, **arrays)

    atomic.write_with(path, write)
    os.utime(path.parent)  # the folder's mtime is its last use (see prune)


def _load_npz(path: Path, keys: Sequence[str]) -> dict[str, np.ndarray] | None:
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            out = {k: data[k] for k in keys}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:  # damaged: recompute, never trust
        warnings.warn(f"embedding cache file {path} is unreadable ({err}); recomputing it", stacklevel=3)
        path.unlink(missing_ok=True)
        return None
    os.utime(path.parent)
    return out


class ListCache:
    """Embeddings of ordered sentence lists encoded in consecutive batches (SentEval's batching)."""

    def __init__(self, fingerprint: str, root: Path | None = None) -> None:
        self.folder = (root or default_root()) / fingerprint

    def _path(self, sentences: Sequence[str], batch_size: int | None) -> Path:
        digest = hashlib.sha256(f"{batch_size}\x00".encode())
        for s in sentences:
            digest.update(s.encode())
            digest.update(b"\x00")
        return self.folder / f"list-{digest.hexdigest()[:32]}.npz"

    def encode(self, encoder: Callable[[Sequence[str]], np.ndarray], sentences: Sequence[str],
               batch_size: int | None) -> np.ndarray:  # fmt: skip
        """``encode_in_batches(encoder, sentences, batch_size)`` (one call when ``batch_size`` is None), cached."""
        path = self._path(sentences, batch_size)
        hit = _load_npz(path, ["embeddings"])
        if hit is not None and len(hit["embeddings"]) == len(sentences):
            return hit["embeddings"]
        out = encode_in_batches(encoder, sentences, batch_size)
        _save_npz(path, embeddings=out)
        return out


def encode_in_batches(encoder: Callable[[Sequence[str]], np.ndarray], sentences: Sequence[str],
                      batch_size: int | None) -> np.ndarray:  # fmt: skip
    """Embeddings of ``sentences`` in consecutive batches of ``batch_size`` (all at once when None)."""
    step = batch_size or max(len(sentences), 1)
    parts = [np.asarray(encoder(sentences[i : i + step]), dtype=np.float32) for i in range(0, len(sentences), step)]
    return np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)


class SentenceTable:
    """One padding-free embedding per distinct sentence, persisted for one fingerprint."""

    def __init__(self, fingerprint: str | None, root: Path | None = None) -> None:
        """``fingerprint`` None: kept in memory only."""
        self.path = (root or default_root()) / fingerprint / "sentences.npz" if fingerprint else None
        self.rows: dict[str, int] = {}
        self.embeddings = np.zeros((0, 0), dtype=np.float32)
        self.unsaved = False
        saved = _load_npz(self.path, ["text", "offsets", "embeddings"]) if self.path else None
        if saved is not None:
            text, offsets = saved["text"].tobytes(), saved["offsets"]
            sentences = [text[a:b].decode() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
            if len(sentences) == len(saved["embeddings"]):
                self.rows = {s: i for i, s in enumerate(sentences)}
                self.embeddings = saved["embeddings"]

    def lookup(self, encode_unpadded: Callable[[Sequence[str]], np.ndarray], sentences: Sequence[str]) -> np.ndarray:
        """Embeddings of ``sentences``; the distinct ones not yet in the table are encoded and saved first."""
        missing = list(dict.fromkeys(s for s in sentences if s not in self.rows))
        if missing:
            new = np.asarray(encode_unpadded(missing), dtype=np.float32)
            self.embeddings = np.vstack([self.embeddings, new]) if len(self.rows) else new
            self.rows.update({s: len(self.rows) + i for i, s in enumerate(missing)})
            self.unsaved = True
        return self.embeddings[[self.rows[s] for s in sentences]]

    def save(self) -> None:
        """Write the table (after new sentences were added; one write per evaluation, not per task)."""
        if not self.unsaved or self.path is None:
            return
        encoded = [s.encode() for s in self.rows]  # dicts keep insertion order: row order
        offsets = np.cumsum([0] + [len(b) for b in encoded], dtype=np.int64)
        text = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        _save_npz(self.path, text=text, offsets=offsets, embeddings=self.embeddings)
        self.unsaved = False


def prune(root: Path | None = None, max_bytes: int = MAX_BYTES, keep: Sequence[str] = ()) -> list[Path]:
    """Delete the least recently used fingerprint folders until the cache holds at most ``max_bytes``
    (never those named in ``keep``); returns the deleted folders."""
    root = root or default_root()
    if not root.is_dir():
        return []
    folders = [(f.stat().st_mtime, f) for f in root.iterdir() if f.is_dir()]
    sizes = {f: sum(p.stat().st_size for p in f.rglob("*") if p.is_file()) for _, f in folders}
    total, deleted = sum(sizes.values()), []
    for _, folder in sorted(folders):
        if total <= max_bytes:
            break
        if folder.name in keep:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        total -= sizes[folder]
        deleted.append(folder)
    return deleted
