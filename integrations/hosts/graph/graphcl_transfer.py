"""GraphCL transfer learning on molecules: pre-train a Hu et al. GIN on ZINC with any strategy,
fine-tune it on MoleculeNet with the scaffold split, report ROC-AUC.

    cl-plugins graphcl-transfer --loss macl --datasets bbbp bace --runseeds 0 1 2

GraphCL's settings (``transferLearning_MoleculeNet_PPI/chem``): GIN 5 layers x 300, mean
pooling, projection head Linear-ReLU-Linear, two augmented views (``random``: node dropping,
edge perturbation, subgraph or attribute masking per molecule, ratio 0.2), the decoupled loss at
τ = 0.1, Adam lr 1e-3, batch 256 (GraphCL pre-trains 100 epochs on 2M ZINC molecules; the
defaults here are a short run on the data pack's 29k ZINC SMILES). Fine-tuning (pretrain-gnns'
``finetune.py``): dropout 0.5, Adam lr 1e-3, batch 32, 100 epochs, masked BCE over tasks,
scaffold split 80/10/10; reported: test ROC-AUC at the last epoch (GraphCL's number) and at the
epoch of best validation ROC-AUC (pretrain-gnns' ``parse_result.py``), mean ± std over run seeds.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

import cl_plugins as clp
from cl_plugins.integrations.command_line import one_line_errors, parse_config
from cl_plugins.integrations.hosts.graph.augment import GraphAugmentor
from cl_plugins.integrations.hosts.graph.checkpoints import load_molecule_gin
from cl_plugins.integrations.hosts.graph.configs import TransferConfig
from cl_plugins.integrations.hosts.graph.encoders import MASK_ATOM, MoleculeGIN, projection_head
from cl_plugins.integrations.hosts.graph.molecules import (
    MoleculeNetData,
    multitask_roc_auc,
    roc_auc_tasks,
    scaffold_split,
    zinc_graphs,
)
from cl_plugins.integrations.hosts.graph.trainer import GraphCL, graph_hooks
from cl_plugins.integrations.runs import saved_model
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.results import mean_std, write_json
from cl_plugins.integrations.runs.training import Plan, Run, fit


def build_pretrain_model(config: TransferConfig) -> GraphCL:
    """GraphCL's pre-training model: Hu et al.'s GIN, the projection head, the strategy, the two augmentations."""
    gnn = MoleculeGIN(config.num_layers, config.emb_dim)
    loss_fn = clp.build_host_loss(config.loss, host_tau=config.tau, host_decoupled=True, layout="cross_view",
                                  feature_dim=config.emb_dim, **config.loss_args)  # fmt: skip
    mask_token = torch.tensor([MASK_ATOM, 0])
    augs = [
        None if a == "none" else GraphAugmentor(a, config.aug_ratio, mask_token) for a in (config.aug1, config.aug2)
    ]
    head = nn.Identity() if clp.owns_projection_head(loss_fn, config.host_head) else projection_head(config.emb_dim)
    return GraphCL(gnn, head, loss_fn, *augs)


def pretrain(config: TransferConfig, layout: RunLayout) -> dict[str, torch.Tensor]:
    """GraphCL pre-training (checkpoints in ``OUTPUT/pretrain/``); returns (and saves to ``OUTPUT/model/``) the GIN's
    weights."""
    from accelerate.utils import set_seed
    from torch_geometric.loader import DataLoader

    pretraining = layout.part("pretrain")
    accelerator = make_accelerator(pretraining, mixed_precision=config.mixed_precision,
                                   log_with=config.log_with)  # fmt: skip
    set_seed(config.pretrain_seed)
    root = Path(config.data_root) if config.data_root else None
    graphs = zinc_graphs(root, config.pretrain_molecules or None)
    model = build_pretrain_model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.pretrain_lr)
    loader = DataLoader(graphs, batch_size=config.pretrain_batch_size, shuffle=True)
    plan = Plan(config.pretrain_epochs, keep=config.keep_checkpoints)
    run = Run.of(config, pretraining, f"GraphCL pre-training {config.loss}", "graphcl_transfer")
    losses = fit(accelerator, model, optimizer, loader, plan, run, graph_hooks()).records["epoch_loss"]
    state = {k: v.cpu() for k, v in accelerator.unwrap_model(model).encoder.state_dict().items()}
    if accelerator.is_main_process:
        saved_model.write(layout.model, "graphcl_transfer", model={"num_layers": config.num_layers,
                          "emb_dim": config.emb_dim}, run=asdict(config), weights=state,
                          records={"epoch_loss": losses})  # fmt: skip
    end_tracking(accelerator)
    return state


class MoleculeClassifier(nn.Module):
    """Hu et al.'s GNN_graphpred: GIN -> mean pooling -> Linear(emb_dim, num_tasks)."""

    def __init__(self, gnn: MoleculeGIN, num_tasks: int) -> None:
        super().__init__()
        self.gnn = gnn
        self.head = nn.Linear(gnn.emb_dim, num_tasks)

    def forward(self, data: Any) -> torch.Tensor:
        return self.head(self.gnn.embed(data))


