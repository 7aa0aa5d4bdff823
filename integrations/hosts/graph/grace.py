"""GRACE (Zhu et al., 2020) node-level contrastive learning with any cl-plugins strategy.

    cl-plugins grace --dataset Cora --loss temperature_free

GRACE's model and settings (``CRIPAC-DIG/GRACE``: ``model.py``, ``config.yaml``): a GCN encoder,
per view edge dropping (``dropout_edge``) and feature-column masking, a projection head
fc1 -> ELU -> fc2, and the symmetric loss in which each node of one view has its copy in the
other view as positive and every other node of both views as negative (self-similarity
excluded). That is the ``"grace"`` layout of cl-plugins, so ``infonce`` at GRACE's τ reproduces
GRACE's loss exactly; the temperature-free strategy sees no self-similarity either (atanh(1)
would be infinite). The whole graph is one batch; under several processes every rank holds the
graph, so the loss is not gathered across ranks.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import one_line_errors, parse_config
from cl_plugins.integrations.evaluation.node_classification import node_classification, pygcl_logreg_f1, pygcl_split
from cl_plugins.integrations.hosts.graph.configs import GraceConfig
from cl_plugins.integrations.hosts.graph.datasets import load_planetoid
from cl_plugins.integrations.hosts.graph.encoders import GCNEncoder
from cl_plugins.integrations.hosts.graph.trainer import graph_hooks, save_run_model
from cl_plugins.integrations.runs import atomic
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.results import mean_std, write_json
from cl_plugins.integrations.runs.training import Plan, Run, fit

#: GRACE's config.yaml
PRESETS: dict[str, dict[str, Any]] = {
    "Cora": dict(lr=5e-4, hidden=128, proj_hidden=128, activation="relu", drop_edge_1=0.2, drop_edge_2=0.4,
                 drop_feature_1=0.3, drop_feature_2=0.4, tau=0.4, epochs=200, weight_decay=1e-5),
    "CiteSeer": dict(lr=1e-3, hidden=256, proj_hidden=256, activation="prelu", drop_edge_1=0.2, drop_edge_2=0.0,
                     drop_feature_1=0.3, drop_feature_2=0.2, tau=0.9, epochs=200, weight_decay=1e-5),
    "PubMed": dict(lr=1e-3, hidden=256, proj_hidden=256, activation="relu", drop_edge_1=0.4, drop_edge_2=0.1,
                   drop_feature_1=0.0, drop_feature_2=0.2, tau=0.7, epochs=1500, weight_decay=1e-5),
}  # fmt: skip
#: PyGCL's ``examples/GRACE.py``, the recipe the temperature-free paper follows for GRACE (its Table 3): one
#: setting for every dataset, a GCN of width 32 throughout, Adam 0.01 for 1000 epochs, τ 0.2 (the paper sweeps it)
PYGCL: dict[str, Any] = dict(lr=0.01, hidden=32, proj_hidden=32, inner=32, activation="relu", drop_edge_1=0.3,
                             drop_edge_2=0.3, drop_feature_1=0.3, drop_feature_2=0.3, tau=0.2, epochs=1000,
                             weight_decay=0.0)  # fmt: skip
RECIPES = ("grace", "pygcl")


def drop_feature(x: torch.Tensor, p: float) -> torch.Tensor:
    """Zero a random subset of feature columns (the same columns for every node), as GRACE does."""
    mask = torch.rand(x.size(1), device=x.device) < p
    return x.masked_fill(mask, 0.0)


@strict_flags
class GRACE(nn.Module):
    """Encoder + projection head + cl-plugins loss in the GRACE layout; ``forward(data)`` is the loss."""

    def __init__(self, encoder: GCNEncoder, hidden: int, proj_hidden: int, loss_fn: nn.Module, drops: tuple,
                 host_head: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.encoder = encoder
        self.fc1 = self.fc2 = None
        if host_head:
            self.fc1, self.fc2 = nn.Linear(hidden, proj_hidden), nn.Linear(proj_hidden, hidden)
        self.loss_fn = loss_fn
        self.drop_edge_1, self.drop_edge_2, self.drop_feature_1, self.drop_feature_2 = drops

    def projection(self, z: torch.Tensor) -> torch.Tensor:
        if self.fc1 is None or self.fc2 is None:  # the strategy projects (AMCL's heads)
            return z
        return self.fc2(F.elu(self.fc1(z)))

    def view(self, data: Any, p_edge: float, p_feature: float) -> torch.Tensor:
        from torch_geometric.utils import dropout_edge

        edge_index, _ = dropout_edge(data.edge_index, p=p_edge, training=True)
        return self.encoder(drop_feature(data.x, p_feature), edge_index)

    def forward(self, data: Any) -> torch.Tensor:
        h1 = self.projection(self.view(data, self.drop_edge_1, self.drop_feature_1))
        h2 = self.projection(self.view(data, self.drop_edge_2, self.drop_feature_2))
        return self.loss_fn(h1, h2)

    @torch.no_grad()
    def embed(self, data: Any) -> torch.Tensor:
        was_training = self.training
        self.eval()
        z = self.encoder(data.x, data.edge_index)
        self.train(was_training)
        return z


def settings(config: GraceConfig) -> dict[str, Any]:
    if config.recipe not in RECIPES:
        raise ValueError(f"--recipe must be one of {RECIPES}, got {config.recipe!r}")
    if config.dataset not in PRESETS:
        raise ValueError(f"no GRACE preset for {config.dataset!r}; choose from {sorted(PRESETS)}")
    out = dict(PRESETS[config.dataset] if config.recipe == "grace" else PYGCL)
    for key in ("tau", "epochs", "lr"):
        value = getattr(config, key)
        if value != -1 and not value > 0:  # 0 is not "the preset": a run of 0 epochs would report the preset's
            raise ValueError(f"--{key} must be > 0 (or -1: the dataset's preset), got {value}")
        if value > 0:
            out[key] = value
    return out


def build_model(config: GraceConfig, num_features: int) -> GRACE:
    s = settings(config)
    # every rank holds the whole graph: gathering would duplicate the nodes
    loss_fn = clp.build_host_loss(config.loss, host_tau=s["tau"], layout="grace", gather_distributed=False,
                                  feature_dim=s["hidden"], **config.loss_args)  # fmt: skip
    encoder = GCNEncoder(num_features, s["hidden"], s["activation"], inner=s.get("inner"))
    drops = (s["drop_edge_1"], s["drop_edge_2"], s["drop_feature_1"], s["drop_feature_2"])
    host_head = not clp.owns_projection_head(loss_fn, config.host_head)
    return GRACE(encoder, s["hidden"], s["proj_hidden"], loss_fn, drops, host_head)


def evaluate_embeddings(emb: np.ndarray, graph: Any, split: str, eval_seeds: int) -> dict[str, Any]:
    splits = ("random", "public") if split == "both" else (split,)
    masks = tuple(getattr(graph, f"{k}_mask").cpu().numpy() for k in ("train", "val", "test"))
    labels = graph.y.cpu().numpy()
    return {s: node_classification(emb, labels, split=s, seeds=range(eval_seeds), masks=masks) for s in splits}


def run_seed(config: GraceConfig, layout: RunLayout, seed: int, dataset: Any) -> dict[str, Any]:
    from accelerate.utils import set_seed
    from torch_geometric.loader import DataLoader

    s = settings(config)
    layout = layout.seed(seed)
    accelerator = make_accelerator(layout, mixed_precision=config.mixed_precision, log_with=config.log_with)
    set_seed(seed)
    model = build_model(config, dataset.num_features)
    optimizer = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    plan = Plan(s["epochs"], save_every=config.checkpoint_every, keep=config.keep_checkpoints)
    run = Run.of(config, layout, f"GRACE {config.dataset} {config.loss} seed {seed}", "grace", **s)
    state = fit(accelerator, model, optimizer, DataLoader(dataset, batch_size=1), plan, run, graph_hooks(1))
    losses = state.records["epoch_loss"]
    result: dict[str, Any] = {"seed": seed, "final_loss": losses[-1] if losses else None}
    if accelerator.is_main_process:
        unwrapped: GRACE = accelerator.unwrap_model(model)
        graph = dataset[0].to(accelerator.device)
        emb = unwrapped.embed(graph).cpu().numpy()
        atomic.save_npz(layout.embeddings, embeddings=emb, labels=graph.y.cpu().numpy())
        save_run_model(layout.model, "grace", config, dataset.num_features, unwrapped, state.records)
        if config.recipe == "pygcl":
            labels = graph.y.cpu().numpy()
            scores = pygcl_logreg_f1(emb, labels, *pygcl_split(len(labels), seed), seed=seed)
            result["eval"] = {"pygcl": [{"seed": seed, **scores}]}
        else:
            result["eval"] = evaluate_embeddings(emb, graph, config.split, config.eval_seeds)
        for split, rows in result["eval"].items():
            mi, ma = (mean_std([100 * r[k] for r in rows])[0] for k in ("micro_f1", "macro_f1"))
            accelerator.log({f"eval/{split}_micro_f1": mi, f"eval/{split}_macro_f1": ma}, step=state.step)
            accelerator.print(
                f"{config.dataset} {config.loss} seed {seed} [{split}]: F1-micro {mi:.2f} F1-macro {ma:.2f}"
            )
    end_tracking(accelerator)
    return result


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± std (in %) over every (training seed, evaluation seed) pair, per split."""
    out: dict[str, Any] = {}
    splits = {s for r in runs for s in r.get("eval", {})}
    for split in sorted(splits):
        rows = [row for r in runs for row in r["eval"].get(split, [])]
        for key in ("micro_f1", "macro_f1"):
            m, sd = mean_std([100 * row[key] for row in rows])
            out[f"{split}_{key}_mean"], out[f"{split}_{key}_std"] = m, sd
    return out


@guarded
def run(config: GraceConfig, *, layout: RunLayout) -> dict[str, Any]:
    preset = settings(config)  # the arguments before the data
    dataset = load_planetoid(config.dataset, root=config.data_root or None)
    runs = [run_seed(config, layout, seed, dataset) for seed in config.seeds]
    summary = {"config": asdict(config), "settings": preset, "runs": runs, **summarise(runs)}
    write_json(layout.summary, summary)
    return summary


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    summary = run(parse_config(GraceConfig, __doc__, argv))
    print(json.dumps({k: v for k, v in summary.items() if k.endswith(("_mean", "_std"))}, indent=2))


if __name__ == "__main__":
    main()
