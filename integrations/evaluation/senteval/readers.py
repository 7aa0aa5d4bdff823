"""Readers for SentEval's downstream data layout (``.../SentEval/data/downstream``).

Each reader returns plain Python lists; sentences are SentEval's pre-tokenised text, which
SimCSE's batcher joins with spaces and re-tokenises.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from cl_plugins.integrations.data.catalogue import data_path

DOWNSTREAM = "sentence/SentEval/data/downstream"
HINT = "SentEval's data/downstream/get_transfer_data.bash or SimCSE's senteval.tar"

STS_SUBSETS = {
    "STS12": ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    "STS13": ["FNWN", "headlines", "OnWN"],  # SMT is licensed separately and absent
    "STS14": ["deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"],
    "STS15": ["answers-forums", "answers-students", "belief", "headlines", "images"],
    "STS16": ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}


@dataclass
class Pairs:
    a: list[str]
    b: list[str]
    scores: list[float]


def downstream(task_dir: str, root: str | Path | None = None) -> Path:
    return data_path(f"{DOWNSTREAM}/{task_dir}", hint=HINT, root=root)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def read_sts_year(year: str, root: str | Path | None = None) -> dict[str, Pairs]:
    """STS12-16: ``STS.input.<subset>.txt`` (tab-separated pair) and ``STS.gs.<subset>.txt``.

    Pairs without a gold score (empty line) are dropped, as SentEval does.
    """
    folder = downstream(f"STS/{year}-en-test", root)
    out = {}
    for subset in STS_SUBSETS[year]:
        inputs = _lines(folder / f"STS.input.{subset}.txt")
        gold = _lines(folder / f"STS.gs.{subset}.txt")
        if len(inputs) != len(gold):
            raise ValueError(f"{year}/{subset}: {len(inputs)} input lines but {len(gold)} gold lines")
        a, b, s = [], [], []
        for pair, score in zip(inputs, gold):
            if not score.strip():
                continue
            left, right = pair.split("\t")[:2]
            a.append(left)
            b.append(right)
            s.append(float(score))
        out[subset] = Pairs(a, b, s)
    return out


def read_stsb(split: str, root: str | Path | None = None) -> Pairs:
    """STS-B ``sts-{train,dev,test}.csv``: tab-separated, score in column 5, sentences in 6 and 7."""
    path = downstream("STS/STSBenchmark", root) / f"sts-{split}.csv"
    a, b, s = [], [], []
    for line in _lines(path):
        cols = line.split("\t")
        if len(cols) < 7:
            continue
        s.append(float(cols[4]))
        a.append(cols[5])
        b.append(cols[6])
    return Pairs(a, b, s)


def read_sick(split: str, root: str | Path | None = None) -> Pairs:
    """SICK ``SICK_{train,trial,test_annotated}.txt``: header, then id, A, B, relatedness, entailment."""
    name = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}[split]
    rows = _lines(downstream("SICK", root) / name)[1:]
    a, b, s = [], [], []
    for line in rows:
        cols = line.split("\t")
        if len(cols) < 4:
            continue
        a.append(cols[1])
        b.append(cols[2])
        s.append(float(cols[3]))
    return Pairs(a, b, s)


def read_sick_entailment_pairs(split: str = "train", root: str | Path | None = None) -> list[tuple[str, str]]:
    """(premise, hypothesis) pairs of SICK labelled ENTAILMENT."""
    name = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}[split]
    rows = _lines(downstream("SICK", root) / name)[1:]
    return [(c[1], c[2]) for c in (r.split("\t") for r in rows) if len(c) >= 5 and c[4] == "ENTAILMENT"]


def read_binary(task: str, root: str | Path | None = None) -> tuple[list[str], list[int]]:
    """MR, CR, SUBJ, MPQA: two files, one sentence per line; label 1 for the first listed."""
    files = {
        "MR": ("rt-polarity.pos", "rt-polarity.neg"),
        "CR": ("custrev.pos", "custrev.neg"),
        "SUBJ": ("subj.objective", "subj.subjective"),
        "MPQA": ("mpqa.pos", "mpqa.neg"),
    }[task]
    folder = downstream(task, root)
    sents, labels = [], []
    for label, name in zip((1, 0), files):
        # SentEval reads these as latin-1 and keeps empty lines as (empty) sentences
        for line in (folder / name).read_bytes().decode("latin-1").splitlines():
            sents.append(" ".join(line.split()))
            labels.append(label)
    return sents, labels


def read_sst2(root: str | Path | None = None) -> dict[str, tuple[list[str], list[int]]]:
    """SST binary ``sentiment-{train,dev,test}``: sentence, tab, label."""
    folder = downstream("SST/binary", root)
    out = {}
    for split in ("train", "dev", "test"):
        sents, labels = [], []
        for line in _lines(folder / f"sentiment-{split}"):
            if not line.strip():
                continue
            text, label = line.rsplit("\t", 1)
            sents.append(text.strip())
            labels.append(int(label))
        out[split] = (sents, labels)
    return out


TREC_CLASSES = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]


def read_trec(root: str | Path | None = None) -> dict[str, tuple[list[str], list[int]]]:
    """TREC ``train_5500.label`` / ``TREC_10.label``: ``COARSE:fine question``."""
    folder = downstream("TREC", root)
    out = {}
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        raw = (folder / name).read_bytes().decode("latin-1")
        sents, labels = [], []
        for line in raw.splitlines():
            if not line.strip():
                continue
            target, text = line.strip().split(" ", 1)
            sents.append(text.strip())
            labels.append(TREC_CLASSES.index(target.split(":")[0]))
        out[split] = (sents, labels)
    return out


def read_mrpc(root: str | Path | None = None) -> dict[str, tuple[list[str], list[str], list[int]]]:
    """MRPC ``msr_paraphrase_{train,test}.txt``: header; Quality, id, id, String1, String2."""
    folder = downstream("MRPC", root)
    out = {}
    for split in ("train", "test"):
        text = (folder / f"msr_paraphrase_{split}.txt").read_text(encoding="utf-8-sig", errors="replace")
        reader = csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        a, b, y = [], [], []
        for row in reader:
            if len(row) < 5:
                continue
            y.append(int(row[0]))
            a.append(row[3])
            b.append(row[4])
        out[split] = (a, b, y)
    return out
