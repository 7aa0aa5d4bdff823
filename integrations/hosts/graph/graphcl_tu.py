"""GraphCL, unsupervised TU graph classification, with any cl-plugins strategy.

    cl-plugins graphcl-tu --dataset MUTAG --loss macl --seeds 0 1 2 3 4

GraphCL's settings (``unsupervised_TU/gsimclr.py`` + ``go.sh``): GIN with 3 layers of 32 units,
sum pooling of every layer (96-dim embedding), projection head Linear-ReLU-Linear, Adam lr 0.01,
batch 128, 20 epochs; the positive pair is a graph and one augmented copy (ratio 0.2); the loss
is decoupled (positive out of the denominator) at τ = 0.2. Evaluation: frozen embeddings of the
unaugmented graphs -> 10-fold SVM accuracy with a C grid (:mod:`cl_plugins.integrations.evaluation.graph_svm`),
mean ± std over seeds.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import torch
from torch import nn

import cl_plugins as clp
from cl_plugins.integrations.command_line import one_line_errors, parse_config
from cl_plugins.integrations.evaluation.graph_svm import svm_cv_accuracy
from cl_plugins.integrations.hosts.graph.augment import GraphAugmentor
from cl_plugins.integrations.hosts.graph.configs import TUConfig
from cl_plugins.integrations.hosts.graph.datasets import load_tu
from cl_plugins.integrations.hosts.graph.encoders import GINEncoder, projection_head
from cl_plugins.integrations.hosts.graph.trainer import GraphCL, graph_hooks, save_run_model
from cl_plugins.integrations.runs import atomic
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.results import mean_std, write_json
from cl_plugins.integrations.runs.training import Plan, Run, fit


def build_model(config: TUConfig, num_features: int) -> GraphCL:
    encoder = GINEncoder(num_features, config.hidden, config.num_layers)
    dim = encoder.embedding_dim
    loss_fn = clp.build_host_loss(config.loss, host_tau=config.tau, host_decoupled=True, layout="cross_view",
                                  feature_dim=dim, **config.loss_args)  # fmt: skip
    augment = GraphAugmentor(config.aug, config.aug_ratio)
    head = nn.Identity() if clp.owns_projection_head(loss_fn, config.host_head) else projection_head(dim)
    return GraphCL(encoder, head, loss_fn, augment_1=None, augment_2=augment)


def run_seed(config: TUConfig, layout: RunLayout, seed: int, dataset: Any) -> dict[str, Any]:
    from accelerate.utils import set_seed
    from torch_geometric.loader import DataLoader

    layout = layout.seed(seed)
    accelerator = make_accelerator(layout, mixed_precision=config.mixed_precision, log_with=config.log_with)
    set_seed(seed)
    model = build_model(config, dataset.num_features)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    loader = DataLoader(dataset, batch_size=config.batch_size, shuffle=True)
    plan = Plan(config.epochs, keep=config.keep_checkpoints)
    run = Run.of(config, layout, f"GraphCL {config.dataset} {config.loss} seed {seed}", "graphcl_tu")
    state = fit(accelerator, model, optimizer, loader, plan, run, graph_hooks())
    result: dict[str, Any] = {"seed": seed, "epoch_loss": state.records["epoch_loss"]}
    if accelerator.is_main_process:
        unwrapped: GraphCL = accelerator.unwrap_model(model)
        emb, y = unwrapped.embed_all(DataLoader(dataset, batch_size=512), accelerator.device)
        atomic.save_npz(layout.embeddings, embeddings=emb.numpy(), labels=y.numpy().ravel())
        save_run_model(layout.model, "graphcl_tu", config, dataset.num_features, unwrapped, state.records)
        acc = svm_cv_accuracy(
            emb.numpy(), y.numpy().ravel(), seed=seed, folds=config.eval_folds, search=config.svm_search
        )
        result["accuracy"] = acc
        accelerator.log({"eval/svm_accuracy": acc}, step=state.step)
        accelerator.print(f"{config.dataset} {config.loss} seed {seed}: SVM accuracy {100 * acc:.2f}")
    end_tracking(accelerator)
    return result


@guarded
def run(config: TUConfig, *, layout: RunLayout) -> dict[str, Any]:
    """Train and evaluate every seed; writes and returns ``results.json``'s content."""
    if config.eval_folds < 2:
        raise ValueError(f"--eval_folds must be >= 2 (cross-validation), got {config.eval_folds}")
    if config.batch_size < 2:
        raise ValueError(f"--batch_size must be >= 2: a contrastive batch of one graph has no negative, got "
                         f"{config.batch_size}")  # fmt: skip
    dataset = load_tu(config.dataset, root=config.data_root or None, features=config.features)
    runs = [run_seed(config, layout, seed, dataset) for seed in config.seeds]
    accs = [r["accuracy"] for r in runs if "accuracy" in r]
    summary: dict[str, Any] = {"config": asdict(config), "runs": runs}
    if accs:
        mean, std = mean_std([100 * a for a in accs])
        summary.update(accuracy_mean=mean, accuracy_std=std)
        write_json(layout.summary, summary)
    return summary


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    summary = run(parse_config(TUConfig, __doc__, argv))
    if "accuracy_mean" in summary:
        print(json.dumps({k: summary[k] for k in ("accuracy_mean", "accuracy_std")}, indent=2))


if __name__ == "__main__":
    main()
