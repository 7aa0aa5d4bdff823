"""Counterfactual data augmentation: swap gendered words for their counterparts, in both directions.

The word pairs are bias-bench's ``bias_attribute_words.json`` (``gender``: 57 pairs, the list MABEL
and the CDA baselines use), under the data root at ``bias/bias-bench/data/``. Every pair maps both
ways; when a word has several partners (``guy`` → ``gal`` / ``girl``, ``her`` → ``him`` / ``his``)
the first pair in the list wins, except ``her`` → ``his`` (possessive *her* is the more frequent
use; set ``overrides`` to change it).

Whole words only (``manage`` stays, ``chairman's`` becomes ``chairwoman's``), case kept
(``He`` → ``She``, ``HE`` → ``SHE``), ``mr.`` / ``mrs.`` / ``ms.`` / ``ma'am`` as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cl_plugins.integrations.data.catalogue import data_path

WORDS_FILE = "bias/bias-bench/data/bias_attribute_words.json"
DEFAULT_OVERRIDES = {"her": "his"}
_TOKEN = re.compile(r"(?i)(?<![\w'])(?:ma'am|mrs?\.|ms\.|[a-z]+)")


def load_word_pairs(bias_type: str = "gender", root: str | Path | None = None) -> list[tuple[str, str]]:
    path = data_path(WORDS_FILE, hint="McGill-NLP/bias-bench data/", root=root)
    words = json.loads(path.read_text())
    if bias_type not in words:
        raise ValueError(f"bias_type must be one of {sorted(words)}, got {bias_type!r}")
    pairs = [tuple(p) for p in words[bias_type]]
    if any(len(p) != 2 for p in pairs):
        raise ValueError(f"{bias_type} has groups of more than two words; counterfactual swapping needs pairs")
    return pairs  # type: ignore[return-value]


def swap_table(pairs: list[tuple[str, str]], overrides: dict[str, str] | None = None) -> dict[str, str]:
    """``word -> counterpart`` in both directions, lower case; the first pair wins, then ``overrides``."""
    table: dict[str, str] = {}
    for a, b in pairs:
        table.setdefault(a.lower(), b.lower())
        table.setdefault(b.lower(), a.lower())
    table.update({k.lower(): v.lower() for k, v in (DEFAULT_OVERRIDES if overrides is None else overrides).items()})
    return table


def _match_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[0].isupper():
        return word[0].upper() + word[1:]
    return word


def swap_gender(sentence: str, table: dict[str, str]) -> str:
    """``sentence`` with every word in ``table`` replaced by its counterpart (case kept)."""

    def replace(match: re.Match[str]) -> str:
        word = match.group(0)
        swapped = table.get(word.lower())
        return word if swapped is None else _match_case(swapped, word)

    return _TOKEN.sub(replace, sentence)


def has_swappable(sentence: str, table: dict[str, str]) -> bool:
    return any(m.group(0).lower() in table for m in _TOKEN.finditer(sentence))
