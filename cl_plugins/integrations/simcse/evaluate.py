"""Evaluate a sentence encoder as SimCSE does: STS12-16, STS-B, SICK-R and the transfer tasks.

    python -m cl_plugins.integrations.simcse.evaluate --model DIR --pooler cls_before_pooler --tasks sts --mode test
    python -m cl_plugins.integrations.simcse.evaluate --model outputs/simcse/best --tasks sts,transfer --mode fasttest

``DIR`` is any Hugging Face BERT/RoBERTa folder, or a folder written by our trainer (its pooler
and MLP head are then read from its ``cl_plugins.json`` unless ``--pooler`` overrides them).
Data come from ``$CL_PLUGINS_DATA/sentence/SentEval/data/downstream`` (SentEval's layout).
``--backend senteval`` runs an importable ``senteval`` package instead of our harness.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.common import atomic, saved_model
from cl_plugins.integrations.common.cli import one_line_errors
from cl_plugins.integrations.senteval import engine

from .configs import evaluate_parser
from .model import HEAD_WEIGHTS, POOLERS, SimCSEModel, check_model_path, pretrained
from .sentence_encoder import SentenceEncoder

#: the trainers whose saved models are sentence encoders
TEXT_TRAINERS = ("simcse", "mabel")


class _NoLoss(torch.nn.Module):
    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise RuntimeError("this model was loaded for evaluation only")


def load_encoder(
    path: str | Path,
    pooler: str | None = None,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "cpu",
) -> SentenceEncoder:
    """An ``encode(list[str]) -> np.ndarray`` callable for the model in ``path`` (with a cache fingerprint)."""
    from transformers import AutoModel, AutoTokenizer

    settings = trained_settings(Path(path))
    check_model_path(str(path))
    path = Path(path)
    chosen = pooler or settings.get("pooler", "cls_before_pooler")
    if chosen not in POOLERS:
        raise ValueError(f"--pooler must be one of {list(POOLERS)}, got {chosen!r}")
    head = settings.get("head", "simcse")
    model = SimCSEModel(pretrained(AutoModel, path), _NoLoss(), pooler=chosen,
                        mlp_only_train=settings.get("mlp_only_train", False), head=head)  # fmt: skip
    if model.mlp is not None:
        if not (path / HEAD_WEIGHTS).exists():
            raise FileNotFoundError(f"pooler 'cls' needs the head {path / HEAD_WEIGHTS}; use --pooler "
                                    "cls_before_pooler for a checkpoint without one")  # fmt: skip
        weights = saved_model.read_weights(path / HEAD_WEIGHTS, "sentence encoder's head")
        saved_model.load_into(model.mlp, weights, path / HEAD_WEIGHTS, f"{head} head")
    model.to(device).eval()
    tokenizer = pretrained(AutoTokenizer, path)
    settings = {"pooler": chosen, "mlp_only_train": model.mlp_only_train, "head": head}
    return SentenceEncoder(model, tokenizer, batch_size, max_length, settings)


def trained_settings(path: Path) -> dict[str, Any]:
    """The pooler and head a folder of our text trainers was trained with; {} for any other Hugging Face folder."""
    if not saved_model.is_saved_model(path):
        return {}
    return saved_model.read_info(path, TEXT_TRAINERS, "sentence encoder").model


def run_senteval_package(encode, tasks: list[str], mode: str) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    """The original SentEval (if importable), with SimCSE's parameters."""
    import senteval  # noqa: PLC0415

    from cl_plugins.integrations.common.paths import data_path

    task_path = str(data_path("sentence/SentEval/data"))
    params = {"task_path": task_path, "usepytorch": True, "kfold": 10 if mode == "test" else 5}
    params["classifier"] = (
        {"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4}
        if mode == "test"
        else {"nhid": 0, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2}
    )

    def batcher(_params, batch):  # type: ignore[no-untyped-def]
        return encode([" ".join(words) for words in batch])

    se = senteval.engine.SE(params, batcher, lambda p, s: None)
    return se.eval(tasks)


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = evaluate_parser(__doc__)
    args = parser.parse_args(argv)

    encode = load_encoder(args.model, args.pooler, args.batch_size, args.max_length)
    tasks = engine.expand_tasks(args.tasks)
    if args.backend == "senteval":
        results = run_senteval_package(encode, tasks, args.mode)
    else:
        cache = False if args.no_cache else (args.cache_dir or True)
        results = engine.evaluate(encode, tasks, args.mode, transfer_limit=args.transfer_limit,
                                  batching=args.batching, cache=cache)  # fmt: skip
    print(engine.format_table({args.name: results}))
    if args.output:
        atomic.write_text(args.output, json.dumps(results, indent=2, default=lambda o: float(np.asarray(o))))
    return results


if __name__ == "__main__":
    main()