def masked_bce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BCE over the labels that are present (labels in {-1, 0, +1}, 0 missing), averaged over them."""
    valid = labels != 0
    loss = F.binary_cross_entropy_with_logits(logits, (labels + 1) / 2, reduction="none")
    return torch.where(valid, loss, torch.zeros_like(loss)).sum() / valid.sum().clamp(min=1)


@torch.no_grad()
def predict(model: nn.Module, loader: Any, device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    model.eval()
    scores, labels = [], []
    for data in loader:
        data = data.to(device)
        scores.append(model(data).cpu())
        labels.append(data.y.view(data.num_graphs, -1).cpu())
    model.train()
    return torch.cat(labels).numpy(), torch.cat(scores).numpy()


def finetune(
    config: TransferConfig,
    gnn_state: dict[str, torch.Tensor] | None,
    data: MoleculeNetData,
    split: tuple[list[int], list[int], list[int]],
    seed: int,
    device: torch.device,
) -> dict[str, Any]:
    """One fine-tuning run; returns validation / test ROC-AUC per epoch and the two reported numbers."""
    from torch_geometric.loader import DataLoader

    torch.manual_seed(seed)
    np.random.seed(seed)
    gnn = MoleculeGIN(config.num_layers, config.emb_dim, dropout=config.dropout)
    if gnn_state is not None:
        gnn.load_state_dict(gnn_state)
    model = MoleculeClassifier(gnn, data.num_tasks).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.finetune_lr)
    train_idx, valid_idx, test_idx = split
    train_loader = DataLoader([data[i] for i in train_idx], batch_size=config.finetune_batch_size, shuffle=True)
    valid_loader = DataLoader([data[i] for i in valid_idx], batch_size=256)
    test_loader = DataLoader([data[i] for i in test_idx], batch_size=256)
    val_curve, test_curve = [], []
    for _ in tqdm(
        range(config.finetune_epochs), desc=f"fine-tuning {data.name} seed {seed}", disable=not config.progress
    ):
        model.train()
        for batch in train_loader:
            if batch.num_graphs < 2:  # BatchNorm needs two graphs' nodes at least; pretrain-gnns drops none
                continue
            batch = batch.to(device)
            loss = masked_bce(model(batch), batch.y.view(batch.num_graphs, -1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        val_curve.append(multitask_roc_auc(*predict(model, valid_loader, device)))
        test_curve.append(multitask_roc_auc(*predict(model, test_loader, device)))
    best = int(np.nanargmax(val_curve))
    used, skipped = roc_auc_tasks(predict(model, test_loader, device)[0])
    return {
        "seed": seed,
        # MUV, ToxCast: test tasks with one class only are left out of the mean, as pretrain-gnns does
        "test_tasks_averaged": len(used),
        "test_tasks_skipped": [data.tasks[t] for t in skipped],
        "test_auc_last": test_curve[-1],
        "test_auc_best_val": test_curve[best],
        "best_epoch": best + 1,
        "val_curve": val_curve,
        "test_curve": test_curve,
    }


@guarded
def run(config: TransferConfig, *, layout: RunLayout) -> dict[str, Any]:
    if config.input_model:
        gnn_state = load_molecule_gin(config.input_model)
        where = f"--num_layers {config.num_layers} --emb_dim {config.emb_dim}"
        with torch.device("meta"), saved_model.at_most(2 * len(gnn_state) + 16, where, str(config.input_model)):
            described = MoleculeGIN(config.num_layers, config.emb_dim).state_dict()  # shapes only, nothing allocated
        differs = saved_model.first_difference(described, gnn_state)
        if differs:
            raise ValueError(f"--input_model {config.input_model} is not a GIN of --num_layers {config.num_layers} "
                             f"--emb_dim {config.emb_dim} (first at {differs}); pass the sizes it was trained with")
    elif config.pretrain:
        gnn_state = pretrain(config, layout)
    else:
        gnn_state = None
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    root = Path(config.data_root) / "dataset" if config.data_root else None
    summary: dict[str, Any] = {"config": asdict(config), "datasets": {}}
    for name in config.datasets:
        data = MoleculeNetData(name, root)
        split = scaffold_split(data.smiles)
        runs = [finetune(config, gnn_state, data, split, seed, device) for seed in config.runseeds]
        entry: dict[str, Any] = {"molecules": len(data), "dropped": data.dropped, "tasks": data.num_tasks, "runs": runs,
                                 "test_tasks_skipped": runs[0]["test_tasks_skipped"]}  # fmt: skip
        for key in ("test_auc_last", "test_auc_best_val"):
            entry[f"{key}_mean"], entry[f"{key}_std"] = mean_std([100 * r[key] for r in runs])
        summary["datasets"][name] = entry
        print(
            f"{name} ({config.loss}{'' if gnn_state is not None else ', no pre-training'}): test ROC-AUC last epoch "
            f"{entry['test_auc_last_mean']:.2f} ± {entry['test_auc_last_std']:.2f}, at best validation "
            f"{entry['test_auc_best_val_mean']:.2f} ± {entry['test_auc_best_val_std']:.2f}"
            + (f"; averaged over {runs[0]['test_tasks_averaged']} of {data.num_tasks} tasks (skipped, one class in "
               f"the test split: {', '.join(entry['test_tasks_skipped'])})" if entry["test_tasks_skipped"] else "")
        )  # fmt: skip
    write_json(layout.summary, summary)
    return summary


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    run(parse_config(TransferConfig, __doc__, argv))


if __name__ == "__main__":
    main()
