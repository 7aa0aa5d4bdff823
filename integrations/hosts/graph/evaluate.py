"""Evaluate saved graph embeddings or checkpoints with each paper's protocol.

    cl-plugins graph-eval tu --embeddings outputs/graphcl_tu/seed_0/embeddings.npz
    cl-plugins graph-eval tu --checkpoint outputs/graphcl_tu/seed_0/model --seeds 0 1 2 3 4
    cl-plugins graph-eval node --checkpoint outputs/grace/seed_0/model --split both
    cl-plugins graph-eval node --embeddings emb.npz --dataset Cora --split public
    cl-plugins graph-eval molecule --checkpoint outputs/graphcl_transfer/model \\
        --datasets bbbp bace --runseeds 0 1 2

* ``tu``: 10-fold SVM accuracy with a C grid (:mod:`cl_plugins.integrations.evaluation.graph_svm`), one score per
  fold seed, mean ± std. An ``.npz`` holds ``embeddings`` [G, D] and ``labels`` [G].
* ``node``: logistic-regression F1-micro / F1-macro
  (:mod:`cl_plugins.integrations.evaluation.node_classification`) on the random 10/10/80
  split (one per seed) and / or the public Planetoid split.
* ``molecule``: fine-tuning of a pre-trained GIN on MoleculeNet with the scaffold split
  (:func:`cl_plugins.integrations.hosts.graph.graphcl_transfer.finetune`); test ROC-AUC at the last epoch and at
  the best validation epoch.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from cl_plugins.integrations.command_line import one_line_errors
from cl_plugins.integrations.hosts.graph.configs import evaluate_parser
from cl_plugins.integrations.hosts.graph.trainer import load_run_model
from cl_plugins.integrations.runs import saved_model
from cl_plugins.integrations.runs.atomic import first_line
from cl_plugins.integrations.runs.results import mean_std


def _tu_embeddings(checkpoint: str) -> tuple[np.ndarray, np.ndarray]:
    from torch_geometric.loader import DataLoader

    from cl_plugins.integrations.hosts.graph import graphcl_tu

    config, model, width = load_run_model(checkpoint, "graphcl_tu", graphcl_tu.TUConfig, graphcl_tu.build_model)
    dataset = graphcl_tu.load_tu(config.dataset, root=config.data_root or None, features=config.features)
    _check_width(checkpoint, config.dataset, dataset.num_features, width)
    emb, y = model.embed_all(DataLoader(dataset, batch_size=512))
    return emb.numpy(), y.numpy().ravel()


def _node_embeddings(checkpoint: str) -> tuple[np.ndarray, Any]:
    from cl_plugins.integrations.hosts.graph import grace

    config, model, width = load_run_model(checkpoint, "grace", grace.GraceConfig, grace.build_model)
    graph = grace.load_planetoid(config.dataset, root=config.data_root or None)[0]
    _check_width(checkpoint, config.dataset, graph.num_features, width)
    return model.embed(graph).numpy(), graph


def _check_width(checkpoint: str, dataset: str, features: int, width: int) -> None:
    if features != width:
        raise ValueError(f"--checkpoint {checkpoint} was trained on {width} node features, but its run's dataset "
                         f"{dataset} has {features}: its cl_plugins.json was edited, or the data changed")


def read_embeddings(path: str, keys: tuple[str, ...]) -> list[np.ndarray]:
    """The arrays ``keys`` of an ``.npz`` of embeddings (as graphcl_tu writes it), or one line naming the file: a
    missing file, another format (a torch file is a zip too), a missing array, embeddings not [N, D] or labels
    not [N]. Never unpickled (``allow_pickle=False``)."""
    try:
        saved = np.load(path, allow_pickle=False)
        found = sorted(saved.files) if isinstance(saved, np.lib.npyio.NpzFile) else None
    except FileNotFoundError:
        raise FileNotFoundError(f"--embeddings {path}: no such file") from None
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"--embeddings {path} is not a readable .npz ({type(exc).__name__}: {first_line(exc)})") \
            from None  # fmt: skip
    missing = [k for k in keys if found is None or k not in found]
    if missing:
        raise ValueError(f"--embeddings {path} is not an .npz of embeddings: it lacks {missing} (has {found}); "
                         "pass the embeddings.npz a graphcl_tu run writes")  # fmt: skip
    try:
        arrays = [saved[k] for k in keys]
    except (ValueError, OSError, EOFError) as exc:  # an object array (pickle), a truncated member
        raise ValueError(f"--embeddings {path}: {first_line(exc)}") from None
    x = arrays[0]
    if x.ndim != 2 or x.dtype.kind not in "fiu" or any(a.ndim != 1 or len(a) != len(x) for a in arrays[1:]):
        raise ValueError(f"--embeddings {path}: expected embeddings [N, D] of numbers and labels [N], got "
                         f"{[(a.shape, str(a.dtype)) for a in arrays]}")  # fmt: skip
    return arrays


def evaluate_tu(args: argparse.Namespace) -> dict[str, Any]:
    from cl_plugins.integrations.evaluation.graph_svm import svm_cv_accuracy

    if args.checkpoint:
        x, y = _tu_embeddings(args.checkpoint)
    else:
        x, y = read_embeddings(args.embeddings, ("embeddings", "labels"))
    accs = [100 * svm_cv_accuracy(x, y, seed=s, folds=args.folds) for s in args.seeds]
    mean, std = mean_std(accs)
    return {"accuracy_per_seed": accs, "accuracy_mean": mean, "accuracy_std": std}


def evaluate_node(args: argparse.Namespace) -> dict[str, Any]:
    from cl_plugins.integrations.hosts.graph.grace import evaluate_embeddings, load_planetoid, summarise

    if args.checkpoint:
        x, graph = _node_embeddings(args.checkpoint)
    else:
        if not args.dataset:
            raise SystemExit("--embeddings needs --dataset (the Planetoid graph supplies labels and the public split)")
        (x,) = read_embeddings(args.embeddings, ("embeddings",))
        graph = load_planetoid(args.dataset)[0]
    return summarise([{"eval": evaluate_embeddings(x, graph, args.split, args.seeds)}])


def evaluate_molecule(args: argparse.Namespace) -> dict[str, Any]:
    from cl_plugins.integrations.hosts.graph.graphcl_transfer import TransferConfig, run

    saved = saved_model.read_info(args.checkpoint, ("graphcl_transfer",), "GraphCL pre-training folder")
    config = saved_model.run_config(saved, TransferConfig, datasets=args.datasets, runseeds=args.runseeds)
    config.input_model, config.finetune_epochs, config.output_dir = args.checkpoint, args.epochs, args.output_dir
    out = run(config)["datasets"]
    return {name: {k: v for k, v in entry.items() if k != "runs"} for name, entry in out.items()}


def build_parser() -> argparse.ArgumentParser:
    return evaluate_parser(__doc__)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    result = {"tu": evaluate_tu, "node": evaluate_node, "molecule": evaluate_molecule}[args.protocol](args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
