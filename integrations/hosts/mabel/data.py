"""MABEL's training items: (premise, hypothesis, gender-swapped premise, gender-swapped hypothesis).

Sources:

* MABEL's ``entailment_data.csv`` (columns ``orig_sent0, orig_sent1, aug_sent0, aug_sent1``): used as is;
* any CSV of entailment pairs with columns ``sent0, sent1`` (e.g. SimCSE's NLI file): augmented here;
* offline default: the ENTAILMENT pairs of SICK train (SentEval data). Nothing MABEL is evaluated
  on (StereoSet, CrowS-Pairs, SEAT) is trained on.

As MABEL, only pairs with a gendered word in the premise or the hypothesis are kept (augmenting
the others would give a copy of the pair).
"""

from __future__ import annotations

import csv
from pathlib import Path

from cl_plugins.integrations.hosts.mabel.counterfactual import has_swappable, swap_gender

Item = tuple[str, str, str, str]


def augment_pairs(pairs: list[tuple[str, str]], table: dict[str, str]) -> list[Item]:
    """(s0, s1, swap(s0), swap(s1)) for every pair with something to swap."""
    return [
        (a, b, swap_gender(a, table), swap_gender(b, table))
        for a, b in pairs
        if has_swappable(a, table) or has_swappable(b, table)
    ]


def read_items(path: str | Path, table: dict[str, str]) -> list[Item]:
    """MABEL's format as is, or ``sent0, sent1`` pairs augmented with ``table``."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        rows = list(reader)
    mabel = ("orig_sent0", "orig_sent1", "aug_sent0", "aug_sent1")
    if all(c in fields for c in mabel):
        return [tuple(r[c] for c in mabel) for r in rows]  # type: ignore[misc]
    if "sent0" in fields and "sent1" in fields:
        return augment_pairs([(r["sent0"], r["sent1"]) for r in rows], table)
    raise ValueError(f"{path} needs columns {', '.join(mabel)} (MABEL's file) or sent0, sent1; found {fields}")


def sick_items(table: dict[str, str], root: str | Path | None = None) -> list[Item]:
    from cl_plugins.integrations.evaluation.senteval.readers import read_sick_entailment_pairs

    return augment_pairs(read_sick_entailment_pairs("train", root), table)
