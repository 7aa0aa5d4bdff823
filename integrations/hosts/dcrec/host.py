"""DCRec's declaration: its commands, recommendation data, patch target and run configuration."""

from __future__ import annotations

from cl_plugins.integrations.data.catalogue import Dataset, Source, after, github, pack
from cl_plugins.integrations.data.downloads import Expected
from cl_plugins.integrations.hosts import Command, Host


def datasets() -> list[Dataset]:
    grouplens = "GroupLens terms: research use only, no redistribution, no commercial use"
    ml100k, beauty = pack("movielens-100k"), pack("dcrec-beauty")
    return [
        Dataset("movielens-100k", "MovieLens 100K", ml100k,
                (Source("https://files.grouplens.org/datasets/movielens/ml-100k.zip", "recsys/movielens/ml-100k",
                        "archive", anchor="u.data"),),
                grouplens, "data pack (the original files; the zip's hash is not published)", "grouplens.org"),
        Dataset("movielens-1m", "MovieLens 1M", {"recsys/movielens/ml-1m/ratings.dat": Expected()},
                (Source("https://files.grouplens.org/datasets/movielens/ml-1m.zip", "recsys/movielens/ml-1m",
                        "archive", anchor="ratings.dat"),),
                grouplens, "unknown: not published, not in the pack", "grouplens.org"),
        Dataset("dcrec-beauty", "DCRec's Amazon Beauty session split", beauty,
                github("HKUDS/DCRec", "2338233", beauty, after("recsys/dcrec/")), "MIT (repository); Amazon terms",
                "data pack, byte-identical to the repository", "committed in the DCRec repository"),
    ]  # fmt: skip



_HERE = __name__.rpartition(".")[0]

HOST = Host(
    "dcrec", "DCRec (Yang et al., 2023): debiased contrastive sequential recommendation",
    commands=(Command("dcrec-train", f"{_HERE}.train", "DCRec sequential recommendation with any strategy",
                      f"{_HERE}.configs:DCRecConfig"),
              Command("dcrec-eval", f"{_HERE}.evaluate", "ranking metrics of a saved DCRec run",
                      f"{_HERE}.configs:evaluate_parser")),
    datasets=datasets, patches={"dcrec": "patch_dcrec"}, configs=(f"{_HERE}.configs:DCRecConfig",),
    docs="dcrec.md",
)  # fmt: skip
