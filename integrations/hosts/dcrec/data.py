"""Readers for sequential-recommendation data: RecBole atomic files, DCRec's prefix splits, MovieLens.

* RecBole atomic files (``.inter``): tab-separated, header ``name:type`` (``token``,
  ``token_seq`` = space-separated tokens, ``float``); :func:`read_atomic`.
* DCRec's pre-split files ``recsys/dcrec/dataset/<name>/<name>.{train,test}.inter`` under the
  data root, rows ``session_id, item_id_list, item_id`` (a prefix and its next item);
  :func:`load_dcrec_split`.
* MovieLens raw ratings: ``u.data`` (ML-100K, tab-separated) and ``ratings.dat`` (ML-1M / 10M,
  ``::``-separated); :func:`read_movielens`, then :func:`leave_one_out` (per user in time order:
  last item test, second-to-last validation, the rest training).

Items are mapped to contiguous ids from 1 (:class:`ItemVocab`); 0 is padding, as in RecBole.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cl_plugins.integrations.data.catalogue import data_path

DCREC_SUBDIR = "recsys/dcrec/dataset"


def read_atomic(path: str | Path) -> dict[str, list]:
    """Columns of a RecBole atomic file by field name (types: token -> str, token_seq -> list, float)."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        names, kinds = [], []
        for item in header:
            if ":" not in item:
                raise ValueError(f"{path}: header field {item!r} is not name:type (a RecBole atomic file?)")
            name, kind = item.rsplit(":", 1)
            names.append(name)
            kinds.append(kind)
        columns: dict[str, list] = {name: [] for name in names}
        for lineno, line in enumerate(f, start=2):
            values = line.rstrip("\n").split("\t")
            if len(values) != len(names):
                raise ValueError(f"{path}:{lineno}: {len(values)} fields, the header has {len(names)}")
            for name, kind, value in zip(names, kinds, values, strict=True):
                if kind.endswith("_seq"):
                    columns[name].append(value.split())
                elif kind == "float":
                    columns[name].append(float(value))
                else:
                    columns[name].append(value)
    return columns


@dataclass
class ItemVocab:
    """Item tokens -> ids 1..n (0 is padding)."""

    ids: dict[str, int] = field(default_factory=dict)

    def __call__(self, token: str) -> int:
        if token not in self.ids:
            self.ids[token] = len(self.ids) + 1
        return self.ids[token]

    def __len__(self) -> int:
        return len(self.ids) + 1  # with padding


@dataclass
class PrefixData:
    """Rows of (history, next item) as item ids; ``users`` names the sequence each row comes from."""

    users: list[str]
    histories: list[list[int]]
    targets: list[int]


def _prefix_rows(columns: dict[str, list], vocab: ItemVocab, path: Path) -> PrefixData:
    for name in ("item_id_list", "item_id"):
        if name not in columns:
            raise ValueError(f"{path} has no {name} column (expected session_id, item_id_list, item_id)")
    users = columns.get("session_id", [str(i) for i in range(len(columns["item_id"]))])
    histories = [[vocab(t) for t in seq] for seq in columns["item_id_list"]]
    return PrefixData(list(users), histories, [vocab(t) for t in columns["item_id"]])


#: the largest fraction of training users that may lack a row in the test file (DCRec's sets: none)
MAX_MISSING_USERS = 0.01


def load_dcrec_split(name: str, root: str | Path | None = None) -> tuple[PrefixData, PrefixData, ItemVocab]:
    """DCRec's ``<name>.train.inter`` and ``<name>.test.inter`` with one shared item vocabulary.

    Every training user has a test row in DCRec's sets; users without one are counted and printed, and more
    than :data:`MAX_MISSING_USERS` of them is refused (a test file cut at a line boundary reads without error).
    """
    vocab = ItemVocab()
    splits, paths = [], []
    for split in ("train", "test"):
        relative = Path(DCREC_SUBDIR) / name / f"{name}.{split}.inter"
        paths.append(data_path(relative, hint="the DCRec repository's dataset/ folder", root=root))
        splits.append(_prefix_rows(read_atomic(paths[-1]), vocab, paths[-1]))
    users = set(splits[0].users)
    missing = users - set(splits[1].users)
    if missing:
        message = f"{paths[1]}: {len(missing)} of {len(users)} training users have no test row"
        if len(missing) > MAX_MISSING_USERS * len(users):
            raise ValueError(f"{message} (more than {MAX_MISSING_USERS:.0%}); the file looks cut: fetch it again")
        print(message)
    return splits[0], splits[1], vocab


def read_movielens(path: str | Path) -> list[tuple[str, str, float, int]]:
    """(user, item, rating, timestamp) rows of ``u.data`` (tab) or ``ratings.dat`` (``::``)."""
    path = Path(path)
    sep = "::" if path.name.endswith(".dat") else "\t"
    rows = []
    with open(path, encoding="latin-1") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.strip().split(sep)
            if len(parts) < 4:
                raise ValueError(f"{path}:{lineno}: expected user, item, rating, timestamp separated by {sep!r}")
            rows.append((parts[0], parts[1], float(parts[2]), int(parts[3])))
    return rows


@dataclass
class LeaveOneOut:
    """Per-user splits: ``train`` sequences, and (history, target) rows for validation and test."""

    train: dict[str, list[int]]
    valid: PrefixData
    test: PrefixData
    vocab: ItemVocab


def leave_one_out(rows: list[tuple[str, str, float, int]], min_length: int = 3) -> LeaveOneOut:
    """Sort each user's items by time (ties keep file order); last item test, second-to-last validation.

    Users with fewer than ``min_length`` interactions are dropped (they cannot give all three parts).
    """
    if min_length < 3:
        raise ValueError(f"min_length must be >= 3 (train, validation, test), got {min_length}")
    per_user: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for order, (user, item, _, ts) in enumerate(rows):
        per_user[user].append((ts, order, item))
    vocab = ItemVocab()
    train: dict[str, list[int]] = {}
    valid, test = PrefixData([], [], []), PrefixData([], [], [])
    for user, events in per_user.items():
        if len(events) < min_length:
            continue
        items = [vocab(item) for _, _, item in sorted(events)]
        train[user] = items[:-2]
        valid.users.append(user)
        valid.histories.append(items[:-2])
        valid.targets.append(items[-2])
        test.users.append(user)
        test.histories.append(items[:-1])
        test.targets.append(items[-1])
    return LeaveOneOut(train, valid, test, vocab)
