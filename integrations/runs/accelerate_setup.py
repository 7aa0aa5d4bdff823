"""The Accelerator every adapter's trainer uses."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.runs.layout import RunLayout
from cl_plugins.validation import check_count


def available_tracker(log_with: str) -> str:
    """``log_with``, or ``"none"`` with a one-line notice when it is TensorBoard and TensorBoard is not installed
    (Accelerate would warn and log nothing)."""
    if log_with == "tensorboard" and not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
        print("notice: TensorBoard is not installed, so this run logs to no tracker (pip install tensorboard, or "
              "--log_with wandb / none)", file=sys.stderr)  # fmt: skip
        return "none"
    return log_with


@strict_flags
def make_accelerator(
    out: RunLayout | str | Path,
    gradient_accumulation_steps: int = 1,
    mixed_precision: str = "no",
    log_with: str = "tensorboard",
    find_unused_parameters: bool = False,
) -> Any:
    """An ``accelerate.Accelerator`` for the run (or unit) ``out``, logging to its ``logs/``; ``log_with="none"``
    disables trackers."""
    check_count("--gradient_accumulation_steps", gradient_accumulation_steps)
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedDataParallelKwargs, ProjectConfiguration

    # several runs in one process (benchmarks, tests) may differ in precision; the process group stays
    AcceleratorState._reset_state()
    layout = out if isinstance(out, RunLayout) else RunLayout(Path(out))
    log_with = available_tracker(log_with)
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=True)] if find_unused_parameters else []
    return Accelerator(
        # without cpu=True, Accelerate ignores a torchrun world on a machine without GPUs (each rank alone)
        cpu=not torch.cuda.is_available(),
        gradient_accumulation_steps=gradient_accumulation_steps,
        mixed_precision=mixed_precision,
        log_with=None if log_with == "none" else log_with,
        project_config=ProjectConfiguration(project_dir=str(layout.folder), logging_dir=str(layout.logs)),
        # trainers step their schedules once per optimizer step themselves: Accelerate's default advances
        # them once per process, which would run a step-count schedule world-size times too fast
        step_scheduler_with_optimizer=False,
        kwargs_handlers=handlers,
    )


def start_tracking(accelerator: Any, project: str, settings: dict[str, Any]) -> None:
    """Open the trackers (main process only; nothing when the Accelerator was made with ``log_with="none"``)."""
    if accelerator.is_main_process and accelerator.log_with:
        accelerator.init_trackers(project, config={k: str(v) for k, v in settings.items()})


def end_tracking(accelerator: Any) -> None:
    """Close the trackers: ``Accelerator.end_training`` without its process-group teardown.

    ``end_training`` destroys the process group while the DDP-wrapped model still holds it; when the model is
    freed later, its reducer drops the last reference and gloo's destructor joins its worker threads holding the
    GIL, while a worker that is still destroying a barrier's work item waits for the GIL: a deadlock after the
    work is done (seen as a two-process run that printed its summary and never exited). The group is left by
    :func:`cl_plugins.integrations.command_line.leave_process_group` once the run has returned and its models are freed.
    """
    for tracker in accelerator.trackers:
        tracker.finish()
