"""Train DCRec with any cl-plugins strategy and evaluate HR / NDCG @ {1, 5, 10}, on Accelerate.

    accelerate launch examples/dcrec_rec.py --dataset beauty --loss temperature_free
    python examples/dcrec_rec.py --dataset ml-100k --loss macl --seeds 0 1 2
    python examples/dcrec_rec.py --dataset beauty --selection test     # DCRec's own protocol, labelled

Settings default to ``run_DCRec.py``'s per-data-set values (:data:`PRESETS`; MovieLens sets use
its ``ml-20m`` values) with Adam (lr 1e-3), 300 epochs and early stopping after 20 epochs
without improvement of the selection metric (DCRec: Recall@1 = HR@1 under ``pop100``).
A flag left at its default (-1 or empty) takes the preset's value.

Model selection is on a validation row per user (:mod:`cl_plugins.integrations.hosts.dcrec.splits`); DCRec's
selection on the test set is available as ``--selection test`` and every output of such a run
says ``test-selected``. The best epoch's weights are evaluated on validation and test with full
ranking and with 100 popularity-sampled negatives, and written to ``OUT/seed_<s>/``:
``model/`` (config + weights, re-evaluated by ``cl-plugins dcrec-eval``),
``results.json``, Accelerate checkpoints (``--resume`` continues exactly, early-stopping state
included) and tracker logs (loss, its CE / CL / KL terms, the strategy's statistics, metrics).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from cl_plugins.integrations.command_line import one_line_errors, parse_config
from cl_plugins.integrations.data.paths import cache_dir, fingerprint
from cl_plugins.integrations.hosts.dcrec.configs import DCRecConfig
from cl_plugins.integrations.hosts.dcrec.graphs import ItemGraph, UserEdges
from cl_plugins.integrations.hosts.dcrec.model import DCRec, DCRecGraphs, build_dcrec_loss
from cl_plugins.integrations.hosts.dcrec.ranking import evaluate, format_metrics
from cl_plugins.integrations.hosts.dcrec.splits import DCRecSplits, Rows, build_splits, load_sequences, source_files
from cl_plugins.integrations.runs import atomic, saved_model
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.results import fmt_mean_std, write_json
from cl_plugins.integrations.runs.training import Hooks, Plan, Run, RunState, fit


class BestEpoch:
    """Early stopping and the best weights; checkpointed with the run so ``--resume`` is exact."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best, self.epoch, self.bad = float("-inf"), 0, 0
        self.weights: dict[str, torch.Tensor] = {}
        self.metrics: dict[str, dict[str, float]] = {}
        self.history: list[dict[str, Any]] = []

    def update(
        self, epoch: int, score: float, weights: dict[str, torch.Tensor], metrics: dict[str, dict[str, float]]
    ) -> bool:
        if score > self.best:
            self.best, self.epoch, self.bad, self.metrics = score, epoch, 0, metrics
            self.weights = {k: v.detach().cpu().clone() for k, v in weights.items()}
            return True
        self.bad += 1
        return False

    def stop(self) -> bool:
        return self.patience > 0 and self.bad >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "epoch": self.epoch, "bad": self.bad, "weights": self.weights,
                "metrics": self.metrics, "history": self.history}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.epoch, self.bad = state["best"], state["epoch"], state["bad"]
        self.weights, self.metrics, self.history = state["weights"], state["metrics"], state["history"]


#: the classes a cached :class:`DCRecSplits` is made of (allowed when the cache is read)
SPLIT_CLASSES = (DCRecSplits, Rows, DCRecGraphs, ItemGraph, UserEdges)
#: raise when building the rows or graphs changes: every cached split is then rebuilt
SPLITS_VERSION = 1


def prepare_splits(config: DCRecConfig) -> DCRecSplits:
    """Rows and graphs, cached under ``$CL_PLUGINS_CACHE/dcrec`` (the similarity graph is the slow part)."""
    # keyed by what the rows are built from: a changed source file gives a new cache
    source = fingerprint(source_files(config.dataset), SPLITS_VERSION)
    key = f"{config.dataset}_{config.selection}_L{config.max_length}_k{config.sim_group}_{source}.pt"
    path = cache_dir("dcrec") / key
    cached = atomic.load_cache(path, SPLIT_CLASSES)
    if cached is not None:
        return cached
    splits = build_splits(
        load_sequences(config.dataset), selection=config.selection, max_length=config.max_length, k=config.sim_group
    )
    atomic.torch_save(splits, path)  # a temporary name per process: two ranks may build the cache at once
    return splits


def build_model(config: DCRecConfig, splits: DCRecSplits) -> DCRec:
    loss_fn = build_dcrec_loss(config.loss, config.cl_temp, config.hidden_size, **config.loss_args)
    return DCRec(
        splits.num_items,
        splits.train_graphs,
        loss_fn,
        hidden_size=config.hidden_size,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        inner_size=config.inner_size,
        max_length=config.max_length,
        hidden_dropout=config.hidden_dropout,
        attn_dropout=config.attn_dropout,
        graph_dropout=config.graph_dropout,
        weight_mean=config.weight_mean,
        kl_weight=config.kl_weight,
        cl_weight=config.cl_weight,
        fusion=config.fusion,
    )


def _head(rows: Any, n: int) -> Any:
    if not n:
        return rows
    return type(rows)(*(t[:n] for t in rows.tensors()))


