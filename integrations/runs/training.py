"""The one training loop every trainer runs on Accelerate, epoch trainers and step trainers alike.

:func:`fit` trains a model whose forward returns the loss, as a :class:`Plan` says: for a number of
epochs (fractional ones too) or optimizer steps, with gradient accumulation, a learning-rate schedule
that spans the plan, checkpoints every N epochs or steps (the newest k kept, written atomically, see
:mod:`cl_plugins.integrations.runs.atomic`), tracker logging of the loss and the strategy's statistics, the
strategy's per-step upkeep and a check for a non-finite loss. Everything a run reports (its losses,
its evaluations, its best score) lives in the :class:`RunState` that every checkpoint carries, so a
resumed run returns the whole history, not the part after the resume.

``resume=True`` continues from the newest complete checkpoint exactly: model, optimizer, schedule, RNG,
data position and the run's records. A resume that would make the result no run's is refused with one
line: more steps done than planned, or a schedule whose length the resume changes (the steps already
taken followed the old one).
"""

from __future__ import annotations

import copy
import math
import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate.utils import send_to_device
from torch import nn
from tqdm.auto import tqdm

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.runs import atomic, checkpoint
from cl_plugins.integrations.runs.accelerate_setup import start_tracking
from cl_plugins.integrations.runs.layout import RunLayout

CHECKPOINT = "step"  # checkpoints are OUTPUT/.../checkpoints/step_<optimizer steps done>


def base_learning_rates(optimizer: Any) -> list[float]:
    """Each parameter group's learning rate before any schedule (a scheduler keeps it as ``initial_lr``)."""
    return [float(g.get("initial_lr", g["lr"])) for g in optimizer.param_groups]


def apply_learning_rates(optimizer: Any, schedulers: tuple[Any, ...], requested: list[float]) -> None:
    """Make a resumed run use the learning rates it was given, not the checkpoint's: the optimizer's groups and
    a ``LambdaLR`` schedule (warm-up, cosine) continue from the same step with the new base rates."""
    from torch.optim.lr_scheduler import LambdaLR

    for group, lr in zip(optimizer.param_groups, requested, strict=True):
        group["lr"] = lr
        if "initial_lr" in group:
            group["initial_lr"] = lr
    for scheduler in schedulers:
        inner = getattr(scheduler, "scheduler", scheduler)  # Accelerate wraps prepared schedulers
        if isinstance(inner, LambdaLR):
            inner.base_lrs = list(requested)
            for group, lr, factor in zip(optimizer.param_groups, requested, inner.lr_lambdas, strict=True):
                group["lr"] = lr * factor(inner.last_epoch)


def resume_from(
    accelerator: Any, path: Path, contents: checkpoint.Contents, optimizer: Any, schedulers: tuple[Any, ...] = ()
) -> None:
    """Load checkpoint ``path``, keeping the learning rates this run was given (a resume may change them)."""
    requested = base_learning_rates(optimizer)
    checkpoint.load(accelerator, path, contents)
    saved = base_learning_rates(optimizer)
    if saved != requested:
        apply_learning_rates(optimizer, schedulers, requested)
        accelerator.print(f"learning rate {saved} -> {requested} from here on")


@strict_flags
@dataclass
class Plan:
    """How long a run trains and when it saves.

    Args:
        epochs: passes over the data; a fraction ends part-way through the last one (default: 1)
        max_steps: optimizer steps, in place of ``epochs`` when > 0 (default: -1)
        stop_after_epochs: stop once this many epochs are done although the plan (and its schedule) is longer,
            to split a run into jobs continued with ``--resume`` (default: 0, never)
        save_every: a checkpoint every this many ``save_unit`` (default: 1; 0: never)
        save_unit: ``"epoch"`` (also saves at the end and when stopping early) or ``"step"`` (default: epoch)
        keep: checkpoints kept, the newest (default: 1; 0: all)
        seekable: the loader's order is a function of the epoch (``on_epoch_start`` sets it), so a checkpoint
            in the middle of an epoch resumes at its batch; required by ``save_unit="step"`` (default: False)
    """

    epochs: float = 1
    max_steps: int = -1
    stop_after_epochs: int = 0
    save_every: int = 1
    save_unit: str = "epoch"
    keep: int = 1
    seekable: bool = False

    def __post_init__(self) -> None:
        if self.save_unit not in ("epoch", "step"):
            raise ValueError(f"save_unit must be 'epoch' or 'step', got {self.save_unit!r}")
        if self.save_unit == "step" and self.save_every and not self.seekable:
            raise ValueError("checkpoints inside an epoch need a loader whose order the epoch sets (seekable=True)")
        if self.max_steps <= 0 and not self.epochs > 0:
            raise ValueError(f"--epochs must be > 0 (or --max_steps given), got {self.epochs}")

    def total_steps(self, steps_per_epoch: int) -> int:
        """The optimizer steps of the whole plan (what a learning-rate schedule spans)."""
        return self.max_steps if self.max_steps > 0 else math.ceil(self.epochs * steps_per_epoch)

    def finished(self, state: RunState, steps_per_epoch: int) -> bool:
        if self.stop_after_epochs and state.epoch >= self.stop_after_epochs:
            return True
        if self.max_steps <= 0 and float(self.epochs).is_integer():
            return state.epoch >= self.epochs  # whole epochs: a skipped batch does not cost a step of the last one
        return state.step >= self.total_steps(steps_per_epoch)


