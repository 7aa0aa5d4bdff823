"""The contrastive sentence trainer: a BERT / RoBERTa sentence encoder trained with any cl-plugins strategy on
Accelerate, in SimCSE's recipe (MABEL's trainer is this one with its own model and data).

* Training items of one sentence are unsupervised (each sentence twice, dropout is the augmentation); items
  ``(sent0, sent1, hard_neg)`` are supervised.
* Under several processes the loss gathers embeddings with gradient, so negatives (and MACL's
  alignment) are global; learnable / AMCL temperatures are parameters of the model.
* ``save_steps`` writes a full training state (model, optimizer, scheduler, RNG, data position)
  to ``OUTPUT/checkpoints/step_N``; ``resume`` continues bit for bit from the newest.
* Every ``eval_steps`` the STS-B dev Spearman is computed and the best model is kept in
  ``OUTPUT/best`` (SimCSE's model selection); the final model goes to ``OUTPUT/model``.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

import cl_plugins as clp
from cl_plugins.integrations.modalities.text.config import TrainConfig
from cl_plugins.integrations.modalities.text.data import (
    Collator,
    EpochSampler,
    TokenizedDataset,
    load_rows,
    rows_of,
    tokenize_rows,
)
from cl_plugins.integrations.modalities.text.encoder import HEAD_WEIGHTS, SimCSEModel, check_model_path, pretrained
from cl_plugins.integrations.modalities.text.export import write_modules
from cl_plugins.integrations.runs import saved_model
from cl_plugins.integrations.runs.accelerate_setup import end_tracking, make_accelerator
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.integrations.runs.training import Hooks, Plan, Run, RunState, fit


def alignment_uniformity(z1: torch.Tensor, z2: torch.Tensor) -> tuple[float, float]:
    """Wang & Isola: E||f(x) - f(y)||^2 over positives, log E exp(-2 ||f(x) - f(y)||^2) over the batch."""
    a, b = F.normalize(z1.float(), dim=1), F.normalize(z2.float(), dim=1)
    align = (a - b).pow(2).sum(1).mean()
    uniform = torch.pdist(a, p=2).pow(2).mul(-2).exp().mean().log() if len(a) > 1 else torch.tensor(0.0)
    return float(align), float(uniform)


def save_model(model: SimCSEModel, tokenizer: Any, path: Path, config: TrainConfig, trainer: str = "simcse",
               records: dict[str, Any] | None = None) -> None:
    """``path`` as a saved model (:mod:`cl_plugins.integrations.runs.saved_model`) that is also a Hugging Face folder
    (encoder + tokenizer) and a sentence-transformers folder (:mod:`.export`); the head in ``head.safetensors``."""

    def hugging_face_and_head(tmp: Path) -> None:
        # with MLM the whole masked-LM model (AutoModel still loads its encoder; the bias metrics need the head)
        (model.backbone if model.do_mlm else model.encoder).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if model.mlp is not None:
            saved_model.write_weights(model.mlp.state_dict(), tmp / HEAD_WEIGHTS)
        eval_head = model.mlp if model.mlp is not None and not model.mlp_only_train else None
        write_modules(tmp, model.pooler, eval_head, model.encoder.config)

    settings = {"pooler": model.pooler, "mlp_only_train": model.mlp_only_train, "head": model.head,
                "do_mlm": model.do_mlm}  # fmt: skip
    saved_model.write(path, trainer, model=settings, run=asdict(config), weights=None, records=records,
                      extra=hugging_face_and_head)  # fmt: skip


def dev_score(model: SimCSEModel, tokenizer: Any, max_length: int | None = None) -> float:
    from cl_plugins.integrations.evaluation.senteval.sts import eval_relatedness

    def encode(sents: list[str]) -> Any:
        return model.encode(list(sents), tokenizer, max_length=max_length).numpy()

    return eval_relatedness(encode, "STSBenchmark", ("dev",))["dev"]


def build_strategy(config: TrainConfig) -> clp.ContrastiveLoss:
    """The strategy of a SimCSE (or MABEL) run: host τ ``--temp``, z1 anchors against z2 (``cross_view``),
    the papers' SimCSE settings (the strategies' ``"simcse"`` presets), the encoder's width; ``--loss_arg`` wins."""
    from transformers import AutoConfig

    args = dict(config.loss_args)
    if config.hard_negative_weight:
        args["hard_negative_weight"] = config.hard_negative_weight
    width = pretrained(AutoConfig, config.model).hidden_size
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


