"""SimCSE training data: one sentence per line (unsupervised) or ``sent0,sent1,hard_neg`` CSV.

Read through Hugging Face ``datasets`` (:func:`load_rows`: memory-mapped Arrow, never a Python list of the
file) and tokenised once with ``map`` into a cache keyed by the rows, the tokenizer and the arguments
(:func:`tokenize_rows`). The collator only pads: unsupervised batches repeat each sentence (dropout makes
the two views differ), supervised ones stack (premise, entailment, contradiction). Optional MLM inputs
follow SimCSE / BERT (15% of tokens: 80% [MASK], 10% random, 10% kept).
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.data.paths import cache_dir


def check_text_file(path: str | Path, flag: str = "--train_file") -> None:
    """A readable UTF-8 text file, or a one-line error that names ``flag`` and the first bad byte."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{flag} {path}: no such file")
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end < len(head) or len(head) < (1 << 20):  # not just a character cut by the 1 MiB window
            raise ValueError(f"{flag} {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); pass a text "
                             "file, one sentence per line or a sent0,sent1[,hard_neg] CSV") from None  # fmt: skip


#: raise when the tokenised rows change for the same file, tokenizer and arguments: their cache then rebuilds
TOKENS_VERSION = 1


def load_rows(path: str | Path, limit: int | None = None) -> Any:
    """``--train_file`` as a Hugging Face ``datasets.Dataset`` with one column ``texts``, memory-mapped from the
    Arrow cache under ``$CL_PLUGINS_CACHE/hf_datasets``: one sentence per row for a text file (stripped, empty
    lines skipped), or the CSV's ``sent0, sent1[, hard_neg]``; the first ``limit`` rows when given."""
    from datasets import Features, Value, load_dataset

    check_text_file(path)
    cache = str(cache_dir("hf_datasets"))
    if str(path).endswith(".csv"):
        header, columns = _csv_columns(path)
        # every column text, as csv.reader gives it: no NaN for an empty cell, no number parsing
        as_text = Features({name: Value("string") for name in header})
        raw = load_dataset("csv", data_files=str(path), split="train", cache_dir=cache, keep_default_na=False,
                           na_filter=False, features=as_text)  # fmt: skip
        rows = raw.map(lambda b: {"texts": [list(t) for t in zip(*(b[c] for c in columns))]}, batched=True,
                       remove_columns=raw.column_names, desc="rows")  # fmt: skip
    else:
        raw = load_dataset("text", data_files=str(path), split="train", cache_dir=cache)
        rows = raw.map(lambda b: {"texts": [[t.strip()] for t in b["text"]]}, batched=True, remove_columns=["text"],
                       desc="rows").filter(lambda b: [bool(t[0]) for t in b["texts"]], batched=True)  # fmt: skip
    if len(rows) == 0:
        raise ValueError(f"{path} holds no sentences")
    return rows if limit is None else rows.select(range(min(limit, len(rows))))


def _csv_columns(path: str | Path) -> tuple[list[str], list[str]]:
    """(the header, the columns read: ``sent0, sent1[, hard_neg]``), or a one-line error naming the header."""
    with open(path, encoding="utf-8", newline="") as f:
        fields = next(csv.reader(f), [])
    if "sent0" not in fields or "sent1" not in fields:
        raise ValueError(f"{path} must have columns sent0, sent1 (and optionally hard_neg); found {fields}")
    return fields, ["sent0", "sent1"] + (["hard_neg"] if "hard_neg" in fields else [])


