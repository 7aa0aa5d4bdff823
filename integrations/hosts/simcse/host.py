"""SimCSE's declaration: its commands, training and evaluation data (SentEval's downstream tasks, which the
harness :mod:`cl_plugins.integrations.evaluation.senteval` reads, also for mabel), patch target and run
configuration."""

from __future__ import annotations

from cl_plugins.integrations.data.catalogue import SENTEVAL, SIMCSE_HF, Dataset, Source, pack
from cl_plugins.integrations.data.downloads import Expected
from cl_plugins.integrations.hosts import Command, Host


def datasets() -> list[Dataset]:
    full = "sentence/simcse/wiki1m_for_simcse.txt"
    head = pack("wiki1m-head")
    return [
        Dataset("wiki1m", "SimCSE's 1M Wikipedia sentences (unsupervised training)", {full: Expected()},
                (Source(f"{SIMCSE_HF}/wiki1m_for_simcse.txt", full),), "Wikipedia text, CC BY-SA",
                "unknown: not published, and the pack holds only the head", "SimCSE's data/download_wiki.sh"),
        Dataset("wiki1m-head", "the first 11,914 lines of wiki1m (the main job's offline default)", head,
                tuple(Source(f"{SIMCSE_HF}/wiki1m_for_simcse.txt", t, "head", expect=e) for t, e in head.items()),
                "Wikipedia text, CC BY-SA", "data pack (a byte prefix of wiki1m_for_simcse.txt)",
                "a range request for the first 1.28 MB of wiki1m_for_simcse.txt"),
        Dataset("nli-for-simcse", "SimCSE's supervised NLI triples", {"sentence/simcse/nli_for_simcse.csv": Expected()},
                (Source(f"{SIMCSE_HF}/nli_for_simcse.csv", "sentence/simcse/nli_for_simcse.csv"),),
                "SNLI CC BY-SA 4.0, MNLI OANC/CC BY-SA", "unknown: not published, not in the pack",
                "SimCSE's data/download_nli.sh"),
        Dataset("senteval", "SentEval STS12-16, STS-B, SICK, MR, CR, SUBJ, MPQA, SST, TREC, MRPC (SimCSE's copy)",
                pack("senteval"),
                (Source(f"{SIMCSE_HF}/senteval.tar", SENTEVAL, "archive", anchor="STS/STSBenchmark/sts-test.csv"),),
                "per task (SemEval STS, SICK CC BY-NC-SA 3.0, MRPC's licence, ...); research use",
                "data pack: leotmc/simcse@e0b62fc (a committed extraction of senteval.tar) and "
                "robertoviegas/SimCSE@a0d98a5 (English transfer tasks); the archive's own hash is not published",
                "SimCSE's SentEval/data/downstream/download_dataset.sh"),
    ]  # fmt: skip



_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "simcse", "SimCSE (Gao et al., 2021): unsupervised and supervised sentence embeddings",
    commands=(Command("simcse-main", f"{_HERE}.train_then_evaluate", "the main job: unsupervised SimCSE + MACL, "
                      "evaluated before/after", f"{_HERE}.configs:train_then_evaluate_parser"),
              Command("simcse-train", f"{_HERE}.train", "SimCSE training with any strategy",
                      f"{_HERE}.configs:train_parser"),
              Command("simcse-eval", f"{_HERE}.evaluate", "SentEval STS / transfer evaluation of a sentence encoder",
                      f"{_HERE}.configs:evaluate_parser")),
    datasets=datasets, patches={"simcse": "patch_simcse"}, configs=(f"{_HERE}.configs:TrainConfig",),
    docs="simcse.md",
)  # fmt: skip
