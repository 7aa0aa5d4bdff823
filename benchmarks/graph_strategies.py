"""Graph strategies benchmark: GraphCL TU accuracy, GRACE node F1, a small molecule transfer run.

    python benchmarks/graph_strategies.py                          # every part, the settings below
    python benchmarks/graph_strategies.py --parts grace --strategies infonce temperature_free
    python benchmarks/graph_strategies.py --tu_seeds 0 1 2 3 4 --tu_datasets NCI1   # one part, longer

Parts (each strategy at the host's settings; see ``cl_plugins/host.py`` for how the
host temperature becomes each strategy's parameter):

* ``tu``: GraphCL unsupervised TU (GIN 3x32, 20 epochs, batch 128, lr 0.01, ``random4`` ratio 0.2,
  τ 0.2, decoupled), 10-fold SVM accuracy, mean ± std over ``--tu_seeds``;
* ``grace``: GRACE on Cora / CiteSeer with GRACE's config (200 epochs), F1-micro / F1-macro of
  logistic regression on the random 10/10/80 split (20 seeds) and the public split;
* ``molecule``: GraphCL pre-training of the Hu et al. GIN on ``--mol_pretrain_molecules`` ZINC
  SMILES for ``--mol_pretrain_epochs`` epochs, fine-tuning on BBBP and BACE for ``--mol_finetune_epochs``
  epochs over ``--mol_runseeds``, plus a no-pre-training row.

Results accumulate in ``--json`` (a part re-run replaces its rows) and the markdown table is
rewritten from it, with the papers' own numbers next to ours.
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

STRATEGIES = ["infonce", "macl", "dystress", "dual_temperature", "temperature_free", "amcl"]
TU_DATASETS = ["MUTAG", "PROTEINS", "NCI1", "IMDB-BINARY"]
# the papers' numbers (../shared/reference/strategies.md §8b; GRACE paper Table 2 for GRACE)
PAPER_TU = {  # GraphCL -> GraphCL + MACL (MACL paper, SVM accuracy)
    "MUTAG": (86.80, 89.04),
    "PROTEINS": (74.39, 74.47),
    "NCI1": (77.87, 78.41),
    "IMDB-BINARY": (71.14, 71.42),
}
PAPER_GRACE = {
    "Cora": "GRACE paper: F1-micro 83.3 ± 0.4",
    "CiteSeer": "GRACE paper: F1-micro 72.1 ± 0.5; "
    "temperature-free paper (20 seeds): τ 0.5 67.33 / 60.47, τ 1 67.05 / 60.03, free 67.95 / 60.56",
}
PAPER_MOL = "MACL paper (10 seeds, 100-epoch fine-tuning after full GraphCL pre-training): BBBP 69.68 → 67.98"


def part_tu(args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    from cl_plugins.integrations.hosts.graph import graphcl_tu

    rows = []
    for dataset in args.tu_datasets:
        for strategy in args.strategies:
            t0 = time.time()
            cfg = graphcl_tu.TUConfig(
                dataset=dataset,
                loss=strategy,
                seeds=args.tu_seeds,
                epochs=args.tu_epochs,
                output_dir=str(out / "tu" / dataset / strategy),
                log_with="none",
                overwrite=True,  # a re-measure replaces the run folder; the rows live in --json
                progress=False,
            )
            res = graphcl_tu.run(cfg)
            rows.append(
                dict(
                    part="tu",
                    dataset=dataset,
                    strategy=strategy,
                    seeds=args.tu_seeds,
                    epochs=args.tu_epochs,
                    accuracy=[100 * r["accuracy"] for r in res["runs"]],
                    seconds=time.time() - t0,
                )
            )
            print(dataset, strategy, f"{res['accuracy_mean']:.2f} ± {res['accuracy_std']:.2f}", flush=True)
    return rows


def part_grace(args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    from cl_plugins.integrations.hosts.graph import grace

    rows = []
    for dataset in args.grace_datasets:
        for strategy in args.strategies:
            t0 = time.time()
            cfg = grace.GraceConfig(
                dataset=dataset,
                loss=strategy,
                seeds=args.grace_seeds,
                epochs=args.grace_epochs,
                eval_seeds=20,
                output_dir=str(out / "grace" / dataset / strategy),
                log_with="none",
                overwrite=True,  # a re-measure replaces the run folder; the rows live in --json
                progress=False,
            )
            res = grace.run(cfg)
            row = dict(
                part="grace",
                dataset=dataset,
                strategy=strategy,
                seeds=args.grace_seeds,
                epochs=res["settings"]["epochs"],
                seconds=time.time() - t0,
            )
            row.update({k: v for k, v in res.items() if k.endswith(("_mean", "_std"))})
            # per (training seed, split seed): what a paired comparison on the same splits needs
            row["random_micro_f1"] = [100 * e["micro_f1"] for r in res["runs"] for e in r["eval"].get("random", [])]
            rows.append(row)
            print(
                dataset, strategy, f"{row['random_micro_f1_mean']:.2f} / {row['public_micro_f1_mean']:.2f}", flush=True
            )
    return rows


def part_molecule(args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    from cl_plugins.integrations.hosts.graph import graphcl_transfer

    rows = []
    for strategy in [*args.strategies, "none"]:
        t0 = time.time()
        cfg = graphcl_transfer.TransferConfig(
            loss="infonce" if strategy == "none" else strategy,
            pretrain=strategy != "none",
            pretrain_molecules=args.mol_pretrain_molecules,
            pretrain_epochs=args.mol_pretrain_epochs,
            datasets=args.mol_datasets,
            runseeds=args.mol_runseeds,
            finetune_epochs=args.mol_finetune_epochs,
            output_dir=str(out / "molecule" / strategy),
            log_with="none",
            overwrite=True,  # a re-measure replaces the run folder; the rows live in --json
            progress=False,
        )
        res = graphcl_transfer.run(cfg)
        row = dict(
            part="molecule",
            strategy=strategy,
            seconds=time.time() - t0,
            settings=dict(
                molecules=args.mol_pretrain_molecules,
                pretrain_epochs=args.mol_pretrain_epochs,
                finetune_epochs=args.mol_finetune_epochs,
                runseeds=args.mol_runseeds,
            ),
        )
        for name, entry in res["datasets"].items():
            for key in ("test_auc_last", "test_auc_best_val"):
                row[f"{name}_{key}"] = (entry[f"{key}_mean"], entry[f"{key}_std"])
        rows.append(row)
        print("molecule", strategy, {k: v for k, v in row.items() if k.endswith(("last", "val"))}, flush=True)
    return rows


def _ms(values: list[float]) -> str:
    from cl_plugins.integrations.runs.results import fmt_mean_std

    return fmt_mean_std(values)


def _paired_section(tu: list[dict[str, Any]], grace_rows: list[dict[str, Any]]) -> list[str]:
    """Each strategy minus infonce on the same seeds (TU) or the same 20 random splits (GRACE)."""
    out = []
    for part, rows, values in (("GraphCL TU accuracy", tu, "accuracy"), ("GRACE random F1-micro", grace_rows,
                                                                          "random_micro_f1")):  # fmt: skip
        base = {r["dataset"]: r for r in rows if r["strategy"] == "infonce" and values in r}
        for r in rows:
            b = base.get(r["dataset"])
            if r["strategy"] == "infonce" or b is None or values not in r or b["seeds"] != r["seeds"]:
                continue
            diff = results_store.paired_difference(r[values], b[values])
            out.append(f"| {part} | {r['dataset']} | {r['strategy']} | {diff} |")
    if not out:
        return []
    head = ["## Paired against infonce (same seeds / splits)", "", "| part | dataset | strategy | Δ vs infonce |",
            "|---|---|---|---:|"]  # fmt: skip
    return head + out + [""]


def render(results: dict[str, Any]) -> str:
    rows = results["rows"]
    lines = ["# Graph strategies", "", f"Generated by `benchmarks/graph_strategies.py` ({results['machine']}).", ""]
    tu = [r for r in rows if r["part"] == "tu"]
    if tu:
        lines += [
            "## GraphCL, unsupervised TU graph classification (SVM accuracy, %)",
            "",
            "GIN 3 × 32, `random4` augmentation ratio 0.2, batch 128, lr 0.01, τ 0.2 (decoupled); "
            "10-fold SVM with a C grid; mean ± std over seeds. Paper columns: GraphCL → GraphCL + MACL "
            "as the MACL paper reports them.",
            "",
        ]
        datasets = list(dict.fromkeys(r["dataset"] for r in tu))
        lines.append("| strategy | " + " | ".join(datasets) + " |")
        lines.append("|---|" + "---:|" * len(datasets))
        for strategy in dict.fromkeys(r["strategy"] for r in tu):
            cells = []
            for d in datasets:
                r = next((r for r in tu if r["dataset"] == d and r["strategy"] == strategy), None)
                cells.append("" if r is None else f"{_ms(r['accuracy'])} ({len(r['seeds'])} seeds, {r['epochs']} ep)")
            lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
        lines.append(
            "| *paper: GraphCL → +MACL* | "
            + " | ".join(f"{PAPER_TU[d][0]:.2f} → {PAPER_TU[d][1]:.2f}" if d in PAPER_TU else "" for d in datasets)
            + " |"
        )
        lines.append("")
    grace_rows = [r for r in rows if r["part"] == "grace"]
    if grace_rows:
        lines += [
            "## GRACE, node classification (F1, %)",
            "",
            "GRACE's config.yaml per dataset (Cora τ 0.4, CiteSeer τ 0.9, 200 epochs); logistic regression "
            "on frozen, L2-normalised embeddings; random split 10/10/80 (20 split seeds, C chosen on "
            "validation) and the public Planetoid split (20 classifier seeds).",
            "",
            "| dataset | strategy | random F1-micro | random F1-macro | public F1-micro | public F1-macro | time |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for r in grace_rows:
            cells = [
                f"{r[f'{s}_{k}_mean']:.2f} ± {r[f'{s}_{k}_std']:.2f}"
                for s in ("random", "public")
                for k in ("micro_f1", "macro_f1")
            ]
            lines.append(f"| {r['dataset']} | {r['strategy']} | " + " | ".join(cells) + f" | {r['seconds']:.0f} s |")
        lines.append("")
        for d in dict.fromkeys(r["dataset"] for r in grace_rows):
            if d in PAPER_GRACE:
                lines.append(f"- {d}: {PAPER_GRACE[d]}.")
        lines.append("")
    lines += _paired_section(tu, grace_rows)
    mol = [r for r in rows if r["part"] == "molecule"]
    if mol:
        s = mol[0]["settings"]
        lines += [
            "## GraphCL transfer learning on molecules (test ROC-AUC, %; short run)",
            "",
            f"Pre-training on the first {s['molecules']} ZINC SMILES of the data pack for {s['pretrain_epochs']} "
            f"epochs (GraphCL: 2M molecules, 100 epochs), fine-tuning {s['finetune_epochs']} epochs (GraphCL: 100), "
            f"scaffold split, run seeds {s['runseeds']}. `none`: no pre-training.",
            "",
        ]
        keys = [k for k in mol[0] if k.endswith(("_test_auc_last", "_test_auc_best_val"))]
        lines.append(
            "| strategy | "
            + " | ".join(k.replace("_test_auc_", " ").replace("best_val", "at best val") for k in keys)
            + " |"
        )
        lines.append("|---|" + "---:|" * len(keys))
        for r in mol:
            lines.append(f"| {r['strategy']} | " + " | ".join(f"{r[k][0]:.2f} ± {r[k][1]:.2f}" for k in keys) + " |")
        lines += ["", f"- {PAPER_MOL}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["tu", "grace", "molecule"], help="tu, grace and / or molecule")
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES, help="strategies to compare")
    parser.add_argument("--tu_datasets", nargs="+", default=TU_DATASETS, help="TU datasets")
    parser.add_argument("--tu_seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="GraphCL TU seeds")
    parser.add_argument("--tu_epochs", type=int, default=20, help="GraphCL TU epochs (GraphCL: 20)")
    parser.add_argument("--grace_datasets", nargs="+", default=["Cora", "CiteSeer"], help="Planetoid datasets")
    parser.add_argument("--grace_seeds", type=int, nargs="+", default=[0], help="GRACE training seeds")
    parser.add_argument("--grace_epochs", type=int, default=-1, help="GRACE epochs (-1: GRACE's config)")
    parser.add_argument("--mol_datasets", nargs="+", default=["bbbp", "bace"], help="MoleculeNet sets")
    parser.add_argument("--mol_pretrain_molecules", type=int, default=4000, help="ZINC SMILES used for pre-training")
    parser.add_argument("--mol_pretrain_epochs", type=int, default=2, help="pre-training epochs")
    parser.add_argument("--mol_finetune_epochs", type=int, default=10, help="fine-tuning epochs")
    parser.add_argument("--mol_runseeds", type=int, nargs="+", default=[0, 1, 2], help="fine-tuning seeds")
    parser.add_argument("--workdir", type=Path, default=Path("outputs/graph_strategies"), help="run folders")
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "results" / "graph.json", help="accumulated rows")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "results" / "graph.md", help="markdown table")
    args = parser.parse_args()

    results = results_store.load(args.json)
    parts = {"tu": part_tu, "grace": part_grace, "molecule": part_molecule}
    for name in args.parts:
        new = parts[name](args, args.workdir)
        key = lambda r: (r["part"], r.get("dataset"), r["strategy"])  # noqa: E731
        results_store.merge(results, new, key, args.json, args.output, render)
    print(render(results))


if __name__ == "__main__":
    main()
