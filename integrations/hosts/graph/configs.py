"""The run configurations of the graph trainers (GraphCL TU, GraphCL transfer, GRACE) and the parser of
``graph-eval``: the command lines alone, importing nothing heavy, so that ``cl-plugins COMMAND --help`` answers
before torch loads; the trainer modules run them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import ClassVar

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import host_head_field, new_parser
from cl_plugins.integrations.runs.config import RunConfig, output_dir_field


@strict_flags
@dataclass(kw_only=True)
class TUConfig(RunConfig):
    dataset: str = field(default="MUTAG", metadata={"help": "TU dataset name (folder <data root>/graphs/tu/NAME/raw)"})
    data_root: str = field(
        default="", metadata={"help": "folder holding NAME/raw (default $CL_PLUGINS_DATA/graphs/tu)"}
    )
    features: str = field(default="auto", metadata={"help": "node features: auto, labels, degree or constant"})
    tau: float = field(default=0.2, metadata={"help": "GraphCL's temperature (mapped onto the strategy's own)"})
    aug: str = field(
        default="random4", metadata={"help": "augmentation: dnodes, pedges, subgraph, mask_nodes, random2/3/4"}
    )
    aug_ratio: float = field(default=0.2, metadata={"help": "fraction of nodes / edges an augmentation touches"})
    hidden: int = field(default=32, metadata={"help": "GIN hidden units per layer"})
    num_layers: int = field(default=3, metadata={"help": "GIN layers"})
    epochs: int = field(default=20, metadata={"help": "training epochs"})
    batch_size: int = field(default=128, metadata={"help": "graphs per batch (per process)"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4], metadata={"help": "seeds (training and folds)"})
    eval_folds: int = field(default=10, metadata={"help": "outer folds of the SVM evaluation"})
    svm_search: bool = field(default=True, metadata={"help": "grid-search C (GraphCL's search=True)"})
    output_dir: str = output_dir_field("outputs/graphcl_tu", "a seed_<s>/ folder per seed, results.json")
    host_head: bool = host_head_field()


@strict_flags
@dataclass(kw_only=True)
class TransferConfig(RunConfig):
    tau: float = field(default=0.1, metadata={"help": "GraphCL transfer temperature (mapped onto the strategy's)"})
    aug1: str = field(
        default="random", metadata={"help": "augmentation of view 1 (none, dropN, permE, maskN, subgraph, random)"}
    )
    aug2: str = field(default="random", metadata={"help": "augmentation of view 2"})
    aug_ratio: float = field(default=0.2, metadata={"help": "fraction of nodes / edges an augmentation touches"})
    num_layers: int = field(default=5, metadata={"help": "GIN layers"})
    emb_dim: int = field(default=300, metadata={"help": "GIN width"})
    pretrain: bool = field(default=True, metadata={"help": "pre-train (--no-pretrain: fine-tune from scratch)"})
    input_model: str = field(default="", metadata={
        "help": "a pre-trained GIN (skips pre-training): our pre-training file, or Hu et al.'s / GraphCL's released "
                "model_gin/*.pth (keys converted), saved on any device"})  # fmt: skip
    pretrain_molecules: int = field(default=0, metadata={"help": "use the first N ZINC SMILES (0: all)"})
    pretrain_epochs: int = field(default=2, metadata={"help": "pre-training epochs (GraphCL: 100)"})
    pretrain_batch_size: int = field(default=256, metadata={"help": "molecules per pre-training batch"})
    pretrain_lr: float = field(default=1e-3, metadata={"help": "pre-training Adam learning rate"})
    pretrain_seed: int = field(default=0, metadata={"help": "pre-training seed (GraphCL fixes 0)"})
    datasets: list[str] = field(
        default_factory=lambda: ["bbbp", "tox21", "sider", "clintox", "bace"],
        metadata={"help": "MoleculeNet sets (folders molecules/dataset/NAME/raw)"},
    )
    runseeds: list[int] = field(default_factory=lambda: list(range(10)), metadata={"help": "fine-tuning seeds"})
    finetune_epochs: int = field(default=100, metadata={"help": "fine-tuning epochs"})
    finetune_batch_size: int = field(default=32, metadata={"help": "molecules per fine-tuning batch"})
    finetune_lr: float = field(default=1e-3, metadata={"help": "fine-tuning Adam learning rate"})
    dropout: float = field(default=0.5, metadata={"help": "GIN dropout while fine-tuning"})
    data_root: str = field(
        default="", metadata={"help": "folder holding dataset/ and zinc/ (default $CL_PLUGINS_DATA/molecules)"}
    )
    #: a resume may extend pre-training (the loop's plan) like --epochs elsewhere
    RESUME_MAY_CHANGE: ClassVar[frozenset[str]] = frozenset({"pretrain_epochs"})
    output_dir: str = output_dir_field("outputs/graphcl_transfer", "pretrain/, model/, results.json")
    host_head: bool = host_head_field()


@strict_flags
@dataclass(kw_only=True)
class GraceConfig(RunConfig):
    dataset: str = field(
        default="Cora", metadata={"help": "Planetoid name (folder <data root>/graphs/planetoid/NAME/raw)"}
    )
    data_root: str = field(
        default="", metadata={"help": "folder holding NAME/raw (default $CL_PLUGINS_DATA/graphs/planetoid)"}
    )
    recipe: str = field(
        default="grace",
        metadata={"help": "grace: GRACE's config.yaml and evaluation; pygcl: PyGCL's examples/GRACE.py (32-wide GCN, "
                  "1000 epochs, its logistic-regression evaluator on its 10/80/10 split, one split per training "
                  "seed), the temperature-free paper's recipe"},
    )  # fmt: skip
    tau: float = field(default=-1.0, metadata={"help": "GRACE's temperature (-1: the dataset's preset)"})
    epochs: int = field(default=-1, metadata={"help": "training epochs (-1: the dataset's preset)"})
    lr: float = field(default=-1.0, metadata={"help": "Adam learning rate (-1: preset)"})
    seeds: list[int] = field(default_factory=lambda: [0], metadata={"help": "training seeds"})
    eval_seeds: int = field(default=20, metadata={"help": "classifier splits / seeds per trained encoder"})
    split: str = field(default="both", metadata={"help": "evaluation split: random (10/10/80), public or both"})
    checkpoint_every: int = field(default=50, metadata={"help": "checkpoint every N epochs (and at the end)"})
    output_dir: str = output_dir_field("outputs/grace", "a seed_<s>/ folder per seed, results.json")
    host_head: bool = host_head_field()


def evaluate_parser(description: str | None) -> argparse.ArgumentParser:
    """``graph-eval``'s command line (its module's docstring as ``description``)."""
    parser = new_parser(description)
    sub = parser.add_subparsers(dest="protocol", required=True)
    tu = sub.add_parser("tu", help="GraphCL / InfoGraph SVM accuracy")
    src = tu.add_mutually_exclusive_group(required=True)
    src.add_argument("--embeddings", help=".npz with embeddings and labels (written by graphcl_tu)")
    src.add_argument("--checkpoint", help="seed_<s>/model folder written by graphcl_tu")
    tu.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="fold-shuffling seeds")
    tu.add_argument("--folds", type=int, default=10, help="outer cross-validation folds")
    node = sub.add_parser("node", help="GRACE logistic-regression F1")
    src = node.add_mutually_exclusive_group(required=True)
    src.add_argument("--embeddings", help=".npz with node embeddings (written by grace)")
    src.add_argument("--checkpoint", help="seed_<s>/model folder written by grace")
    node.add_argument("--dataset", default="", help="Planetoid name (needed with --embeddings)")
    node.add_argument("--split", default="both", choices=["random", "public", "both"], help="evaluation split")
    node.add_argument("--seeds", type=int, default=20, help="number of split / classifier seeds")
    mol = sub.add_parser("molecule", help="MoleculeNet fine-tuning ROC-AUC")
    mol.add_argument("--checkpoint", required=True, help="model/ folder of graphcl_transfer (or its run)")
    mol.add_argument("--datasets", nargs="+", default=["bbbp", "tox21", "sider", "clintox", "bace"], help="sets")
    mol.add_argument("--runseeds", type=int, nargs="+", default=list(range(10)), help="fine-tuning seeds")
    mol.add_argument("--epochs", type=int, default=100, help="fine-tuning epochs")
    mol.add_argument("--output_dir", default="outputs/graph_eval_molecule", help="where results.json goes")
    return parser
