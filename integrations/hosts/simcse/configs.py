"""The parsers of ``simcse-main``, ``simcse-train`` and ``simcse-eval``: the command
lines alone, importing nothing heavy, so that ``cl-plugins COMMAND --help`` answers before torch loads; the trainer
and evaluation modules run them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cl_plugins.integrations.command_line import dataclass_parser, new_parser
from cl_plugins.integrations.modalities.text.config import POOLERS, TrainConfig


def train_parser(description: str | None, defaults: dict[str, Any] | None = None) -> argparse.ArgumentParser:
    """``simcse-train``'s command line: one flag per field of :class:`TrainConfig` (``defaults`` override)."""
    return dataclass_parser(TrainConfig, description, defaults)


def evaluate_parser(description: str | None) -> argparse.ArgumentParser:
    """``simcse-eval``'s command line (its module's docstring as ``description``)."""
    parser = new_parser(description)
    parser.add_argument("--model", required=True, help="model folder (Hugging Face or written by our trainer)")
    parser.add_argument("--pooler", choices=POOLERS, help="pooler (default: the trainer's, else cls_before_pooler)")
    parser.add_argument("--tasks", default="sts", help="sts, transfer, full, or comma-separated task names")
    parser.add_argument(
        "--mode",
        default="test",
        choices=["test", "fasttest", "dev"],
        help="test: 10-fold/Adam probes; fasttest: 5-fold/RMSprop; dev: STS-B/SICK-R dev only",
    )
    parser.add_argument("--batch_size", type=int, default=128, help="sentences per encoder call")
    parser.add_argument("--max_length", type=int, help="truncate sentences (default: no truncation, as SimCSE)")
    parser.add_argument("--transfer_limit", type=int, help="subsample transfer training sets (smoke tests only)")
    parser.add_argument(
        "--batching",
        default="distinct",
        choices=["senteval", "distinct"],
        help="distinct (default): each distinct sentence encoded once, unpadded (faster, equal to SentEval's numbers "
        "up to float rounding); senteval: SentEval's batches (its numbers exactly)",
    )
    parser.add_argument(
        "--cache_dir", type=Path, help="embedding cache (default: $CL_PLUGINS_CACHE/senteval_embeddings)"
    )
    parser.add_argument("--no_cache", action="store_true", help="encode everything again, write no cache")
    parser.add_argument("--backend", default="ours", choices=["ours", "senteval"], help="our harness or SentEval")
    parser.add_argument("--output", type=Path, help="write all results as JSON here")
    parser.add_argument("--name", default="model", help="row label of the printed table")
    return parser


def train_then_evaluate_parser(description: str | None) -> argparse.ArgumentParser:
    """``simcse-main``'s command line (its module's docstring as ``description``)."""
    parser = new_parser(description)
    parser.add_argument("--loss", default="macl", help="strategy name (default macl)")
    parser.add_argument(
        "--loss_arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy parameter; default: the strategy's SimCSE preset where it has one (macl: the paper's "
        "tau0=0.05 alpha=2 a0=0.8, no reweighting), else its mapping of --temp",
    )
    parser.add_argument("--temp", type=float, default=0.05, help="SimCSE's temperature, the strategy's host τ")
    parser.add_argument("--paper", action="store_true", help="the paper's settings (GPU, hub, full wiki1m)")
    parser.add_argument(
        "--model", help="encoder folder or hub name (default: all-MiniLM-L6-v2, or bert-base with --paper)"
    )
    parser.add_argument("--train_file", help="training sentences (default: the data pack's wiki1m)")
    parser.add_argument("--output_dir", default="outputs/simcse_main", help="checkpoints, logs and results")
    parser.add_argument("--max_steps", type=int, default=60, help="optimizer steps of the offline default")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per step (SimCSE: 64)")
    parser.add_argument("--eval_steps", type=int, default=30, help="STS-B dev evaluation period (model selection)")
    parser.add_argument(
        "--mode",
        default="fasttest",
        choices=["test", "fasttest"],
        help="transfer probes: fasttest (5-fold, RMSprop) offline; test (10-fold, Adam) with --paper",
    )
    parser.add_argument("--tasks", default="sts,transfer", help="sts, transfer, full or task names")
    parser.add_argument(
        "--transfer_limit",
        type=int,
        help="subsample each transfer task's training data to this many items (smoke tests; default: the full "
        "data, as SentEval); marked in the output",
    )
    parser.add_argument(
        "--batching",
        default="distinct",
        choices=["senteval", "distinct"],
        help="how evaluation sentences are encoded: distinct (default: each distinct sentence once, unpadded, "
        "1.6x faster; equal to SentEval's numbers up to float rounding) or senteval (its batches, exactly)",
    )
    parser.add_argument(
        "--dropout",
        type=float,
        default=0.2,
        help="encoder dropout, the augmentation (MACL's SimCSE setting: 0.2; -1 keeps the model's)",
    )
    parser.add_argument("--seed", type=int, default=42, help="seed of training")
    parser.add_argument(
        "--mixed_precision", default="no", choices=["no", "fp16", "bf16"], help="autocast in training (default: no)"
    )
    parser.add_argument("--skip_before", action="store_true", help="do not evaluate the starting model")
    parser.add_argument("--overwrite", action="store_true", help="replace what --output_dir holds (default: refuse)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --output_dir from its newest checkpoint (same settings)")  # fmt: skip
    return parser
