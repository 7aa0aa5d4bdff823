"""The long CPU runs behind the claims table: one row per (experiment, strategy setting, seed), written as it
finishes, so a run spread over days resumes where it stopped (``--reuse``: rows of the same settings are kept).

    python benchmarks/claims_runs.py grace-pygcl --datasets CiteSeer --seeds 0-19          # the τ sweep + free
    python benchmarks/claims_runs.py graphcl-tu --datasets MUTAG PROTEINS --seeds 0-4 --reuse

Experiments:

* ``grace-pygcl``: GRACE with PyGCL's ``examples/GRACE.py`` recipe, the temperature-free paper's Table 3
  protocol (``cl_plugins.integrations.hosts.graph.grace --recipe pygcl``): ``infonce`` at τ 0.1 / 0.25 / 0.5 / 1 and
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
  ``dystress``, ``cosine_schedule`` (τ 0.1 to 1 as Kukleva et al., with their five oscillations per run: a
  20-epoch period), ``temperature_free``.
* ``vision-lt-200``: the long tail at 200 epochs, one seed: does a strategy's difference persist with twice the
  training? (No budget affordable here converges: ``infonce`` gains 3.7 kNN points from 100 to 200 epochs and
  3.1 from 200 to 400.)
* ``vision-gpu``: GPU rows (run where a GPU is lent): the DySTreSS / MACL CIFAR-10 recipe on all 50,000 images
  (ResNet-18 of width 64 with the CIFAR stem, batch 128, SGD 0.06, kNN k 200 and linear probe on the test set,
  bf16 autocast; similarities and losses stay in float32), shortened to ``VISION_GPU["epochs"]`` epochs: a
  session's device time is 30 minutes, for all five strategies at once (``infonce`` at τ 0.1, ``macl``,
  ``dystress``, ``temperature_free``, ``dual_temperature``), side by side on the GPU:
  ``OMP_NUM_THREADS=3 python benchmarks/claims_runs.py vision-gpu --seeds 1 --parallel 5 --reuse``. On an H200
  the five side by side took 1,020–1,083 s per 30-epoch run each (seeds 0 and 1), final evaluation included (one
  run alone: 16 s for its first epoch); two seeds at once (ten runs) would not fit a session's 30 device minutes.
* ``vision-labels``: labels in the balanced ``vision-lt`` setting (the same runs otherwise, paired by seed with its
  ``infonce`` rows): ``infonce`` at τ 0.1 with ``label_policy="exclude"`` (two images of a class are no negatives of
  each other) and with ``label_policy="positives_out"`` (supervised contrastive learning, Khosla et al.'s L_out).
* ``vision-lt-epochs``: the convergence check: ``infonce`` on the long tail at 400 epochs, to compare with its
  200-epoch row (``benchmarks/claims.py`` states each doubling's gain and which budget, if any, converges).

``--parallel N`` runs N planned runs at once, each in its own process (a GPU or many cores; DCRec on an H200:
eight side by side took ~30 s per epoch each, against ~115 s for one run on one CPU thread), and still writes the
rows one at a time. Rows go to ``--json`` (default ``docs/results/claims_runs.json``); ``benchmarks/claims.py``
turns them into the claims table and the strategy × modality matrix. Runs longer than a sitting (DCRec to
convergence: hours each) take ``--workdir``: each run keeps its checkpoints in its own folder there, and a run
that was killed continues from its last checkpoint when the same command is started again (its row's
``seconds`` count every sitting, ``sittings`` how many there were).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import multiprocessing
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results_store import machine  # noqa: E402
from cl_plugins.integrations.runs import atomic  # noqa: E402
from cl_plugins.integrations.runs.guard import MANIFEST  # noqa: E402

#: the CPU-sized vision setting (stated in the claims table)
VISION = dict(subset_per_class=500, width=16, epochs=100, batch_size=128, lr=0.06, eval_every=0, linear_epochs=100)
#: the balanced control has as many images as the long tail drawn from VISION's subset (1,236 -> 124 per class)
BALANCED_PER_CLASS = 124
#: the training budget of each vision experiment of the matrix (``vision-lt-epochs`` names its own per setting)
VISION_EPOCHS = {"vision-lt": VISION["epochs"], "vision-lt-200": 200}
#: the GPU rows' setting: the papers' recipe on full CIFAR-10 at the epochs one device session affords
VISION_GPU = dict(subset_per_class=0, width=64, epochs=30, batch_size=128, lr=0.06, eval_every=0, linear_epochs=100,
                  mixed_precision="bf16")  # fmt: skip
VISION_GPU_STRATEGIES = ("infonce", "macl", "dystress", "temperature_free", "dual_temperature")


def kukleva_scaled(epochs: int) -> dict[str, Any]:
    """Kukleva et al.'s cosine schedule at a shorter budget: their period is 400 of 2,000 epochs (five oscillations
    per run, ending at τ_max); here the same five oscillations over ``epochs``."""
    return {"period": epochs // 5, "period_unit": "epoch"}


VISION_STRATEGIES = ("infonce", "macl", "dystress", "cosine_schedule", "temperature_free")
#: (strategy, its arguments) per experiment: the settings a row is keyed by
SETTINGS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "grace-pygcl": [("infonce", {"tau": t}) for t in (0.1, 0.25, 0.5, 1.0)] + [("temperature_free", {})],
    "graphcl-tu": [("infonce", {}), ("macl", {"tau0": 0.2, "alpha": 0.5, "a0": 0.0}), ("dystress", {})],
    "dcrec-ml100k": [(s, {}) for s in ("infonce", "temperature_free", "macl", "dystress")],
    **{e: [(s, kukleva_scaled(epochs) if s == "cosine_schedule" else {}) for s in VISION_STRATEGIES]
       for e, epochs in VISION_EPOCHS.items()},
    "vision-lt-epochs": [("infonce", {"epochs": 400})],
    "vision-labels": [("infonce", {"label_policy": "exclude"}), ("infonce", {"label_policy": "positives_out"})],
    # the budget is in the row key, so rows of another budget are never paired with these (nor reused)
    "vision-gpu": [(s, {"epochs": VISION_GPU["epochs"]}) for s in VISION_GPU_STRATEGIES],
}
DATASETS = {"grace-pygcl": ["CiteSeer", "Cora"], "graphcl-tu": ["MUTAG", "PROTEINS", "NCI1", "IMDB-BINARY"],
            "dcrec-ml100k": ["ml-100k"], "vision-lt": ["cifar10_lt", "cifar10"],
            "vision-lt-200": ["cifar10_lt"], "vision-lt-epochs": ["cifar10_lt"], "vision-gpu": ["cifar10"],
            "vision-labels": ["cifar10"]}  # fmt: skip


def grace_pygcl(
    dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path, resume: bool = False
) -> dict[str, Any]:  # not in RESUMABLE: a killed run starts over (``overwrite``)
    from cl_plugins.integrations.hosts.graph import grace

    params = dict(params)
    tau = params.pop("tau", -1.0)
    cfg = grace.GraceConfig(dataset=dataset, recipe="pygcl", loss=strategy, loss_args=params, tau=tau, seeds=[seed],
                            output_dir=str(workdir), log_with="none", overwrite=True, progress=False)  # fmt: skip
    (run,) = grace.run(cfg)["runs"]
    (scores,) = run["eval"]["pygcl"]
    return {"micro_f1": 100 * scores["micro_f1"], "macro_f1": 100 * scores["macro_f1"],
            "epochs": grace.settings(cfg)["epochs"], "final_loss": run["final_loss"]}  # fmt: skip


def graphcl_tu(
    dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path, resume: bool = False
) -> dict[str, Any]:  # not in RESUMABLE: a killed run starts over (``overwrite``)
    from cl_plugins.integrations.hosts.graph import graphcl_tu as tu

    cfg = tu.TUConfig(dataset=dataset, loss=strategy, loss_args=params, seeds=[seed], output_dir=str(workdir),
                      log_with="none", overwrite=True, progress=False)  # fmt: skip
    (run,) = tu.run(cfg)["runs"]
    return {"accuracy": 100 * run["accuracy"], "epochs": cfg.epochs}


def dcrec_ml100k(
    dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path, resume: bool = False
) -> dict[str, Any]:
    from cl_plugins.integrations.hosts.dcrec import train as dcrec

    cfg = dcrec.DCRecConfig(dataset=dataset, loss=strategy, loss_args=params, seeds=[seed], output_dir=str(workdir),
                            log_with="none", progress=False, resume=resume)  # fmt: skip
    (run,) = dcrec.run(cfg)["runs"]
    metrics = {f"{protocol}/{k}": 100 * v for protocol, m in run["test"].items() for k, v in m.items()}
    return {**metrics, "best_epoch": run["best_epoch"], "epochs_run": run["epochs_run"]}


def vision_lt(dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path, resume: bool = False,
              epochs: int = VISION["epochs"]) -> dict[str, Any]:  # fmt: skip
    params = dict(params)
    setting = {**VISION, "epochs": params.pop("epochs", epochs)}  # the convergence check's longer run
    if dataset == "cifar10":
        setting["subset_per_class"] = BALANCED_PER_CLASS
    return vision_run(dataset, strategy, params, seed, workdir, resume, setting)


def vision_gpu(
    dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path, resume: bool = False
) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("vision-gpu: no CUDA device here; these rows are the GPU recipe (run them where one is)")
    params = dict(params)
    return vision_run(dataset, strategy, params, seed, workdir, resume, {**VISION_GPU, "epochs": params.pop("epochs")})


def vision_run(dataset: str, strategy: str, params: dict[str, Any], seed: int, workdir: Path, resume: bool,
               setting: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    from cl_plugins.integrations.hosts.vision import train as vision

    cfg = vision.VisionConfig(dataset=dataset, loss=strategy, loss_args=params, seed=seed, output_dir=str(workdir),
                              log_with="none", progress=False, checkpoint_every=10, resume=resume,
                              **setting)  # fmt: skip
    result = vision.run(cfg)
    return {"knn_top1": 100 * result["knn_top1"], "linear_top1": 100 * result["linear_top1"], **setting}


EXPERIMENTS: dict[str, Callable[..., dict[str, Any]]] = {
    "grace-pygcl": grace_pygcl,
    "graphcl-tu": graphcl_tu,
    "dcrec-ml100k": dcrec_ml100k,
    "vision-lt": vision_lt,
    "vision-lt-200": functools.partial(vision_lt, epochs=VISION_EPOCHS["vision-lt-200"]),
    "vision-lt-epochs": vision_lt,
    "vision-labels": vision_lt,
    "vision-gpu": vision_gpu,
}


def row_key(row: dict[str, Any]) -> tuple:
    return (row["experiment"], row["dataset"], row["strategy"], json.dumps(row["params"], sort_keys=True), row["seed"])


def seeds_arg(text: str) -> list[int]:
    """``0-19`` or ``0 3 5`` style seed lists."""
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(text)]


#: the experiments whose runs continue from their checkpoints (the others take minutes and start over)
RESUMABLE = frozenset({"dcrec-ml100k", "vision-lt", "vision-lt-200", "vision-lt-epochs", "vision-gpu",
                       "vision-labels"})
#: how often a run's clock saves its total (a kill loses at most this much of the recorded time)
CLOCK_SECONDS = 30.0
#: where a run's clock keeps its total, in the run's folder
CLOCK_FILE = "claims_clock.json"


def run_folder(workdir: Path, plan: dict[str, Any]) -> Path:
    """The folder of one planned run under ``--workdir``: readable, and distinct per row key."""
    digest = hashlib.sha1(json.dumps(row_key(plan)).encode()).hexdigest()[:10]
    return workdir / f"{plan['experiment']}-{plan['dataset']}-{plan['strategy']}-seed{plan['seed']}-{digest}"


@contextmanager
def run_clock(folder: Path, every: float) -> Iterator[Callable[[], dict[str, Any]]]:
    """Wall seconds of one run summed over its sittings: the total so far is saved in ``folder`` every ``every``
    seconds, so a run that is killed and resumed counts its earlier sittings (each kill loses < ``every`` s)."""
    path = folder / CLOCK_FILE
    before = json.loads(path.read_text()) if path.is_file() else {"seconds": 0.0, "sittings": 0}
    start, stop = time.time(), threading.Event()

    def total() -> dict[str, Any]:
        return {"seconds": before["seconds"] + time.time() - start, "sittings": before["sittings"] + 1}

    def save_every() -> None:
        while not stop.wait(every):
            atomic.write_json(path, total())

    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, total())
    saver = threading.Thread(target=save_every, daemon=True)
    saver.start()
    try:
        yield total
    finally:
        stop.set()
        saver.join()
        atomic.write_json(path, total())  # an interrupted sitting counts to its end


def run_one(experiment: str, plan: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One planned run in ``folder`` (continued from its checkpoints when an earlier sitting left a run there)."""
    resume = experiment in RESUMABLE and (folder / "run" / MANIFEST).is_file()
    if not resume:  # a run that starts over does not count the sittings it throws away
        (folder / CLOCK_FILE).unlink(missing_ok=True)
    with run_clock(folder, CLOCK_SECONDS) as clock:
        scores = EXPERIMENTS[experiment](plan["dataset"], plan["strategy"], plan["params"], plan["seed"],
                                         folder / "run", resume=resume)  # fmt: skip
        return {**plan, **scores, **clock(), "machine": machine()}