def rows_of(items: list[tuple[str, ...]] | list[str]) -> Any:
    """In-memory items (MABEL's built pairs, tests) as the same ``texts`` rows."""
    from datasets import Dataset as HFDataset

    return HFDataset.from_dict({"texts": [[x] if isinstance(x, str) else list(x) for x in items]})


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """What a tokenizer does to text: its full definition (fast tokenizers) or its class and vocabulary."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(f"{type(tokenizer).__name__}:{text}".encode()).hexdigest()[:16]


def tokenize_rows(rows: Any, tokenizer: Any, max_length: int) -> Any:
    """Each row's sentences tokenised once (truncated to ``max_length``), with ``datasets.map``; for rows read
    from a file the result is cached, keyed by the rows, the tokenizer and ``max_length``."""
    key = hashlib.sha256(f"{rows._fingerprint}:{tokenizer_fingerprint(tokenizer)}:{max_length}:v{TOKENS_VERSION}"
                         .encode()).hexdigest()[:20]  # fmt: skip
    on_disk = bool(rows.cache_files)
    target = str(cache_dir("simcse_tokens") / f"{key}.arrow") if on_disk else None

    def encode(batch: dict[str, list]) -> dict[str, list]:
        texts = batch["texts"]
        enc = tokenizer([t for row in texts for t in row], truncation=True, max_length=max_length)
        out: dict[str, list] = {k: [] for k in enc}
        start = 0
        for row in texts:
            for k in enc:
                out[k].append(enc[k][start : start + len(row)])
            start += len(row)
        return out

    return rows.map(encode, batched=True, remove_columns=["texts"], new_fingerprint=key, cache_file_name=target,
                    load_from_cache_file=on_disk, desc="tokenising")  # fmt: skip


class TokenizedDataset(Dataset):
    """``(index, row)`` of tokenised rows: each field (``input_ids``, ...) one list per sentence of the row."""

    def __init__(self, rows: Any) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[int, dict[str, list[list[int]]]]:
        return i, self.rows[i]


def mask_tokens(
    input_ids: torch.Tensor, tokenizer: Any, probability: float = 0.15, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's MLM corruption; labels are -100 except at the selected positions."""
    labels = input_ids.clone()
    special = torch.tensor(
        [tokenizer.get_special_tokens_mask(ids, already_has_special_tokens=True) for ids in input_ids.tolist()],
        dtype=torch.bool,
    ) | (input_ids == tokenizer.pad_token_id)
    chosen = torch.bernoulli(torch.full(labels.shape, probability), generator=generator).bool() & ~special
    labels[~chosen] = -100
    inputs = input_ids.clone()
    masked = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & chosen
    inputs[masked] = tokenizer.mask_token_id
    rand = torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool() & chosen & ~masked
    inputs[rand] = torch.randint(len(tokenizer), labels.shape, generator=generator)[rand]
    return inputs, labels


@strict_flags
@dataclass
class Collator:
    """Pad ``(index, tokenised row)`` pairs into [B, S, L] tensors (S = 2 unsupervised, 2-4 otherwise).

    MLM masks come from a generator seeded by (seed, epoch, the batch's item indices), not from
    the global RNG: data loaders prefetch batches, so global draws here would shift the dropout
    stream and make a resumed run differ from an uninterrupted one.
    """

    tokenizer: Any
    max_length: int = 32
    do_mlm: bool = False
    mlm_probability: float = 0.15
    seed: int = 0
    epoch: int = 0

    def _generator(self, indices: list[int]) -> torch.Generator:
        key = f"{self.seed}:{self.epoch}:{','.join(map(str, indices))}".encode()
        return torch.Generator().manual_seed(int(hashlib.sha256(key).hexdigest()[:15], 16))

    def __call__(self, batch: list[tuple[int, dict[str, list[list[int]]]]]) -> dict[str, torch.Tensor]:
        indices = [i for i, _ in batch]
        rows = [row for _, row in batch]
        sentences = len(rows[0]["input_ids"])
        views = 2 if sentences == 1 else sentences
        flat = [{k: ids[0 if sentences == 1 else v] for k, ids in row.items()} for row in rows for v in range(views)]
        enc = self.tokenizer.pad(flat, padding=True, return_tensors="pt")
        batch = {k: v.view(len(rows), views, -1) for k, v in enc.items()}
        if self.do_mlm:
            generator = self._generator(indices)
            inputs, labels = mask_tokens(enc["input_ids"], self.tokenizer, self.mlm_probability, generator)
            batch["mlm_input_ids"] = inputs.view(len(rows), views, -1)
            batch["mlm_labels"] = labels.view(len(rows), views, -1)
        return batch


class EpochSampler(torch.utils.data.Sampler[int]):
    """A seeded shuffle that depends only on (seed, epoch): resuming reproduces the order."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):  # type: ignore[no-untyped-def]
        g = torch.Generator().manual_seed(self.seed * 10_007 + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n
