"""From per-user item sequences to DCRec's training rows, evaluation rows and graphs.

A user's full sequence ``x_1 … x_n`` ends with the test target. Two protocols:

* ``selection="validation"`` (default, honest): training uses ``x_1 … x_{n-2}`` (every prefix
  predicts its next item), the validation row is ``x_1 … x_{n-2} → x_{n-1}`` and the test row
  ``x_1 … x_{n-1} → x_n``; the epoch is chosen on validation, test is reported once.
* ``selection="test"`` (DCRec's default, behind an explicit flag): training uses
  ``x_1 … x_{n-1}`` (DCRec's train file plus all its prefixes) and the epoch is chosen on the
  test rows themselves. Every output of such a run is labelled ``test-selected``.

Graphs follow DCRec's ``run_DCRec.py``: the training graphs come from the histories of each
user's last training row (the training sequence without its final target), an evaluation
phase's graphs from that phase's histories. Histories keep their last ``max_length`` items.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from cl_plugins.integrations.hosts.dcrec.configs import SELECTIONS
from cl_plugins.integrations.hosts.dcrec.data import (
    DCREC_SUBDIR,
    LeaveOneOut,
    PrefixData,
    leave_one_out,
    load_dcrec_split,
    read_movielens,
)
from cl_plugins.integrations.hosts.dcrec.graphs import similarity_graph, transition_graph
from cl_plugins.integrations.hosts.dcrec.model import DCRecGraphs

MOVIELENS_FILES = {"ml-100k": "recsys/movielens/ml-100k/u.data", "ml-1m": "recsys/movielens/ml-1m/ratings.dat"}


@dataclass
class UserSequences:
    """Per-user item sequences (ids 1..num_items-1; 0 is padding), the last item the test target."""

    users: list[str]
    sequences: list[list[int]]
    num_items: int


def sequences_from_dcrec(train: PrefixData, test: PrefixData, num_items: int) -> UserSequences:
    """Full sequences from DCRec's pre-split files (test history + target); checks the train file agrees."""
    train_rows = dict(zip(train.users, zip(train.histories, train.targets, strict=True), strict=True))
    sequences = []
    for user, history, target in zip(test.users, test.histories, test.targets, strict=True):
        row = train_rows.get(user)
        if row is not None and row[0] + [row[1]] != history:
            raise ValueError(
                f"user {user!r}: the train row is not the test history's prefix; this reader expects DCRec's "
                "construction (train = history[:-1] -> history[-1], test = history -> next item)"
            )
        sequences.append(history + [target])
    return UserSequences(list(test.users), sequences, num_items)


def sequences_from_leave_one_out(loo: LeaveOneOut) -> UserSequences:
    seqs = [h + [t] for h, t in zip(loo.test.histories, loo.test.targets, strict=True)]
    return UserSequences(list(loo.test.users), seqs, len(loo.vocab))


def source_files(dataset: str, root: str | None = None) -> list[Path]:
    """The raw files :func:`load_sequences` reads for ``dataset`` (what its cache is keyed by)."""
    from cl_plugins.integrations.data.catalogue import data_path

    if dataset in MOVIELENS_FILES:
        return [data_path(MOVIELENS_FILES[dataset], hint="https://grouplens.org/datasets/movielens/", root=root)]
    relative = Path(DCREC_SUBDIR) / dataset
    return [data_path(relative / f"{dataset}.{s}.inter", hint="the DCRec repository's dataset/ folder", root=root)
            for s in ("train", "test")]  # fmt: skip


def load_sequences(dataset: str, root: str | None = None) -> UserSequences:
    """``ml-100k`` / ``ml-1m`` from the raw MovieLens files, anything else as a DCRec split name."""
    if dataset in MOVIELENS_FILES:
        from cl_plugins.integrations.data.catalogue import data_path

        path = data_path(MOVIELENS_FILES[dataset], hint="https://grouplens.org/datasets/movielens/", root=root)
        return sequences_from_leave_one_out(leave_one_out(read_movielens(path)))
    train, test, vocab = load_dcrec_split(dataset, root=root)
    return sequences_from_dcrec(train, test, len(vocab))