def planned(experiment: str, datasets: list[str], seeds: list[int], strategies: list[str] | None) -> Iterator[dict]:
    """Seed-major order, so that every setting has its first seeds before any has its last (paired early)."""
    for seed in seeds:
        for dataset in datasets:
            for strategy, params in SETTINGS[experiment]:
                if strategies is None or strategy in strategies:
                    yield {"experiment": experiment, "dataset": dataset, "strategy": strategy, "params": params,
                           "seed": seed}  # fmt: skip


def run_planned(experiment: str, plan: dict[str, Any], workdir: Path | None) -> dict[str, Any]:
    """One planned run in its ``--workdir`` folder, else in a temporary one (then a killed run starts over)."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="claims-") as folder:
            return run_one(experiment, plan, Path(folder))
    return run_one(experiment, plan, run_folder(workdir, plan))


def store(results: dict[str, Any], row: dict[str, Any], path: Path, workdir: Path | None) -> None:
    """Write ``row`` to ``path`` (replacing a row of the same key), then drop its checkpoints: no longer needed."""
    results["rows"] = [r for r in results["rows"] if row_key(r) != row_key(row)] + [row]
    atomic.write_json(path, results)
    if workdir is not None:
        shutil.rmtree(run_folder(workdir, row))
    print(json.dumps({k: v for k, v in row.items() if k != "machine"}), flush=True)


def run_all(experiment: str, plans: list[dict[str, Any]], workdir: Path | None, path: Path, results: dict[str, Any],
            parallel: int = 1, pool: Executor | None = None) -> None:  # fmt: skip
    """Every plan, ``parallel`` at a time (each in its own process unless a ``pool`` is given); this process alone
    writes ``path``, a row as soon as its run ends. A failed run stops the others only when ``parallel`` is 1;
    otherwise the others finish and are stored, and the failures are reported at the end."""
    if parallel == 1 and pool is None:
        for plan in plans:
            store(results, run_planned(experiment, plan, workdir), path, workdir)
        return
    failed = []
    # spawn: a child must not inherit a parent's CUDA state or threads
    with pool or ProcessPoolExecutor(parallel, mp_context=multiprocessing.get_context("spawn")) as executor:
        futures = {executor.submit(run_planned, experiment, plan, workdir): plan for plan in plans}
        for future in as_completed(futures):
            try:
                row = future.result()
            except (Exception, SystemExit) as exc:  # SystemExit: a run's one-line refusal
                plan = futures[future]
                failed.append(f"{plan['dataset']} {plan['strategy']} {plan['params']} seed {plan['seed']}: {exc!r}")
                print(f"failed: {failed[-1]}", file=sys.stderr, flush=True)
                continue
            store(results, row, path, workdir)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(plans)} runs failed (their rows are not written): " +
                         "; ".join(failed))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS), help="which experiment")
    parser.add_argument("--datasets", nargs="+", help="datasets (default: all of the experiment's)")
    parser.add_argument("--seeds", nargs="+", default=["0-4"], help="seeds, e.g. 0-19 or 0 1 2 (default: 0-4)")
    parser.add_argument("--strategies", nargs="+", help="only these strategies (default: all settings)")
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "results" / "claims_runs.json")
    parser.add_argument("--reuse", action="store_true", help="keep rows of the same settings and seed")
    parser.add_argument("--workdir", type=Path, help="keep each run's checkpoints here, so that a killed run "
                        "continues when started again (default: a temporary folder; a killed run starts over)")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once, each in its own process (a GPU or "
                        "many cores shared side by side; set OMP_NUM_THREADS per process); rows are still written "
                        "one at a time, each as its run ends (default: 1)")  # fmt: skip
    args = parser.parse_args()
    if args.parallel < 1:
        parser.error(f"--parallel must be >= 1, got {args.parallel}")
    seeds = [s for text in args.seeds for s in seeds_arg(text)]
    results = json.loads(args.json.read_text()) if args.json.exists() else {"rows": []}
    done = {row_key(r) for r in results["rows"]} if args.reuse else set()
    plans = [p for p in planned(args.experiment, args.datasets or DATASETS[args.experiment], seeds, args.strategies)
             if row_key(p) not in done]  # fmt: skip
    run_all(args.experiment, plans, args.workdir, args.json, results, args.parallel)


if __name__ == "__main__":
    main()
