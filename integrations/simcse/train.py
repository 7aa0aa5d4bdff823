"""Train SimCSE (unsupervised or supervised) with any cl-plugins strategy, on Accelerate.

    accelerate launch -m integrations.simcse.train --model DIR --train_file wiki1m_for_simcse.txt \\
        --loss macl --loss_arg tau0=0.05 --loss_arg alpha=2 --loss_arg a0=0.8

* ``--train_file`` ending in ``.csv`` is supervised (``sent0,sent1,hard_neg``), anything else is one
  sentence per line (unsupervised: each sentence twice, dropout is the augmentation).
* Under several processes the loss gathers embeddings with gradient, so negatives (and MACL's
  alignment) are global; learnable / AMCL temperatures are parameters of the model.
* ``--save_steps`` writes a full training state (model, optimizer, scheduler, RNG, data position)
  to ``OUTPUT/checkpoints/step_N``; ``--resume latest`` (or a path) continues bit for bit.
* Every ``--eval_steps`` the STS-B dev Spearman is computed and the best model is kept in
  ``OUTPUT/best`` (SimCSE's model selection); the final model goes to ``OUTPUT/final``.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

import cl_plugins as clp
from integrations.common import atomic
from integrations.common.accelerate_setup import end_tracking, make_accelerator, start_tracking
from integrations.common.cli import add_dataclass_arguments, host_head_field, new_parser, one_line_errors
from integrations.common.cli import config_from_args as dataclass_config_from_args
from integrations.common.run_guard import guarded
from integrations.common.training import resume_from

from .data import Collator, EpochSampler, TextDataset, read_sentences, read_triples
from .model import POOLERS, SimCSEModel, check_model_path


@dataclass
class TrainConfig:
    model: str = field(metadata={"help": "Hugging Face BERT/RoBERTa checkpoint directory (or hub name online)"})
    train_file: str = field(metadata={"help": "one sentence per line (unsupervised) or sent0,sent1,hard_neg CSV"})
    output_dir: str = field(default="outputs/simcse", metadata={"help": "where checkpoints, logs and models go"})
    loss: str = field(default="infonce", metadata={"help": f"strategy: {', '.join(clp.available_losses())}"})
    loss_args: dict = field(default_factory=dict, metadata={"help": "strategy parameters (see --loss_arg)"})
    temp: float = field(default=0.05, metadata={"help": "SimCSE's temperature: the strategy's host τ (infonce's τ)"})
    pooler: str = field(default="cls", metadata={"help": f"one of {', '.join(POOLERS)}"})
    mlp_only_train: bool = field(default=False, metadata={"help": "use the MLP head in training only"})
    host_head: bool = host_head_field()
    do_mlm: bool = field(default=False, metadata={"help": "add the MLM auxiliary objective"})
    mlm_weight: float = field(default=0.1, metadata={"help": "weight of the MLM objective"})
    hard_negative_weight: float = field(default=0.0, metadata={"help": "logit bias of each anchor's hard negative"})
    dropout: float = field(default=-1.0, metadata={"help": "encoder dropout (the augmentation); -1 keeps the model's"})
    max_seq_length: int = field(default=32, metadata={"help": "truncate sentences to this many tokens"})
    batch_size: int = field(default=64, metadata={"help": "sentences per process and step"})
    learning_rate: float = field(default=3e-5, metadata={"help": "peak learning rate (linear decay)"})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay (never on temperatures)"})
    warmup_ratio: float = field(default=0.0, metadata={"help": "fraction of steps of linear warm-up"})
    epochs: float = field(default=1.0, metadata={"help": "passes over the training data"})
    max_steps: int = field(default=-1, metadata={"help": "stop after this many optimizer steps (-1: epochs)"})
    max_train_samples: int = field(default=-1, metadata={"help": "use only the first N training items (-1: all)"})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "micro-batches per optimizer step"})
    mixed_precision: str = field(default="no", metadata={"help": "no, fp16 or bf16"})
    seed: int = field(default=42, metadata={"help": "seed of initialisation, data order and dropout"})
    eval_steps: int = field(default=125, metadata={"help": "STS-B dev evaluation every N steps (0: never)"})
    save_steps: int = field(default=0, metadata={"help": "full training-state checkpoint every N steps (0: never)"})
    resume: str = field(default="", metadata={"help": "'latest' or a checkpoint folder to continue from"})
    overwrite: bool = field(default=False, metadata={"help": "replace what --output_dir holds (default: refuse)"})
    log_with: str = field(default="tensorboard", metadata={"help": "Accelerate tracker (tensorboard, wandb, none)"})
    progress: bool = field(default=True, metadata={"help": "show a progress bar"})


class TrainState:
    """Counters saved with every checkpoint (registered with Accelerate)."""

    def __init__(self) -> None:
        self.step, self.epoch, self.step_in_epoch, self.best = 0, 0, 0, -math.inf
        self.dev_curve: list[tuple[int, float]] = []  # (step, STS-B dev Spearman) of every evaluation

    def state_dict(self) -> dict[str, Any]:
        return dict(step=self.step, epoch=self.epoch, step_in_epoch=self.step_in_epoch, best=self.best,
                    dev_curve=[list(point) for point in self.dev_curve])  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.epoch = state["step"], state["epoch"]
        self.step_in_epoch, self.best = state["step_in_epoch"], state["best"]
        self.dev_curve = [tuple(point) for point in state.get("dev_curve", [])]  # absent before it was kept


def alignment_uniformity(z1: torch.Tensor, z2: torch.Tensor) -> tuple[float, float]:
    """Wang & Isola: E||f(x) - f(y)||^2 over positives, log E exp(-2 ||f(x) - f(y)||^2) over the batch."""
    a, b = F.normalize(z1.float(), dim=1), F.normalize(z2.float(), dim=1)
    align = (a - b).pow(2).sum(1).mean()
    uniform = torch.pdist(a, p=2).pow(2).mul(-2).exp().mean().log() if len(a) > 1 else torch.tensor(0.0)
    return float(align), float(uniform)


def save_model(model: SimCSEModel, tokenizer: Any, path: Path, config: TrainConfig) -> None:
    """Hugging Face folder of the encoder + tokenizer, the MLP head, and our settings."""
    path.mkdir(parents=True, exist_ok=True)
    # with MLM the whole masked-LM model (AutoModel still loads its encoder; the bias metrics need the head)
    (model.backbone if model.do_mlm else model.encoder).save_pretrained(path)
    tokenizer.save_pretrained(path)
    if model.mlp is not None:
        torch.save(model.mlp.state_dict(), path / "simcse_mlp.pt")
    settings = dict(
        pooler=model.pooler,
        mlp_only_train=model.mlp_only_train,
        head=model.head,
        loss=config.loss,
        loss_args=config.loss_args,
    )
    (path / "cl_plugins_simcse.json").write_text(json.dumps(settings, indent=2))


def dev_score(model: SimCSEModel, tokenizer: Any, max_length: int | None = None) -> float:
    from integrations.senteval.sts import eval_relatedness

    encode = lambda sents: model.encode(list(sents), tokenizer, max_length=max_length).numpy()  # noqa: E731
    return eval_relatedness(encode, "STSBenchmark", ("dev",))["dev"]


def latest_checkpoint(output_dir: Path) -> Path | None:
    return atomic.latest_complete(output_dir / "checkpoints", "step")


def build_strategy(config: TrainConfig) -> clp.ContrastiveLoss:
    """The strategy of a SimCSE (or MABEL) run: host τ ``--temp``, z1 anchors against z2 (``cross_view``),
    the papers' SimCSE settings (the strategies' ``"simcse"`` presets), the encoder's width; ``--loss_arg`` wins."""
    from transformers import AutoConfig

    args = dict(config.loss_args)
    if config.hard_negative_weight:
        args["hard_negative_weight"] = config.hard_negative_weight
    width = AutoConfig.from_pretrained(config.model).hidden_size
    return clp.build_host_loss(config.loss, host_tau=config.temp, layout="cross_view", feature_dim=width,
                               preset="simcse", **args)  # fmt: skip