class RunState:
    """Counters and records of a run, saved with every checkpoint (registered with Accelerate).

    ``records[name]`` is a list a trainer appends to (:meth:`record`): losses, evaluations, curves. It holds
    plain values only (numbers, strings, lists, dicts), like everything a run stores.
    """

    def __init__(self) -> None:
        self.step = self.epoch = self.batch_in_epoch = 0
        self.schedule_steps = 0  # the steps the learning-rate schedule spans (0: no schedule)
        self.loss_sum, self.loss_count = 0.0, 0  # of the epoch under way
        self.last_loss = math.nan
        self.records: dict[str, list[Any]] = {}

    def record(self, name: str, value: Any) -> None:
        self.records.setdefault(name, []).append(value)

    def state_dict(self) -> dict[str, Any]:
        return dict(step=self.step, epoch=self.epoch, batch_in_epoch=self.batch_in_epoch, loss_sum=self.loss_sum,
                    loss_count=self.loss_count, schedule_steps=self.schedule_steps, records=self.records)  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.loss_sum, self.loss_count = state["loss_sum"], state["loss_count"]
        self.schedule_steps, self.records = state["schedule_steps"], state["records"]


@dataclass
class Hooks:
    """What a trainer adds to the loop; each gets the :class:`RunState`. All optional.

    Args:
        on_start: after a resume (or at step 0), before training: an evaluation before training, say
        on_epoch_start: before each epoch's first batch (the seekable loader's order is set here)
        after_step: after every optimizer step (momentum encoders, extra logging)
        on_step_end: after ``after_step`` and the step's logging (evaluations every N steps)
        on_epoch_end: after each epoch, before its checkpoint (evaluations every N epochs)
        skip_batch: a batch too small to train on (skipped, no step)
        stop_when: early stopping, asked before every epoch (its state belongs in ``register``)
        step_logs: extra tracker values of the step just taken
    """

    on_start: Callable[[RunState], None] | None = None
    on_epoch_start: Callable[[RunState], None] | None = None
    after_step: Callable[[RunState], None] | None = None
    on_step_end: Callable[[RunState], None] | None = None
    on_epoch_end: Callable[[RunState], None] | None = None
    skip_batch: Callable[[Any], bool] | None = None
    stop_when: Callable[[], bool] | None = None
    step_logs: Callable[[], dict[str, float]] | None = None


@strict_flags
@dataclass
class Run:
    """Where a run keeps its checkpoints, how it reports, and the guard's claim the loop commits: the loop's side
    of a trainer's config."""

    checkpoint_dir: Path | None = None
    resume: bool = False
    progress: bool = True
    desc: str = "train"
    log_prefix: str = "train"
    tracking: tuple[str, dict[str, Any]] | None = None  # (project, settings) for the trackers
    claim: Any = None  # the guard's claim on the run's folder (:class:`~cl_plugins.integrations.runs.guard.Claim`)
    unit: str = ""  # the run's unit these checkpoints belong to (``seed_0``, ...: part of each file's identity)

    @classmethod
    def of(cls, config: Any, layout: RunLayout, desc: str, project: str, **settings: Any) -> Run:
        """The run of a trainer's :class:`~cl_plugins.integrations.runs.config.RunConfig` in ``layout``'s folder
        (checkpoints in its ``checkpoints/``; ``settings`` join the config's in the tracker)."""
        from dataclasses import asdict

        tracking = (project, {**asdict(config), **settings})
        return cls(layout.checkpoints, config.resume, config.progress, desc, tracking=tracking, claim=layout.claim,
                   unit=layout.unit)

    def identity(self, accelerator: Any) -> checkpoint.Identity:
        """Whose this run's checkpoints are: the claim's run id (held by the main process, sent to the others)."""
        run_id = "" if self.claim is None else self.claim.run_id
        if accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            run_id = broadcast_object_list([run_id])[0]
        return checkpoint.Identity(run_id, self.unit, accelerator.num_processes)