@dataclass
class Rows:
    """Padded rows. Shapes: item_seq [R, L] (right-padded), seq_len [R], target [R], user [R]."""

    item_seq: torch.Tensor
    seq_len: torch.Tensor
    target: torch.Tensor
    user: torch.Tensor

    def __len__(self) -> int:
        return int(self.target.numel())

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.item_seq, self.seq_len, self.target, self.user


def pad_rows(histories: list[list[int]], targets: list[int], users: list[int], max_length: int) -> Rows:
    item_seq = torch.zeros(len(histories), max_length, dtype=torch.long)
    lengths = []
    for i, history in enumerate(histories):
        kept = history[-max_length:]
        item_seq[i, : len(kept)] = torch.tensor(kept, dtype=torch.long)
        lengths.append(len(kept))
    return Rows(item_seq, torch.tensor(lengths, dtype=torch.long), torch.tensor(targets), torch.tensor(users))


@dataclass
class DCRecSplits:
    """Everything a run needs: training rows and graphs, evaluation rows and graphs, popularity."""

    train: Rows
    valid: Rows
    test: Rows
    train_graphs: DCRecGraphs
    valid_graphs: DCRecGraphs
    test_graphs: DCRecGraphs
    popularity: torch.Tensor  # [num_items] training interactions per item (pop100 negatives)
    num_items: int
    selection: str

    @property
    def label(self) -> str:
        return "test-selected" if self.selection == "test" else "validation-selected"


def build_splits(
    data: UserSequences, *, selection: str = "validation", max_length: int = 50, k: int = 4
) -> DCRecSplits:
    """Rows and graphs of ``data`` under ``selection`` (see the module docstring)."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    cut = 2 if selection == "validation" else 1
    min_len = cut + 1
    short = [u for u, s in zip(data.users, data.sequences, strict=True) if len(s) < min_len]
    if short:
        raise ValueError(f"{len(short)} users have fewer than {min_len} items (e.g. {short[0]!r}); drop them first")
    train_seqs = [s[:-cut] for s in data.sequences]
    histories, targets, users = [], [], []
    for u, seq in enumerate(train_seqs):
        for end in range(1, len(seq)):
            histories.append(seq[:end])
            targets.append(seq[end])
            users.append(u)
    if not targets:
        raise ValueError("no training rows: every user's training sequence has a single item")
    train = pad_rows(histories, targets, users, max_length)

    def eval_rows(drop: int) -> tuple[Rows, list[list[int]]]:
        hist = [s[: len(s) - drop] for s in data.sequences]
        tgt = [s[len(s) - drop] for s in data.sequences]
        return pad_rows(hist, tgt, list(range(len(hist))), max_length), [h[-max_length:] for h in hist]

    test, test_hist = eval_rows(1)
    valid, valid_hist = eval_rows(2) if selection == "validation" else (test, test_hist)

    def graphs(sequences: list[list[int]], with_users: bool = False) -> DCRecGraphs:
        adj, user_edges = transition_graph(sequences, data.num_items)
        return DCRecGraphs(adj, similarity_graph(sequences, data.num_items, k), user_edges if with_users else None)

    train_graph_seqs = [s[:-1][-max_length:] for s in train_seqs]
    popularity = torch.bincount(torch.tensor([i for s in train_seqs for i in s]), minlength=data.num_items)
    test_graphs = graphs(test_hist)
    return DCRecSplits(
        train=train,
        valid=valid,
        test=test,
        train_graphs=graphs(train_graph_seqs, with_users=True),
        valid_graphs=graphs(valid_hist) if selection == "validation" else test_graphs,
        test_graphs=test_graphs,
        popularity=popularity,
        num_items=data.num_items,
        selection=selection,
    )
