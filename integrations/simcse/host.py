"""SimCSE's declaration: its commands, training data, patch target and run configuration."""

from __future__ import annotations

from integrations.common.data_registry import SIMCSE_HF, Dataset, Source, pack
from integrations.common.downloads import Expected
from integrations.common.hosts import Command, Host


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



HOST = Host(
    "simcse", "SimCSE (Gao et al., 2021): unsupervised and supervised sentence embeddings",
    commands=(Command("simcse-main", "integrations.simcse.main_job",
                      "the main job: unsupervised SimCSE + MACL, evaluated before/after"),
              Command("simcse-train", "integrations.simcse.train", "SimCSE training with any strategy"),
              Command("simcse-eval", "integrations.simcse.evaluate",
                      "SentEval STS / transfer evaluation of a sentence encoder")),
    datasets=datasets, patches={"simcse": "patch_simcse"}, configs=("integrations.simcse.train:TrainConfig",),
    docs="simcse.md",
)  # fmt: skip