@dataclass(frozen=True)
class Saved:
    """What the loop checkpoints, and whose checkpoints they are."""

    contents: checkpoint.Contents
    identity: checkpoint.Identity


def fit(
    accelerator: Any,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Any,
    plan: Plan,
    run: Run,
    hooks: Hooks | None = None,
    *,
    schedule: Callable[[torch.optim.Optimizer, int], Any] | None = None,
    register: tuple[Any, ...] = (),
) -> RunState:
    """Train ``model`` (whose forward returns the loss; ``model.loss_fn`` is the cl-plugins loss) by ``plan``.

    ``schedule(optimizer, total_steps)`` builds a learning-rate scheduler stepped once per optimizer step;
    objects in ``register`` (early stopping, say) are checkpointed with the run. Returns the run's state, with
    ``records["epoch_loss"]`` (the mean loss of every finished epoch) and whatever the hooks recorded.
    """
    hooks = hooks or Hooks()
    first_batches = loader  # the loader as built: a batch of it for the probe leaves the prepared one untouched
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    steps_per_epoch = math.ceil(len(loader) / accelerator.gradient_accumulation_steps)
    total = plan.total_steps(steps_per_epoch)
    scheduler = None if schedule is None else accelerator.prepare(schedule(optimizer, total))
    state = RunState()
    state.schedule_steps = total if scheduler is not None else 0
    saved = Saved(checkpoint.Contents((model,), (optimizer,), () if scheduler is None else (scheduler,),
                                      (state, *register)), run.identity(accelerator))  # fmt: skip
    if run.resume and run.checkpoint_dir is not None:
        _resume(accelerator, run.checkpoint_dir, saved, state, plan, total)
    unwrapped = accelerator.unwrap_model(model)
    clp.set_epoch_length(unwrapped.loss_fn, steps_per_epoch)  # Accelerate steps on a short last accumulation too
    probe(accelerator, unwrapped, first_batches, hooks.skip_batch)
    if run.claim is not None:
        run.claim.commit()  # every check passed: from here on the run writes into its folder
    atomic.fault_point("run:committed")
    if run.tracking is not None:
        start_tracking(accelerator, *run.tracking)
    if hooks.on_start is not None:
        hooks.on_start(state)
    bar = tqdm(total=total, initial=state.step, desc=run.desc,
               disable=not (run.progress and accelerator.is_local_main_process))  # fmt: skip
    model.train()
    while not plan.finished(state, steps_per_epoch) and not (hooks.stop_when is not None and hooks.stop_when()):
        if hooks.on_epoch_start is not None:
            hooks.on_epoch_start(state)
        epoch_done = _train_epoch(accelerator, model, optimizer, scheduler, loader, plan, run, hooks, state, bar,
                                  steps_per_epoch, saved)  # fmt: skip
        if epoch_done:
            _end_epoch(accelerator, plan, run, hooks, state, saved)
        elif plan.save_unit == "epoch" and run.checkpoint_dir is not None:
            _save(accelerator, run, saved, state, plan.keep)  # a plan ending inside an epoch
    bar.close()
    return state


def probe(accelerator: Any, model: nn.Module, loader: Any, skip_batch: Callable[[Any], bool] | None = None) -> None:
    """One forward and backward of a copy of ``model`` on ``loader``'s first batch, on the run's device and under
    its autocast, with every random state put back afterwards: whatever the loss refuses on the run's real inputs
    (labels it lacks, the features' width, hard negatives, the kernel on this device) is raised before the run
    claims its folder, and the run then trains exactly as without the probe."""
    py_state, np_state = random.getstate(), np.random.get_state()
    cuda = [torch.cuda.current_device()] if accelerator.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=cuda):
            batch = next(iter(loader), None)
            if batch is None or (skip_batch is not None and skip_batch(batch)):
                return
            trial = copy.deepcopy(model)
            batch = send_to_device(batch, accelerator.device)
            try:
                with accelerator.autocast():
                    loss = trial(**batch) if isinstance(batch, Mapping) else trial(batch)
            except ValueError as exc:
                if "more than 1 value per channel" not in str(exc):
                    raise
                raise ValueError("a batch of one sample cannot train this model (its batch normalisation needs at "
                                 "least 2): raise --batch_size") from None  # fmt: skip
            loss.backward()
            _refuse_no_negatives(getattr(trial, "loss_fn", None))
            del trial, loss
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _refuse_no_negatives(loss_fn: Any) -> None:
    """A first batch in which no anchor has a negative (one sample, or one label) trains on a loss of 0: the run
    would report an untrained model's score."""
    rows = getattr(loss_fn, "stats", {}).get("rows_without_negative", 0)
    if rows:
        raise ValueError(f"the first batch gives no anchor a negative ({rows:g} rows: a batch of one sample, or every "
                         "label the same), so every step would train on a loss of 0; raise --batch_size")  # fmt: skip


