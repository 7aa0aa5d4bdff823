"""The long CPU runs behind the claims table: one row per (experiment, strategy setting, seed), written as it
finishes, so a run spread over days resumes where it stopped (``--reuse``: rows of the same settings are kept).

    python benchmarks/claims_runs.py grace-pygcl --datasets CiteSeer --seeds 0-19          # the τ sweep + free
    python benchmarks/claims_runs.py graphcl-tu --datasets MUTAG PROTEINS --seeds 0-4 --reuse

Experiments:

* ``grace-pygcl``: GRACE with PyGCL's ``examples/GRACE.py`` recipe, the temperature-free paper's Table 3
  protocol (``integrations.graph.grace --recipe pygcl``): ``infonce`` at τ 0.1 / 0.25 / 0.5 / 1 and
  ``temperature_free``, one training run and one PyGCL split per seed; F1-micro / F1-macro.
* ``graphcl-tu``: GraphCL unsupervised TU (GIN 3×32, 20 epochs, batch 128, lr 0.01, ``random4``, decoupled),
  10-fold SVM accuracy: ``infonce`` at τ 0.2, ``macl`` at MACL's GraphCL setting (τ0 0.2, α 0.5, A0 0) and
  ``dystress`` at its host mapping of τ 0.2.
* ``dcrec-ml100k``: DCRec on MovieLens-100K to convergence (validation early stopping, patience 20, the recipe's
  300-epoch cap), ``infonce`` at ``cl_temp`` 0.8 against ``temperature_free``, ``macl``, ``dystress``; HR@10 and
  NDCG@10 of both ranking protocols (full ranking, 100 popularity-sampled negatives).
* ``vision-lt``: SimCLR on long-tailed CIFAR-10 (ρ = 100, from 500 images per class: 1,236 images) and on a
  balanced subset of the same size (124 per class: 1,240 images, so that only the imbalance differs; the full
  500-per-class subset would cost 4× per epoch), CPU-sized: ResNet-18 of width 16, 100 epochs, batch 128, SGD
  0.06; kNN (k 200) and linear-probe top-1 on the full test set: ``infonce`` at τ 0.1 against ``macl``,
  ``dystress``, ``cosine_schedule``, ``temperature_free``.
* ``vision-lt-200``: the long tail at 200 epochs, one seed: does a strategy's difference persist with twice the
  training? (No budget affordable here converges: ``infonce`` gains 3.7 kNN points from 100 to 200 epochs and
  3.1 from 200 to 400.)
* ``vision-lt-epochs``: the convergence check: ``infonce`` on the long tail at 400 epochs, to compare with its
  200-epoch row (``benchmarks/claims.py`` states each doubling's gain and which budget, if any, converges).

Rows go to ``--json`` (default ``docs/results/claims_runs.json``); ``benchmarks/claims.py`` turns them into
the claims table and the strategy × modality matrix.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results_store import machine  # noqa: E402
from integrations.common import atomic  # noqa: E402

#: (strategy, its arguments) per experiment: the settings a row is keyed by
SETTINGS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "grace-pygcl": [("infonce", {"tau": t}) for t in (0.1, 0.25, 0.5, 1.0)] + [("temperature_free", {})],
    "graphcl-tu": [("infonce", {}), ("macl", {"tau0": 0.2, "alpha": 0.5, "a0": 0.0}), ("dystress", {})],
    "dcrec-ml100k": [(s, {}) for s in ("infonce", "temperature_free", "macl", "dystress")],
    "vision-lt": [(s, {}) for s in ("infonce", "macl", "dystress", "cosine_schedule", "temperature_free")],
    "vision-lt-200": [(s, {}) for s in ("infonce", "macl", "dystress", "cosine_schedule", "temperature_free")],
    "vision-lt-epochs": [("infonce", {"epochs": 400})],
}
DATASETS = {"grace-pygcl": ["CiteSeer", "Cora"], "graphcl-tu": ["MUTAG", "PROTEINS", "NCI1", "IMDB-BINARY"],
            "dcrec-ml100k": ["ml-100k"], "vision-lt": ["cifar10_lt", "cifar10"],
            "vision-lt-200": ["cifar10_lt"], "vision-lt-epochs": ["cifar10_lt"]}  # fmt: skip
#: the CPU-sized vision setting (stated in the claims table)
VISION = dict(subset_per_class=500, width=16, epochs=100, batch_size=128, lr=0.06, eval_every=0, linear_epochs=100)
#: the balanced control has as many images as the long tail drawn from VISION's subset (1,236 -> 124 per class)
BALANCED_PER_CLASS = 124
#: the training budget of each vision experiment of the matrix (``vision-lt-epochs`` names its own per setting)
VISION_EPOCHS = {"vision-lt": VISION["epochs"], "vision-lt-200": 200}


def grace_pygcl(dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path) -> dict[str, Any]:
    from integrations.graph import grace

    params = dict(params)
    tau = params.pop("tau", -1.0)
    cfg = grace.GraceConfig(dataset=dataset, recipe="pygcl", loss=strategy, loss_args=params, tau=tau, seeds=[seed],
                            output_dir=str(workdir), log_with="none", overwrite=True, progress=False)  # fmt: skip
    (run,) = grace.run(cfg)["runs"]
    (scores,) = run["eval"]["pygcl"]
    return {"micro_f1": 100 * scores["micro_f1"], "macro_f1": 100 * scores["macro_f1"],
            "epochs": grace.settings(cfg)["epochs"], "final_loss": run["final_loss"]}  # fmt: skip


def graphcl_tu(dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path) -> dict[str, Any]:
    from integrations.graph import graphcl_tu as tu

    cfg = tu.TUConfig(dataset=dataset, loss=strategy, loss_args=params, seeds=[seed], output_dir=str(workdir),
                      log_with="none", overwrite=True, progress=False)  # fmt: skip
    (run,) = tu.run(cfg)["runs"]
    return {"accuracy": 100 * run["accuracy"], "epochs": cfg.epochs}


def dcrec_ml100k(dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path) -> dict[str, Any]:
    from integrations.dcrec import train as dcrec

    cfg = dcrec.DCRecConfig(dataset=dataset, loss=strategy, loss_args=params, seeds=[seed], output_dir=str(workdir),
                            log_with="none", progress=False)  # fmt: skip
    (run,) = dcrec.run(cfg)["runs"]
    metrics = {f"{protocol}/{k}": 100 * v for protocol, m in run["test"].items() for k, v in m.items()}
    return {**metrics, "best_epoch": run["best_epoch"], "epochs_run": run["epochs_run"]}


def vision_lt(dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path,
              epochs: int = VISION["epochs"]) -> dict[str, Any]:  # fmt: skip
    from integrations.vision import train as vision

    params = dict(params)
    setting = {**VISION, "epochs": params.pop("epochs", epochs)}  # the convergence check's longer run
    if dataset == "cifar10":
        setting["subset_per_class"] = BALANCED_PER_CLASS
    cfg = vision.VisionConfig(dataset=dataset, loss=strategy, loss_args=params, seed=seed, output_dir=str(workdir),
                              log_with="none", progress=False, checkpoint_every=10, **setting)  # fmt: skip
    result = vision.run(cfg)
    return {"knn_top1": 100 * result["knn_top1"], "linear_top1": 100 * result["linear_top1"], **setting}


EXPERIMENTS: dict[str, Callable[..., dict[str, Any]]] = {
    "grace-pygcl": grace_pygcl,
    "graphcl-tu": graphcl_tu,
    "dcrec-ml100k": dcrec_ml100k,
    "vision-lt": vision_lt,
    "vision-lt-200": functools.partial(vision_lt, epochs=VISION_EPOCHS["vision-lt-200"]),
    "vision-lt-epochs": vision_lt,
}


def row_key(row: dict[str, Any]) -> tuple:
    return (row["experiment"], row["dataset"], row["strategy"], json.dumps(row["params"], sort_keys=True), row["seed"])


def seeds_arg(text: str) -> list[int]:
    """``0-19`` or ``0 3 5`` style seed lists."""
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(text)]


def planned(experiment: str, datasets: list[str], seeds: list[int], strategies: list[str] | None) -> Iterator[dict]:
    """Seed-major order, so that every setting has its first seeds before any has its last (paired early)."""
    for seed in seeds:
        for dataset in datasets:
            for strategy, params in SETTINGS[experiment]:
                if strategies is None or strategy in strategies:
                    yield {"experiment": experiment, "dataset": dataset, "strategy": strategy, "params": params,
                           "seed": seed}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS), help="which experiment")
    parser.add_argument("--datasets", nargs="+", help="datasets (default: all of the experiment's)")
    parser.add_argument("--seeds", nargs="+", default=["0-4"], help="seeds, e.g. 0-19 or 0 1 2 (default: 0-4)")
    parser.add_argument("--strategies", nargs="+", help="only these strategies (default: all settings)")
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "results" / "claims_runs.json")
    parser.add_argument("--reuse", action="store_true", help="keep rows of the same settings and seed")
    args = parser.parse_args()
    seeds = [s for text in args.seeds for s in seeds_arg(text)]
    results = json.loads(args.json.read_text()) if args.json.exists() else {"rows": []}
    done = {row_key(r) for r in results["rows"]} if args.reuse else set()
    for plan in planned(args.experiment, args.datasets or DATASETS[args.experiment], seeds, args.strategies):
        if row_key(plan) in done:
            continue
        start = time.time()
        with tempfile.TemporaryDirectory(prefix="claims-") as workdir:
            scores = EXPERIMENTS[args.experiment](plan["dataset"], plan["strategy"], plan["params"], plan["seed"],
                                                  Path(workdir) / "run")  # fmt: skip
        row = {**plan, **scores, "seconds": time.time() - start, "machine": machine()}
        results["rows"] = [r for r in results["rows"] if row_key(r) != row_key(row)] + [row]
        atomic.write_json(args.json, results)
        print(json.dumps({k: v for k, v in row.items() if k != "machine"}), flush=True)


if __name__ == "__main__":
    main()
