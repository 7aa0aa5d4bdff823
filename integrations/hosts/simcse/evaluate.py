"""Evaluate a sentence encoder as SimCSE does: STS12-16, STS-B, SICK-R and the transfer tasks.

    cl-plugins simcse-eval --model DIR --pooler cls_before_pooler --tasks sts --mode test
    cl-plugins simcse-eval --model outputs/simcse/best --tasks sts,transfer --mode fasttest

``DIR`` is any Hugging Face BERT/RoBERTa folder, or a folder written by our trainer (its pooler
and MLP head are then read from its ``cl_plugins.json`` unless ``--pooler`` overrides them).
Data come from ``$CL_PLUGINS_DATA/sentence/SentEval/data/downstream`` (SentEval's layout).
``--backend senteval`` runs an importable ``senteval`` package instead of our harness.
"""

from __future__ import annotations

import json

import numpy as np

from cl_plugins.integrations.command_line import one_line_errors
from cl_plugins.integrations.evaluation.senteval import engine
from cl_plugins.integrations.hosts.simcse.configs import evaluate_parser
from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder
from cl_plugins.integrations.runs import atomic


def run_senteval_package(encode, tasks: list[str], mode: str) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    """The original SentEval (if importable), with SimCSE's parameters."""
    import senteval  # noqa: PLC0415

    from cl_plugins.integrations.data.catalogue import data_path

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
