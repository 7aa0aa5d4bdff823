"""The SentEval harness's declaration: the downstream data SimCSE's evaluation reads."""

from __future__ import annotations

from cl_plugins.integrations.common.data_registry import SENTEVAL, SIMCSE_HF, Dataset, Source, pack
from cl_plugins.integrations.common.hosts import Host


def datasets() -> list[Dataset]:
    files = pack("senteval")
    return [Dataset(
        "senteval", "SentEval STS12-16, STS-B, SICK, MR, CR, SUBJ, MPQA, SST, TREC, MRPC (SimCSE's copy)", files,
        (Source(f"{SIMCSE_HF}/senteval.tar", SENTEVAL, "archive", anchor="STS/STSBenchmark/sts-test.csv"),),
        "per task (SemEval STS, SICK CC BY-NC-SA 3.0, MRPC's licence, ...); research use",
        "data pack: leotmc/simcse@e0b62fc (a committed extraction of senteval.tar) and robertoviegas/SimCSE@a0d98a5 "
        "(English transfer tasks); the archive's own hash is not published",
        "SimCSE's SentEval/data/downstream/download_dataset.sh",
    )]  # fmt: skip


HOST = Host("senteval", "SimCSE's STS and transfer protocol without SentEval (used by simcse, mabel)",
            datasets=datasets, docs="simcse.md")
