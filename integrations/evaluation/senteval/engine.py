"""Run STS and transfer tasks for one encoder and print SimCSE's table."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.evaluation.senteval.classifier import ProbeConfig
from cl_plugins.integrations.evaluation.senteval.embedders import Embedder
from cl_plugins.integrations.evaluation.senteval.sts import eval_relatedness, eval_sts_year
from cl_plugins.integrations.evaluation.senteval.transfer import eval_transfer

STS_TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
TRANSFER_TASKS = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
Encoder = Callable[[Sequence[str]], np.ndarray]


def expand_tasks(spec: str | Sequence[str]) -> list[str]:
    """``"sts"``, ``"transfer"``, ``"full"``, task names, or a comma-separated mix."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    tasks: list[str] = []
    for item in (i.strip() for i in items):
        group = {"sts": STS_TASKS, "transfer": TRANSFER_TASKS, "full": STS_TASKS + TRANSFER_TASKS}.get(item.lower())
        for t in group or [item]:
            if t not in STS_TASKS + TRANSFER_TASKS:
                raise ValueError(
                    f"unknown task {t!r}; valid: sts, transfer, full, {', '.join(STS_TASKS + TRANSFER_TASKS)}"
                )
            if t not in tasks:
                tasks.append(t)
    return tasks


@strict_flags
def evaluate(
    encoder: Encoder,
    tasks: str | Sequence[str] = "sts",
    mode: str = "test",
    root=None,  # type: ignore[no-untyped-def]
    transfer_limit: int | None = None,
    progress: bool = True,
    batching: str = "auto",
    cache: bool | Path = True,
    timings: dict[str, dict[str, float]] | None = None,
) -> dict[str, dict[str, float]]:
    """Evaluate ``encoder`` (list of sentences -> [n, d] array) on ``tasks``.

    Args:
        mode: ``"test"`` (10-fold, Adam), ``"fasttest"`` (5-fold, RMSprop), as SimCSE's evaluation.py;
            ``"dev"`` reports STS-B / SICK-R dev only for the relatedness tasks.
        transfer_limit: subsample transfer training sets (smoke tests only; marked ``subsampled``).
        batching: ``"senteval"`` (SentEval's batches, its numbers exactly), ``"distinct"`` (each distinct
            sentence once, unpadded) or ``"auto"`` (distinct when the encoder can; see
            :class:`.embedders.Embedder`) (default: ``"auto"``).
        cache: embeddings on disk for an encoder with a ``fingerprint`` (``True``: ``$CL_PLUGINS_CACHE``, a
            folder, or ``False``) (default: ``True``).
        timings: if given, filled with each task's ``encode`` and ``probe`` seconds.
    """
    cfg = ProbeConfig.for_mode(mode)
    embedder = Embedder(encoder, batching, cache)
    results: dict[str, dict[str, float]] = {}
    try:
        for task in tqdm(expand_tasks(tasks), desc="SentEval", disable=not progress):
            start, encoded = time.perf_counter(), embedder.seconds
            results[task] = _one_task(embedder, task, cfg, mode, root, transfer_limit)
            if timings is not None:
                spent, encode = time.perf_counter() - start, embedder.seconds - encoded
                timings[task] = {"encode": encode, "probe": spent - encode}
    finally:
        embedder.close()
    return results


def _one_task(embedder: Embedder, task: str, cfg: ProbeConfig, mode: str, root, limit: int | None) -> dict:  # type: ignore[no-untyped-def]
    if task.startswith("STS1"):
        return eval_sts_year(embedder.sts, task, root)
    if task in ("STSBenchmark", "SICKRelatedness"):
        return eval_relatedness(embedder.sts, task, ("dev",) if mode == "dev" else ("dev", "test"), root)
    return eval_transfer(embedder.transfer, task, cfg, root, limit)


def summary(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """SimCSE's headline numbers: STS ('all' / test Spearman) and transfer test accuracy, with averages."""
    row: dict[str, float] = {}
    for task in STS_TASKS:
        if task in results:
            r = results[task]
            row[task] = r["all"] if "all" in r else r.get("test", r.get("dev", float("nan")))
    for task in TRANSFER_TASKS:
        if task in results:
            row[task] = results[task]["acc"]
    sts = [row[t] for t in STS_TASKS if t in row]
    transfer = [row[t] for t in TRANSFER_TASKS if t in row]
    if len(sts) == len(STS_TASKS):
        row["STS avg"] = float(np.mean(sts))
    if len(transfer) == len(TRANSFER_TASKS):
        row["transfer avg"] = float(np.mean(transfer))
    return row


def format_table(rows: dict[str, dict[str, float]]) -> str:
    """Markdown table, one row per model/setting, SimCSE's column order."""
    summaries = {name: summary(res) for name, res in rows.items()}
    columns = [
        c
        for c in STS_TASKS + ["STS avg"] + TRANSFER_TASKS + ["transfer avg"]
        if any(c in s for s in summaries.values())
    ]
    short = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
    lines = ["| model | " + " | ".join(short.get(c, c) for c in columns) + " |", "|---|" + "---:|" * len(columns)]
    for name, s in summaries.items():
        lines.append(f"| {name} | " + " | ".join(f"{s[c]:.2f}" if c in s else "" for c in columns) + " |")
    return "\n".join(lines)