def training_data(config: TrainConfig, tokenizer: Any, items: list | None) -> tuple[DataLoader, Any, Any]:
    """(loader, its sampler, its collator): ``items`` (default: ``--train_file`` through ``datasets``), tokenised
    once; each epoch's order a function of the epoch, so a checkpoint in the middle of an epoch resumes at its
    batch."""
    limit = None if config.max_train_samples < 0 else config.max_train_samples
    if not config.progress:
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()
    if items is None:
        rows = load_rows(config.train_file, limit)
    else:
        rows = rows_of(items if limit is None else items[:limit])
    dataset = TokenizedDataset(tokenize_rows(rows, tokenizer, config.max_seq_length))
    sampler = EpochSampler(len(dataset), config.seed)
    collate = Collator(tokenizer, config.max_seq_length, do_mlm=config.do_mlm, seed=config.seed)
    # its own generator: creating an iterator draws a seed, which must not move the global (dropout) RNG,
    # or a resumed run would see different dropout masks than an uninterrupted one
    loader = DataLoader(dataset, batch_size=config.batch_size, sampler=sampler, collate_fn=collate, drop_last=True,
                        generator=torch.Generator().manual_seed(config.seed))  # fmt: skip
    return loader, sampler, collate


@guarded
def train(
    config: TrainConfig,
    *,
    items: list[tuple[str, ...]] | list[str] | None = None,
    model: SimCSEModel | None = None,
    project: str = "simcse",
    layout: RunLayout,
) -> dict[str, Any]:
    """Run training; returns a summary (steps, best dev Spearman, paths).

    ``items`` (default: read from ``config.train_file``) and ``model`` (default: :func:`build_model`)
    let other objectives on the same encoder (MABEL) run this loop unchanged.
    """
    from accelerate.utils import set_seed
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    check_model_path(config.model)
    # find_unused_parameters: the checkpoint's own pooler layer is used by none of SimCSE's poolers
    accelerator = make_accelerator(layout, config.gradient_accumulation_steps, config.mixed_precision,
                                   config.log_with, find_unused_parameters=True)  # fmt: skip
    set_seed(config.seed)
    tokenizer = pretrained(AutoTokenizer, config.model)
    loader, sampler, collate = training_data(config, tokenizer, items)
    if model is None:
        model = build_model(config)
    optimizer = torch.optim.AdamW(clp.param_groups(model, config.weight_decay), lr=config.learning_rate)
    unwrapped = model

    def on_step_end(state: RunState) -> None:
        if config.eval_steps and state.step % config.eval_steps == 0:
            _evaluate_and_keep_best(accelerator, unwrapped, tokenizer, state, layout, config, project)

    plan = Plan(config.epochs, config.max_steps, save_every=config.save_steps, save_unit="step",
                keep=config.keep_checkpoints, seekable=True)  # fmt: skip
    run = Run.of(config, layout, f"{project} {config.loss}", project)
    hooks = Hooks(on_epoch_start=lambda state: _set_epoch(sampler, collate, state.epoch), on_step_end=on_step_end,
                  step_logs=lambda: _step_logs(unwrapped))  # fmt: skip

    def schedule(opt: torch.optim.Optimizer, total: int) -> Any:
        return get_linear_schedule_with_warmup(opt, int(config.warmup_ratio * total), total)

    state = fit(accelerator, model, optimizer, loader, plan, run, hooks, schedule=schedule)
    if config.eval_steps and state.step % config.eval_steps:  # not already evaluated at this step
        _evaluate_and_keep_best(accelerator, unwrapped, tokenizer, state, layout, config, project)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        save_model(unwrapped, tokenizer, layout.model, config, project, {"step": state.step, **state.records})
    end_tracking(accelerator)
    curve = [tuple(point) for point in state.records.get("dev", [])]
    return dict(
        steps=state.step,
        strategy=unwrapped.loss_fn.hyperparameters(),  # what trained: preset, --temp and --loss_arg applied
        best_stsb_dev=max((score for _, score in curve), default=-math.inf),
        dev_curve=curve,
        model=str(layout.model),
        best=str(layout.best) if config.eval_steps else None,
    )


def _set_epoch(sampler: EpochSampler, collate: Collator, epoch: int) -> None:
    """Each epoch's order and MLM masks are a function of the epoch (a resume lands on the same batches)."""
    sampler.set_epoch(epoch)
    collate.epoch = epoch


def _step_logs(model: SimCSEModel) -> dict[str, float]:
    """The tracker values of SimCSE's step beyond the loop's: the objective's terms, alignment and uniformity."""
    logs = dict(getattr(model, "last_terms", {}))
    if model.last_embeddings is not None:
        logs["align"], logs["uniformity"] = alignment_uniformity(*model.last_embeddings)
    return logs


def _evaluate_and_keep_best(accelerator: Any, model: SimCSEModel, tokenizer: Any, state: RunState, layout: RunLayout,
                            config: TrainConfig, project: str) -> None:  # fmt: skip
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        score = dev_score(model, tokenizer)
        accelerator.log({"eval/stsb_dev_spearman": score}, step=state.step)
        best = max((s for _, s in state.records.get("dev", [])), default=-math.inf)
        state.record("dev", [state.step, score])
        if score > best:
            best = score
            # the previous best stays until this one is complete
            save_model(model, tokenizer, layout.best, config, project, {"step": state.step, "stsb_dev": score})
        accelerator.print(f"step {state.step}: STS-B dev Spearman {score:.2f} (best {best:.2f})")
    model.train()
    accelerator.wait_for_everyone()
