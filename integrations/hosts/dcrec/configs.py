"""DCRec's run configuration and presets, and the parser of ``dcrec-eval``: the command lines alone, importing
nothing heavy, so that ``cl-plugins COMMAND --help`` answers before torch loads; the trainer modules run them."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import new_parser
from cl_plugins.integrations.runs.config import RunConfig, output_dir_field

#: the selection rows: a validation row per user, or DCRec's own selection on the test rows (labelled)
SELECTIONS = ("validation", "test")


#: ``run_DCRec.py``'s settings per data set ("default": its values for a data set it does not name)
PRESETS: dict[str, dict[str, float]] = {
    "default": dict(batch_size=512, hidden_dropout=0.3, attn_dropout=0.3, graph_dropout=0.3, cl_weight=1e-4,
                    weight_mean=0.5, kl_weight=1.0, sim_group=4, cl_temp=1.0),
    "reddit": dict(batch_size=128, hidden_dropout=0.3, attn_dropout=0.3, graph_dropout=0.3, cl_weight=1.0,
                   weight_mean=0.5, kl_weight=1.0, sim_group=4, cl_temp=1.0),
    "beauty": dict(batch_size=2048, hidden_dropout=0.5, attn_dropout=0.1, graph_dropout=0.5, cl_weight=0.1,
                   weight_mean=0.5, kl_weight=1e-2, sim_group=4, cl_temp=1.0),
    "sports": dict(batch_size=512, hidden_dropout=0.5, attn_dropout=0.3, graph_dropout=0.5, cl_weight=0.1,
                   weight_mean=0.5, kl_weight=1e-2, sim_group=4, cl_temp=1.0),
    "ml-20m": dict(batch_size=512, hidden_dropout=0.5, attn_dropout=0.5, graph_dropout=0.5, cl_weight=0.1,
                   weight_mean=0.4, kl_weight=1e-2, sim_group=4, cl_temp=0.8),
}  # fmt: skip
PRESET_FIELDS = tuple(PRESETS["default"])


def preset_for(dataset: str) -> dict[str, float]:
    if dataset in PRESETS:
        return PRESETS[dataset]
    return PRESETS["ml-20m"] if dataset.startswith("ml-") else PRESETS["default"]


@strict_flags
@dataclass(kw_only=True)
class DCRecConfig(RunConfig):
    dataset: str = field(default="ml-100k", metadata={"help": "ml-100k, ml-1m (MovieLens files) or a DCRec split name"})
    selection: str = field(
        default="validation", metadata={"help": "validation, or test: DCRec's test-set selection (labelled)"}
    )
    seeds: list[int] = field(default_factory=lambda: [2020], metadata={"help": "one run per seed (DCRec: 2020)"})
    epochs: int = field(default=300, metadata={"help": "maximum epochs"})
    patience: int = field(default=20, metadata={"help": "stop after this many epochs without improvement (0: never)"})
    select_metric: str = field(
        default="pop100/hr@1", metadata={"help": "PROTOCOL/METRIC that picks the epoch (full/... or pop<N>/...)"}
    )
    negatives: int = field(default=100, metadata={"help": "popularity-sampled negatives per row (DCRec: 100)"})
    eval_every: int = field(default=1, metadata={"help": "evaluate the selection rows every N epochs"})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate"})
    batch_size: int = field(default=-1, metadata={"help": "training rows per batch and process (-1: preset)"})
    eval_batch_size: int = field(default=256, metadata={"help": "rows per evaluation batch"})
    max_length: int = field(default=50, metadata={"help": "history length (the most recent items)"})
    hidden_size: int = field(default=64, metadata={"help": "embedding and transformer width"})
    n_layers: int = field(default=2, metadata={"help": "transformer layers"})
    n_heads: int = field(default=2, metadata={"help": "attention heads"})
    inner_size: int = field(default=256, metadata={"help": "feed-forward width"})
    hidden_dropout: float = field(default=-1.0, metadata={"help": "dropout of embeddings and blocks (-1: preset)"})
    attn_dropout: float = field(default=-1.0, metadata={"help": "attention dropout (-1: preset)"})
    graph_dropout: float = field(default=-1.0, metadata={"help": "GCN edge dropout in training (-1: preset)"})
    cl_weight: float = field(default=-1.0, metadata={"help": "graphcl_coefficient of the CL term (-1: preset)"})
    cl_temp: float = field(default=-1.0, metadata={"help": "DCRec's τ, the strategy's host temperature (-1: preset)"})
    weight_mean: float = field(default=-1.0, metadata={"help": "mean of the conformity weights (-1: preset)"})
    kl_weight: float = field(default=-1.0, metadata={"help": "weight of the KL term (-1: preset)"})
    sim_group: int = field(default=-1, metadata={"help": "k of the similarity graph's top-(k+1) (-1: preset)"})
    fusion: bool = field(default=True, metadata={"help": "attention fusion of the three views (graph_view_fusion)"})
    max_train_rows: int = field(default=0, metadata={"help": "use only the first N training rows (0: all; smoke runs)"})
    max_eval_rows: int = field(default=0, metadata={"help": "evaluate only the first N rows (0: all; smoke runs)"})
    exclude_history: bool = field(default=False, metadata={"help": "drop history items from the full ranking"})
    output_dir: str = output_dir_field("outputs/dcrec", "a seed_<s>/ folder per seed, results.json")

    def resolved(self) -> DCRecConfig:
        """The config with every preset field (-1) filled from the data set's preset."""
        preset = preset_for(self.dataset)
        values = asdict(self)
        for name in PRESET_FIELDS:
            if values[name] == -1:
                values[name] = type(values[name])(preset[name])
        out = DCRecConfig(**values)
        out.check()
        return out

    def check(self) -> None:
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        protocol, _, metric = self.select_metric.partition("/")
        if not (protocol == "full" or protocol == f"pop{self.negatives}") or not metric:
            raise ValueError(
                f"select_metric must look like pop{self.negatives}/hr@1 or full/ndcg@10, got {self.select_metric!r}"
            )
        if self.epochs < 1 or self.eval_every < 1 or self.patience < 0 or not self.seeds:
            raise ValueError("epochs and eval_every must be >= 1, patience >= 0, and at least one seed given")


def evaluate_parser(description: str | None) -> argparse.ArgumentParser:
    """``dcrec-eval``'s command line (its module's docstring as ``description``)."""
    parser = new_parser(description)
    parser.add_argument("run_dir", help="a folder written by examples/dcrec_rec.py (holds model/)")
    parser.add_argument("--split", choices=("valid", "test", "both"), default="both", help="rows to evaluate")
    parser.add_argument(
        "--exclude_history",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="drop history items from the full ranking",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the pop100 negative draw")
    return parser