def dropout_overrides(config: TrainConfig) -> dict[str, float]:
    """Encoder config overrides for ``--dropout`` (none when -1: the checkpoint's own dropout)."""
    if config.dropout < 0:
        return {}
    return dict(hidden_dropout_prob=config.dropout, attention_probs_dropout_prob=config.dropout)


def build_model(config: TrainConfig) -> SimCSEModel:
    """SimCSE's model of ``config``: the encoder of ``config.model``, its pooler and head, the strategy."""
    return SimCSEModel.from_pretrained(
        config.model,
        build_strategy(config),
        do_mlm=config.do_mlm,
        pooler=config.pooler,
        mlp_only_train=config.mlp_only_train,
        mlm_weight=config.mlm_weight,
        config_overrides=dropout_overrides(config),
        keep_host_head=config.host_head,
    )


@guarded
def train(
    config: TrainConfig,
    *,
    items: list[tuple[str, ...]] | list[str] | None = None,
    model: SimCSEModel | None = None,
    project: str = "simcse",
) -> dict[str, Any]:
    """Run training; returns a summary (steps, best dev Spearman, paths).

    ``items`` (default: read from ``config.train_file``) and ``model`` (default: :func:`build_model`)
    let other objectives on the same encoder (MABEL) run this loop unchanged.
    """
    from accelerate.utils import set_seed
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    check_model_path(config.model)
    out = Path(config.output_dir)
    # find_unused_parameters: the checkpoint's own pooler layer is used by none of SimCSE's poolers
    accelerator = make_accelerator(
        out, config.gradient_accumulation_steps, config.mixed_precision, config.log_with, find_unused_parameters=True
    )
    set_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(config.model)

    limit = None if config.max_train_samples < 0 else config.max_train_samples
    if items is None:
        supervised = config.train_file.endswith(".csv")
        items = read_triples(config.train_file, limit) if supervised else read_sentences(config.train_file, limit)
    elif limit is not None:
        items = items[:limit]
    dataset = TextDataset(items)
    sampler = EpochSampler(len(dataset), config.seed)
    collate = Collator(tokenizer, config.max_seq_length, do_mlm=config.do_mlm, seed=config.seed)
    # its own generator: creating an iterator draws a seed, which must not move the global (dropout) RNG,
    # or a resumed run would see different dropout masks than an uninterrupted one
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        sampler=sampler,
        collate_fn=collate,
        drop_last=True,
        generator=torch.Generator().manual_seed(config.seed),
    )

    if model is None:
        model = build_model(config)
    optimizer = torch.optim.AdamW(clp.param_groups(model, config.weight_decay), lr=config.learning_rate)

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps_per_epoch = max(1, len(loader) // config.gradient_accumulation_steps)  # per process, after sharding
    total = config.max_steps if config.max_steps > 0 else math.ceil(config.epochs * steps_per_epoch)
    scheduler = accelerator.prepare(get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total), total))
    state = TrainState()
    accelerator.register_for_checkpointing(state)

    if config.resume:
        path = latest_checkpoint(out) if config.resume == "latest" else Path(config.resume)
        if path is None or not atomic.is_complete(path):
            raise FileNotFoundError(f"--resume {config.resume}: no complete checkpoint under {out / 'checkpoints'}")
        resume_from(accelerator, path, optimizer, (scheduler,))
        accelerator.print(f"resumed from {path} at step {state.step}")
        if state.step > total:
            raise ValueError(f"--resume: {path} is at step {state.step}, past the {total} steps of this run "
                             "(--max_steps / --epochs); its model would be reported as a shorter run's")  # fmt: skip

    start_tracking(accelerator, project, asdict(config))
    unwrapped: SimCSEModel = accelerator.unwrap_model(model)
    # a schedule counted in epochs needs the steps of an epoch (Accelerate steps on a short last accumulation too)
    clp.set_epoch_length(unwrapped.loss_fn, math.ceil(len(loader) / config.gradient_accumulation_steps))
    bar = tqdm(
        total=total,
        initial=state.step,
        disable=not (config.progress and accelerator.is_local_main_process),
        desc=f"{project} {config.loss}",
    )
    model.train()
    while state.step < total:
        sampler.set_epoch(state.epoch)
        collate.epoch = state.epoch
        batches = accelerator.skip_first_batches(loader, state.step_in_epoch * config.gradient_accumulation_steps)
        for batch in batches:
            with accelerator.accumulate(model):
                loss = model(**batch)
                accelerator.backward(loss)
                optimizer.step()
                if accelerator.sync_gradients:
                    scheduler.step()
                optimizer.zero_grad()
            if not accelerator.sync_gradients:
                continue
            clp.after_optimizer_step(unwrapped.loss_fn)
            state.step += 1
            state.step_in_epoch += 1
            bar.update(1)
            logs = {"train/loss": float(loss.detach()), "train/lr": scheduler.get_last_lr()[0]}
            logs.update({f"train/{k}": v for k, v in unwrapped.loss_fn.stats.items() if k != "loss"})
            logs.update({f"train/{k}": v for k, v in getattr(unwrapped, "last_terms", {}).items()})
            if unwrapped.last_embeddings is not None:
                logs["train/align"], logs["train/uniformity"] = alignment_uniformity(*unwrapped.last_embeddings)
            accelerator.log(logs, step=state.step)
            bar.set_postfix(loss=f"{logs['train/loss']:.4f}", tau=f"{logs.get('train/tau_mean', float('nan')):.4f}")
            if config.eval_steps and state.step % config.eval_steps == 0:
                _evaluate_and_keep_best(accelerator, unwrapped, tokenizer, state, out, config)
            if config.save_steps and state.step % config.save_steps == 0:
                atomic.save_state(accelerator, out / "checkpoints" / f"step_{state.step}")
            if state.step >= total:
                break
        else:
            state.epoch += 1
            state.step_in_epoch = 0
    bar.close()
    if config.eval_steps and state.step % config.eval_steps:  # not already evaluated at this step
        _evaluate_and_keep_best(accelerator, unwrapped, tokenizer, state, out, config)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        with atomic.folder(out / "final") as tmp:
            save_model(unwrapped, tokenizer, tmp, config)
    end_tracking(accelerator)
    return dict(
        steps=state.step,
        strategy=unwrapped.loss_fn.hyperparameters(),  # what trained: preset, --temp and --loss_arg applied
        best_stsb_dev=state.best,
        dev_curve=state.dev_curve,
        final=str(out / "final"),
        best=str(out / "best") if config.eval_steps else None,
    )


def _evaluate_and_keep_best(
    accelerator: Any, model: SimCSEModel, tokenizer: Any, state: TrainState, out: Path, config: TrainConfig
) -> None:
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        score = dev_score(model, tokenizer)
        accelerator.log({"eval/stsb_dev_spearman": score}, step=state.step)
        state.dev_curve.append((state.step, score))
        if score > state.best:
            state.best = score
            with atomic.folder(out / "best") as tmp:  # the previous best stays until this one is complete
                save_model(model, tokenizer, tmp, config)
        accelerator.print(f"step {state.step}: STS-B dev Spearman {score:.2f} (best {state.best:.2f})")
    model.train()
    accelerator.wait_for_everyone()


def build_parser(defaults: dict[str, Any] | None = None) -> argparse.ArgumentParser:
    parser = new_parser(__doc__)
    return add_dataclass_arguments(parser, TrainConfig, defaults)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return dataclass_config_from_args(TrainConfig, args)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    config = config_from_args(build_parser().parse_args(argv))
    summary = train(config)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
