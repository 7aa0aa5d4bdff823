"""MABEL strategies benchmark: StereoSet, CrowS-Pairs and SEAT after debiasing with each strategy.

    python benchmarks/mabel_strategies.py                        # offline default (see docs/results/mabel.md)
    python benchmarks/mabel_strategies.py --model bert-base-uncased --train_file entailment_data.csv --paper \\
        --label "bert-base, MABEL's data"

Rows: the starting model itself, then MABEL training with each of ``--strategies`` (τ 0.05 as the host
temperature; the alignment term at its own constant τ 0.05). The selected model (STS-B dev) is
evaluated on StereoSet intrasentence (validation split, all examples), CrowS-Pairs (gender pairs) and
the six gender SEAT tests. Results accumulate in ``--json``; ``--output`` is rewritten from it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import results_store  # noqa: E402

STRATEGIES = ["infonce", "temperature_free", "macl"]
PAPERS = [
    "Temperature-free paper, MABEL (bert-base, MABEL's data): StereoSet LM 80.6 → 81.0, SS 55.8 → 55.7, "
    "ICAT 71.3 → 71.7; CrowS-Pairs SS 52.5 → 52.3 (τ 0.05 → temperature-free)",
    "MABEL README, mabel-bert-base-uncased: StereoSet gender LM 84.54, SS 56.25, ICAT 73.98 (bias-bench test split)",
]
COLUMNS = [("stereoset_gender_lm", "SS-gender LM"), ("stereoset_gender_ss", "SS-gender SS"),
           ("stereoset_gender_icat", "SS-gender ICAT"), ("stereoset_all_lm", "SS-all LM"),
           ("stereoset_all_ss", "SS-all SS"), ("stereoset_all_icat", "SS-all ICAT"),
           ("crows", "CrowS gender"), ("seat_mean_abs_d", "SEAT mean abs d")]  # fmt: skip


def render(results: dict[str, Any]) -> str:
    lines = [
        "# MABEL: temperature strategies and intrinsic gender bias",
        "",
        f"Machine: {results['machine']}. Produced by `python benchmarks/mabel_strategies.py`.",
        "",
        "StereoSet: intrasentence, the validation split of the data pack (2,106 examples; LM / SS / ICAT macro over",
        "target terms; SS ideal 50). CrowS-Pairs: % of the 262 gender pairs where the more stereotyping sentence",
        "has the higher pseudo-log-likelihood (ideal 50). SEAT: mean |effect size| over sent-weat6/6b/7/7b/8/8b",
        "(ideal 0).",
        "",
    ]
    for label in sorted({r["label"] for r in results["rows"]}):
        rows = [r for r in results["rows"] if r["label"] == label]
        lines += [f"## {label}", "", rows[0]["setting"], "",
                  "| model | " + " | ".join(c for _, c in COLUMNS) + " | STS-B dev |",
                  "|---|" + "---:|" * (len(COLUMNS) + 1)]  # fmt: skip
        for r in rows:
            cells = " | ".join(f"{r['summary'][k]:.2f}" for k, _ in COLUMNS)
            dev = f"{r['stsb_dev']:.2f}" if r.get("stsb_dev") is not None else "–"
            lines.append(f"| {r['name']} | {cells} | {dev} |")
        lines.append("")
    lines += ["## The papers' numbers (bert-base, for scale)", ""] + [f"- {p}" for p in PAPERS] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from cl_plugins.integrations.hosts.mabel.evaluate import evaluate_bias, summary_row
    from cl_plugins.integrations.hosts.mabel.train import MabelConfig, offline_mlm, run

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES)
    parser.add_argument("--model", default="", help="MLM folder (default: MiniLM + fitted MLM head)")
    parser.add_argument("--train_file", default="", help="training pairs (default: SICK train entailment)")
    parser.add_argument("--paper", action="store_true", help="MABEL's recipe (max length 128)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--label", default="offline default: all-MiniLM-L6-v2 + fitted MLM head, SICK train")
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "results" / "mabel.json")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "results" / "mabel.md")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cl_plugins_mabel_bench"))
    args = parser.parse_args(argv)
    results = results_store.load(args.json)
    base = MabelConfig(model=args.model, train_file=args.train_file, paper=args.paper, progress=False)
    model = args.model or str(offline_mlm(base))

    def save(row: dict[str, Any]) -> None:
        results_store.merge(results, [row], lambda r: (r["label"], r["name"]), args.json, args.output, render)
        print(f"{row['name']}: {row['summary']}", flush=True)

    start = evaluate_bias(model)
    setting = (f"Model {Path(model).name}; MABEL recipe {'(paper)' if args.paper else '(max length 64)'}: "
               "batch 32, lr 5e-5, 2 epochs, MLM 0.1, alignment 0.05 at τ 0.05, contrastive host τ 0.05, "
               f"seed {args.seed}; selection on STS-B dev.")  # fmt: skip
    save({"label": args.label, "name": "before training", "setting": setting, "summary": summary_row(start),
          "detail": start})  # fmt: skip
    for strategy in args.strategies:
        config = MabelConfig(model=model, train_file=args.train_file, paper=args.paper, loss=strategy,
                             output_dir=str(args.workdir / strategy), log_with="none", progress=False,
                             seed=args.seed, batch_size=32, learning_rate=5e-5, epochs=2.0,
                             max_seq_length=128 if args.paper else 64, do_mlm=True, eval_steps=125)  # fmt: skip
        t0 = time.time()
        summary = run(config)
        save({"label": args.label, "name": f"MABEL + {strategy}", "setting": setting,
              "summary": summary["bias"]["summary"], "detail": summary["bias"],
              "stsb_dev": summary["best_stsb_dev"], "train_seconds": time.time() - t0,
              "train_items": summary["train_items"], "steps": summary["steps"]})  # fmt: skip


if __name__ == "__main__":
    main()
