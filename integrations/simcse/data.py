"""SimCSE training data: one sentence per line (unsupervised) or ``sent0,sent1,hard_neg`` CSV.

The collator tokenises on the fly: unsupervised batches repeat each sentence (dropout makes the
two views differ), supervised ones stack (premise, entailment, contradiction). Optional MLM
inputs follow SimCSE / BERT (15% of tokens: 80% [MASK], 10% random, 10% kept).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset


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


def read_sentences(path: str | Path, limit: int | None = None) -> list[str]:
    """One sentence per line (``wiki1m_for_simcse.txt``); empty lines are skipped."""
    check_text_file(path)
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(line)
                if limit is not None and len(out) >= limit:
                    break
    if not out:
        raise ValueError(f"{path} holds no sentences")
    return out


def read_triples(path: str | Path, limit: int | None = None) -> list[tuple[str, ...]]:
    """``sent0,sent1[,hard_neg]`` CSV with a header (``nli_for_simcse.csv``)."""
    check_text_file(path)
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        if "sent0" not in fields or "sent1" not in fields:
            raise ValueError(f"{path} must have columns sent0, sent1 (and optionally hard_neg); found {fields}")
        cols = ["sent0", "sent1"] + (["hard_neg"] if "hard_neg" in fields else [])
        rows = []
        for row in reader:
            rows.append(tuple(row[c] for c in cols))
            if limit is not None and len(rows) >= limit:
                break
    return rows


class TextDataset(Dataset):
    """Items are tuples of 1 (unsupervised) or 2-3 (supervised) sentences."""

    def __init__(self, items: list[tuple[str, ...]] | list[str]) -> None:
        self.items = [(x,) if isinstance(x, str) else tuple(x) for x in items]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[int, tuple[str, ...]]:
        return i, self.items[i]


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


@dataclass
class Collator:
    """Tokenise ``(index, item)`` pairs into [B, S, L] tensors (S = 2 unsupervised, 2-3 supervised).

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

    def __call__(self, batch: list[tuple[int, tuple[str, ...]]]) -> dict[str, torch.Tensor]:
        indices = [i for i, _ in batch]
        items = [item for _, item in batch]
        views = 2 if len(items[0]) == 1 else len(items[0])
        flat = [item[0] if len(item) == 1 else item[k] for item in items for k in range(views)]
        enc = self.tokenizer(flat, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        batch = {k: v.view(len(items), views, -1) for k, v in enc.items()}
        if self.do_mlm:
            generator = self._generator(indices)
            inputs, labels = mask_tokens(enc["input_ids"], self.tokenizer, self.mlm_probability, generator)
            batch["mlm_input_ids"] = inputs.view(len(items), views, -1)
            batch["mlm_labels"] = labels.view(len(items), views, -1)
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