def _resume(accelerator: Any, folder: Path, saved: Saved, state: RunState, plan: Plan, total: int) -> None:
    path = atomic.latest_complete(folder, CHECKPOINT)
    if path is None:
        return
    _refuse_unusable(folder, path, saved)
    planned_schedule = state.schedule_steps
    schedulers = saved.contents.schedulers
    resume_from(accelerator, path, saved.contents, saved.contents.optimizers[0], schedulers)
    accelerator.print(f"resumed from {path} (step {state.step}, epoch {state.epoch})")
    by_epochs = plan.max_steps <= 0 and float(plan.epochs).is_integer()
    if (state.epoch > plan.epochs) if by_epochs else (state.step > total):
        done, asked = (f"{state.epoch} epochs", f"--epochs {plan.epochs:g}") if by_epochs else \
            (f"{state.step} steps", f"the {total} steps of --epochs / --max_steps")  # fmt: skip
        raise ValueError(f"--resume: {path} has {done} done, more than {asked}; its result would be reported as a "
                         f"shorter run's. Pass --epochs / --max_steps of at least what is done")  # fmt: skip
    if schedulers and state.schedule_steps != planned_schedule and state.step > 0:
        raise ValueError(f"--resume: the learning-rate schedule of this run spans {state.schedule_steps} steps and "
                         f"--epochs / --max_steps now make it {planned_schedule}; the {state.step} steps already "
                         "taken followed the first schedule, so the result would be no run's. Resume with the "
                         "run's own --epochs / --max_steps (--stop_after_epochs splits a run), or start a new "
                         "run")  # fmt: skip


def _refuse_unusable(folder: Path, path: Path, saved: Saved) -> None:
    """One line naming the file when checkpoint ``path`` is not as this run wrote it (nothing of it is read
    before), and the newest intact checkpoint to fall back to, if any; one line saying how to restart when it holds
    pickles (an earlier version's format)."""
    problem = atomic.damage(path)
    pickled = [] if problem else checkpoint.pickles(path)
    if pickled:
        raise ValueError(f"--resume: checkpoint {path} holds pickles ({', '.join(pickled)}), which are never read "
                         "(they could run code): an earlier cl-plugins wrote it, or it was altered since; start the "
                         "run again with --overwrite (its saved model still evaluates)")  # fmt: skip
    problem = problem or checkpoint.problem(path, saved.contents, saved.identity)
    if problem is None:
        return
    older = [p for p in reversed(_checkpoints(folder)) if p != path]
    intact = next((p for p in older if atomic.is_complete(p) and _problem(p, saved) is None), None)
    fallback = f"remove it to resume from {intact} (intact)" if intact else "start a new run (--overwrite)"
    raise ValueError(f"--resume: checkpoint {path} is damaged: {problem}; nothing of it was read. Restore the file, "
                     f"{fallback}")


def _problem(path: Path, saved: Saved) -> str | None:
    return atomic.damage(path) or checkpoint.problem(path, saved.contents, saved.identity)


