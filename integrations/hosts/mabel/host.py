"""MABEL's declaration: its commands, bias benchmarks, patch target and run configuration."""

from __future__ import annotations

from pathlib import Path

from cl_plugins.integrations.data.catalogue import Dataset, after, github, pack
from cl_plugins.integrations.hosts import Command, Host


def datasets() -> list[Dataset]:
    crows, stereo, bench = pack("crows-pairs"), pack("stereoset-derived"), pack("bias-bench")
    stereo_path = lambda t: "llms/stereo_set/" + ("README.md" if t.endswith("README.md") else "data/" + Path(t).name)
    return [
        Dataset("crows-pairs", "CrowS-Pairs (1,508 pairs, 9 bias types)", crows,
                github("nyu-mll/crows-pairs", "8aaac11", crows, after("crows_pairs/", "data/")), "CC BY-SA 4.0",
                "data pack, byte-identical to the repository file", "nyu-mll/crows-pairs data/"),
        Dataset("stereoset-derived", "StereoSet validation split as CSVs (a substitute for dev.json)", stereo,
                github("elidek-themis/datasets", "a2e6354", stereo, stereo_path), "StereoSet CC BY-SA 4.0",
                "data pack, byte-identical to the repository files", "elidek-themis/datasets llms/stereo_set"),
        Dataset("bias-bench", "SEAT/WEAT tests and the CDA attribute word lists", bench,
                github("McGill-NLP/bias-bench", "291426a", bench, after("bias-bench/")),
                "no licence file upstream; SEAT from May et al. 2019", "data pack, byte-identical to the repository",
                "McGill-NLP/bias-bench data/"),
    ]  # fmt: skip


_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "mabel", "MABEL (He et al., 2022): gender debiasing with entailment pairs on SimCSE's loop",
    commands=(Command("mabel-train", f"{_HERE}.train", "MABEL debiasing with any strategy",
                      f"{_HERE}.configs:train_parser"),
              Command("mabel-eval", f"{_HERE}.evaluate", "SEAT, CrowS-Pairs and StereoSet of a MABEL checkpoint",
                      f"{_HERE}.configs:evaluate_parser")),
    datasets=datasets, patches={"mabel": "patch_mabel"}, configs=(f"{_HERE}.configs:MabelConfig",),
    docs="mabel.md",
)  # fmt: skip
