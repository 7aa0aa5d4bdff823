"""SentEval harness: time of each stage (encoding, each task's probes), cold and warm cache, and its numbers
against the original SentEval's.

    python benchmarks/senteval_speed.py                           # all-MiniLM-L6-v2, avg, fasttest, every task
    python benchmarks/senteval_speed.py --mode test --runs senteval/cold senteval/warm --reuse

Each run is a fresh process (model loading included in its wall time) evaluating STS + transfer on the full
data: ``<batching>/cold`` starts from an empty embedding cache, ``<batching>/warm`` repeats it on the cache the
cold run left (a second evaluation of the same model), ``senteval/unstacked`` is the warm run with every probe
problem trained alone instead of stacked (the probes' speed-up, measured side by side). Transfer numbers are
compared with the original SentEval's on the same model and data (``senteval_original_minilm.json``).
Rows are written as runs finish; ``--reuse`` keeps finished runs of the same settings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results_store import load, machine, merge  # noqa: E402

RUNS = ["senteval/cold", "senteval/warm", "senteval/unstacked", "distinct/cold", "distinct/warm"]
ORIGINAL = Path(__file__).with_name("senteval_original_minilm.json")
TRANSFER = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]


def one(spec: dict) -> dict:
    """One evaluation in this process (run through a subprocess by :func:`main`)."""
    start = time.perf_counter()
    import torch

    from cl_plugins.integrations.evaluation.senteval import classifier, engine
    from cl_plugins.integrations.modalities.text.encoder import offline_encoder_dir
    from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder

    if spec["unstacked"]:
        stacked = classifier.fit_problems
        classifier.fit_problems = lambda x, y, ps, c, cfg: [stacked(x, y, [p], c, cfg)[0] for p in ps]
    encoder = load_encoder(spec["model"] or offline_encoder_dir(), spec["pooler"])
    timings: dict[str, dict[str, float]] = {}
    results = engine.evaluate(encoder, spec["tasks"], spec["mode"], batching=spec["batching"],
                              cache=Path(spec["cache"]), timings=timings, progress=False)  # fmt: skip
    return {"results": results, "timings": timings, "wall": time.perf_counter() - start,
            "threads": torch.get_num_threads()}  # fmt: skip


def run(name: str, args: argparse.Namespace, cache: Path) -> dict:
    batching, kind = name.split("/")
    if kind == "cold" and cache.exists():
        import shutil

        shutil.rmtree(cache)
    spec = dict(model=args.model, pooler=args.pooler, tasks=args.tasks, mode=args.mode, batching=batching,
                cache=str(cache), unstacked=kind == "unstacked")  # fmt: skip
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run {name} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"run": name, "mode": args.mode, "model": args.model or "all-MiniLM-L6-v2", "pooler": args.pooler,
            "tasks": args.tasks, **out}  # fmt: skip


def render(results: dict) -> str:
    lines = [
        "# SentEval harness: stage times and parity",
        "",
        f"Written by `benchmarks/senteval_speed.py` ({results['machine']}). Every run is a fresh process evaluating "
        "STS12-16, STS-B, SICK-R and the seven transfer tasks on the full data; seconds of wall time.",
    ]
    for mode in ("fasttest", "test"):
        rows = {r["run"]: r for r in results["rows"] if r["mode"] == mode}
        if rows:
            lines += ["", f"## `{mode}` probes", "", *_time_table(rows), "", *_parity_table(rows, mode)]
    return "\n".join(lines) + "\n"


def _time_table(rows: dict[str, dict]) -> list[str]:
    names = [n for n in RUNS if n in rows]
    tasks = list(next(iter(rows.values()))["timings"]) if rows else []
    head = " | ".join(f"{n} encode | {n} probes" for n in names)
    lines = [f"| task | {head} |", "|---|" + "---:|---:|" * len(names)]
    for task in tasks:
        cells = [f"{rows[n]['timings'][task]['encode']:.1f} | {rows[n]['timings'][task]['probe']:.1f}" for n in names]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    sums = [
        f"{sum(t['encode'] for t in rows[n]['timings'].values()):.0f} | "
        f"{sum(t['probe'] for t in rows[n]['timings'].values()):.0f}"
        for n in names
    ]
    lines.append("| **sum** | " + " | ".join(sums) + " |")
    lines += ["", "| run | mode | wall (s, with model loading) |", "|---|---|---:|"]
    lines += [f"| {n} | {rows[n]['mode']} | {rows[n]['wall']:.0f} |" for n in names]
    return lines


def _parity_table(rows: dict[str, dict], mode: str) -> list[str]:
    original = json.loads(ORIGINAL.read_text())
    reference = original.get(mode, {})
    names = [n for n in RUNS if n in rows and n.endswith("cold")]
    lines = ["Transfer test accuracy / dev accuracy (MRPC: / F1)"
             + (f", against the original SentEval ({original['source']}):" if reference else ":"), "",
             "| task | original | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]  # fmt: skip
    for task in TRANSFER:
        if any(task not in rows[n]["results"] for n in names):
            continue
        ref = _cell(reference[task]) if task in reference else "not measured"
        lines.append(f"| {task} | {ref} | " + " | ".join(_cell(rows[n]["results"][task]) for n in names) + " |")
    sts = [t for t in next(iter(rows.values()))["results"] if not any(t == x for x in TRANSFER)] if rows else []
    if len(names) > 1:
        lines += ["", "STS ('all' / test Spearman):", "", "| task | " + " | ".join(names) + " |",
                  "|---|" + "---:|" * len(names)]  # fmt: skip
        for task in sts:
            vals = [rows[n]["results"][task] for n in names]
            lines.append(f"| {task} | " + " | ".join(f"{v.get('all', v.get('test')):.2f}" for v in vals) + " |")
    return lines


def _cell(r: dict) -> str:
    return f"{r['acc']:.2f} / {r['devacc']:.2f}" + (f" / {r['f1']:.2f}" if "f1" in r else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2 from the offline package)")
    parser.add_argument("--pooler", default="avg", help="pooler (default: avg, MiniLM's own)")
    parser.add_argument("--mode", default="fasttest", choices=["fasttest", "test"], help="transfer probes")
    parser.add_argument("--tasks", default="full", help="sts, transfer, full or task names (default: full)")
    parser.add_argument("--runs", nargs="+", default=RUNS, choices=RUNS, help="runs, in this order")
    parser.add_argument("--cache", type=Path, help="embedding cache root (default: a fresh temporary folder)")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "results" / "senteval_speed.json")
    parser.add_argument("--reuse", action="store_true", help="keep finished runs of the same settings")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return
    results = load(args.output) if args.reuse else {"rows": [], "machine": machine()}
    cache_root = args.cache or Path(tempfile.mkdtemp(prefix="senteval-cache-"))
    key = lambda r: (r["run"], r["mode"], r["model"], r["pooler"], r["tasks"])  # noqa: E731
    done = {key(r) for r in results["rows"]}
    cold_here = set()
    for name in args.runs:
        probe = {"run": name, "mode": args.mode, "model": args.model or "all-MiniLM-L6-v2", "pooler": args.pooler,
                 "tasks": args.tasks}  # fmt: skip
        if key(probe) in done:
            print(f"{name}: reused")
            continue
        batching, kind = name.split("/")
        if kind != "cold" and batching not in cold_here and args.cache is None:
            raise SystemExit(f"{name} needs the cache of {batching}/cold: run both, or pass --cache of an earlier run")
        if kind == "cold":
            cold_here.add(batching)
        row = run(name, args, cache_root / batching)
        print(f"{name}: {row['wall']:.0f} s")
        merge(results, [row], key, args.output, args.output.with_suffix(".md"), render)


if __name__ == "__main__":
    main()