def _train_epoch(
    accelerator: Any, model: nn.Module, optimizer: Any, scheduler: Any, loader: Any, plan: Plan, run: Run,
    hooks: Hooks, state: RunState, bar: Any, steps_per_epoch: int, saved: Saved,
) -> bool:  # fmt: skip
    """Train until the epoch ends (True) or the plan does inside it (False)."""
    unwrapped = accelerator.unwrap_model(model)
    batches = accelerator.skip_first_batches(loader, state.batch_in_epoch) if plan.seekable else loader
    for data in batches:
        state.batch_in_epoch += 1
        if hooks.skip_batch is not None and hooks.skip_batch(data):
            continue
        with accelerator.accumulate(model):
            loss = model(**data) if isinstance(data, Mapping) else model(data)
            _check_finite(loss, run.desc, state)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        if not accelerator.sync_gradients:
            continue
        clp.after_optimizer_step(unwrapped.loss_fn)
        if scheduler is not None:
            scheduler.step()
        state.step += 1
        _account(state, float(loss.detach()))
        if hooks.after_step is not None:
            hooks.after_step(state)
        _log_step(accelerator, unwrapped, scheduler, run, hooks, state, bar)
        if hooks.on_step_end is not None:
            hooks.on_step_end(state)
        if run.checkpoint_dir is not None and plan.save_unit == "step" and plan.save_every \
                and state.step % plan.save_every == 0:  # fmt: skip
            _save(accelerator, run, saved, state, plan.keep)
        if plan.finished(state, steps_per_epoch):  # a plan of steps (or part of an epoch) ends here
            return False
    return True


def _check_finite(loss: torch.Tensor, desc: str, state: RunState) -> None:
    if not torch.isfinite(loss):
        raise FloatingPointError(f"{desc}: the loss became {float(loss.detach())} at step {state.step + 1} (epoch "
                                 f"{state.epoch + 1}); lower the learning rate or check the strategy's "
                                 "parameters")  # fmt: skip


def _account(state: RunState, loss: float) -> None:
    state.last_loss = loss
    state.loss_sum += loss
    state.loss_count += 1


def _log_step(
    accelerator: Any, unwrapped: nn.Module, scheduler: Any, run: Run, hooks: Hooks, state: RunState, bar: Any
) -> None:
    logs = {f"{run.log_prefix}/loss": state.last_loss}
    if scheduler is not None:
        logs[f"{run.log_prefix}/lr"] = scheduler.get_last_lr()[0]
    logs.update({f"{run.log_prefix}/{k}": v for k, v in unwrapped.loss_fn.stats.items() if k != "loss"})
    if hooks.step_logs is not None:
        logs.update({f"{run.log_prefix}/{k}": v for k, v in hooks.step_logs().items()})
    accelerator.log(logs, step=state.step)
    bar.update(1)
    tau = logs.get(f"{run.log_prefix}/tau_mean", logs.get(f"{run.log_prefix}/tau"))
    bar.set_postfix(loss=f"{state.last_loss:.4f}", **({} if tau is None else {"tau": f"{tau:.4f}"}))


def _end_epoch(accelerator: Any, plan: Plan, run: Run, hooks: Hooks, state: RunState, saved: Saved) -> None:
    if state.loss_count == 0:
        raise ValueError(f"{run.desc}: every batch of epoch {state.epoch + 1} was skipped (too small for a "
                         "contrastive loss); raise --batch_size")  # fmt: skip
    state.record("epoch_loss", state.loss_sum / state.loss_count)
    state.epoch += 1
    state.batch_in_epoch, state.loss_sum, state.loss_count = 0, 0.0, 0
    if hooks.on_epoch_end is not None:
        hooks.on_epoch_end(state)
    if run.checkpoint_dir is None or plan.save_unit != "epoch" or not plan.save_every:
        return
    stopping = hooks.stop_when is not None and hooks.stop_when()
    last = plan.max_steps <= 0 and state.epoch >= plan.epochs
    paused = bool(plan.stop_after_epochs) and state.epoch >= plan.stop_after_epochs
    if state.epoch % plan.save_every == 0 or last or stopping or paused:
        _save(accelerator, run, saved, state, plan.keep)


def _save(accelerator: Any, run: Run, saved: Saved, state: RunState, keep: int) -> None:
    """A checkpoint of the run as it is now; then the oldest beyond the newest ``keep`` go (only once the new
    one is complete)."""
    folder = run.checkpoint_dir
    checkpoint.save(accelerator, folder / f"{CHECKPOINT}_{state.step}", saved.contents, saved.identity)
    if accelerator.is_main_process and run.claim is not None:
        run.claim.settle()  # the run has a complete checkpoint: what --overwrite set aside may go
    if not accelerator.is_main_process or keep <= 0:
        return
    for old in _checkpoints(folder)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def _checkpoints(folder: Path) -> list[Path]:
    """The ``step_<N>`` folders under ``folder``, oldest (smallest N) first."""
    found = [p for p in folder.glob(f"{CHECKPOINT}_*") if p.name.rsplit("_", 1)[1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))