def run_seed(config: DCRecConfig, layout: RunLayout, splits: DCRecSplits, seed: int) -> dict[str, Any]:
    """Train one seed; returns its ``results.json``."""
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader, TensorDataset

    layout = layout.seed(seed)
    accelerator = make_accelerator(layout, mixed_precision=config.mixed_precision, log_with=config.log_with)
    set_seed(seed)
    model = build_model(config, splits)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    train = _head(splits.train, config.max_train_rows)
    valid, test = _head(splits.valid, config.max_eval_rows), _head(splits.test, config.max_eval_rows)
    loader = DataLoader(TensorDataset(*train.tensors()), batch_size=min(config.batch_size, len(train)), shuffle=True)
    best = BestEpoch(config.patience)
    protocol, _, metric = config.select_metric.partition("/")

    def evaluate_rows(rows: Any, split: str) -> dict[str, dict[str, float]]:
        graphs = splits.valid_graphs if split == "valid" else splits.test_graphs
        return evaluate(
            model, rows, graphs, splits.popularity, batch_size=config.eval_batch_size,
            exclude_history=config.exclude_history, device=accelerator.device, seed=seed, negatives=config.negatives,
        )  # fmt: skip

    def on_epoch_end(state: RunState) -> None:
        epoch = state.epoch
        if epoch % config.eval_every and epoch < config.epochs:
            return
        metrics = evaluate_rows(valid, "valid")
        score = metrics[protocol][metric]
        improved = best.update(epoch, score, model.state_dict(), metrics)
        best.history.append({"epoch": epoch, **{f"{p}/{k}": v for p, m in metrics.items() for k, v in m.items()}})
        accelerator.log({f"{splits.label}/{k}": v for k, v in best.history[-1].items() if k != "epoch"},
                        step=state.step)  # fmt: skip
        accelerator.print(
            f"epoch {epoch} [{splits.label}] {config.select_metric}={score:.4f}" + (" (best)" if improved else "")
        )

    t0 = time.time()
    run = Run.of(config, layout, f"dcrec {config.dataset} {config.loss} seed {seed}", "dcrec", seed=seed,
                 selection_label=splits.label)  # fmt: skip
    hooks = Hooks(on_epoch_end=on_epoch_end, stop_when=best.stop, step_logs=lambda: dict(model.last_terms))
    state = fit(accelerator, model, optimizer, loader, Plan(config.epochs, keep=config.keep_checkpoints), run, hooks,
                register=(best,))  # fmt: skip
    losses = state.records["epoch_loss"]
    model.load_state_dict(best.weights)
    result = _seed_result(config, splits.label, seed, best, losses, len(train), time.time() - t0)
    result["test"] = evaluate_rows(test, "test")
    if accelerator.is_main_process:
        saved_model.write(layout.model, "dcrec", model={"selection": splits.label}, run=asdict(config),
                          weights=model.state_dict(), records={"epoch_loss": losses, "best_epoch": best.epoch})
        write_json(layout.results, result)
        accelerator.print(f"seed {seed} [{splits.label}] best epoch {best.epoch}")
        accelerator.print(f"  valid: {format_metrics(result['valid'])}")
        accelerator.print(f"  test:  {format_metrics(result['test'])}")
    end_tracking(accelerator)
    return result


def _seed_result(config: DCRecConfig, label: str, seed: int, best: BestEpoch, losses: list[float], rows: int,
                 seconds: float) -> dict[str, Any]:  # fmt: skip
    """A seed's ``results.json`` but its test metrics."""
    return {
        "selection": label,
        "config": asdict(config),
        "seed": seed,
        "best_epoch": best.epoch,
        "epochs_run": best.history[-1]["epoch"] if best.history else 0,
        "epoch_loss": losses,
        "train_rows": rows,
        "train_seconds": seconds,
        "history": best.history,
        "valid": best.metrics,  # the selection rows at the best epoch (evaluated with these weights)
    }


@guarded
def run(config: DCRecConfig, *, layout: RunLayout) -> dict[str, Any]:
    """All seeds; writes ``OUT/results.json`` with mean ± std of the test metrics."""
    config = config.resolved()
    splits = prepare_splits(config)
    runs = [run_seed(config, layout, splits, seed) for seed in config.seeds]
    summary: dict[str, Any] = {"selection": splits.label, "config": asdict(config), "runs": runs, "test": {}}
    for protocol in runs[0]["test"]:
        summary["test"][protocol] = {
            k: fmt_mean_std([r["test"][protocol][k] for r in runs], scale=100) for k in runs[0]["test"][protocol]
        }
    write_json(layout.summary, summary)
    print(json.dumps({"selection": splits.label, "test": summary["test"]}, indent=2))
    return summary


def load_run(run_dir: str | Path) -> tuple[DCRec, DCRecSplits, dict[str, Any]]:
    """The model of a ``seed_<s>/`` folder (its ``model/``, or that folder itself), its data splits and its
    config."""
    saved = saved_model.read(run_dir, ("dcrec",), "DCRec run model (a seed_<s>/ folder of examples/dcrec_rec.py)")
    saved_model.expect_model_keys(saved, ["selection"])
    config = saved_model.run_config(saved, DCRecConfig)
    splits = prepare_splits(config)
    model = saved_model.build(saved, lambda: build_model(config, splits), "DCRec model")
    saved_model.load_into(model, saved.weights, saved.path, "DCRec model")
    return model, splits, saved.run


@one_line_errors
def main(argv: list[str] | None = None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    return run(parse_config(DCRecConfig, __doc__, argv, defaults))


if __name__ == "__main__":
    main()
