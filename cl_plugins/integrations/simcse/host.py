"""SimCSE's declaration: its commands, training data, patch target and run configuration."""

from __future__ import annotations

from cl_plugins.integrations.common.data_registry import SIMCSE_HF, Dataset, Source, pack
from cl_plugins.integrations.common.downloads import Expected
from cl_plugins.integrations.common.hosts import Command, Host


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
    ]  # fmt: skip



_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "simcse", "SimCSE (Gao et al., 2021): unsupervised and supervised sentence embeddings",
    commands=(Command("simcse-main", f"{_HERE}.main_job", "the main job: unsupervised SimCSE + MACL, evaluated "
                      "before/after", f"{_HERE}.configs:main_job_parser"),
              Command("simcse-train", f"{_HERE}.train", "SimCSE training with any strategy",
                      f"{_HERE}.configs:train_parser"),
              Command("simcse-eval", f"{_HERE}.evaluate", "SentEval STS / transfer evaluation of a sentence encoder",
                      f"{_HERE}.configs:evaluate_parser")),
    datasets=datasets, patches={"simcse": "patch_simcse"}, configs=(f"{_HERE}.configs:TrainConfig",),
    docs="simcse.md",
)  # fmt: skip
