"""The settings every trainer's run shares: its strategy, its folder, resuming, tracking.

Each trainer's config is a keyword-only dataclass extending :class:`RunConfig`; the command line gets one
flag per field (:mod:`cl_plugins.integrations.command_line`), and :mod:`cl_plugins.integrations.runs.guard`
compares them between a run and its resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cl_plugins.arguments import strict_flags
from cl_plugins.registry import bundled_names


def output_dir_field(default: str, what: str = "checkpoints, models, results.json") -> Any:
    """A trainer's ``--output_dir`` with its own default folder."""
    return field(default=default, metadata={"help": f"where the run writes ({what})"})


@strict_flags
@dataclass(kw_only=True)
class RunConfig:
    """Fields of every trainer's config (each trainer adds its own, and may give ``output_dir`` its default)."""

    loss: str = field(default="infonce", metadata={"help": f"strategy: {', '.join(bundled_names())}"})
    loss_args: dict[str, Any] = field(default_factory=dict, metadata={"help": "strategy parameters (--loss_arg)"})
    output_dir: str = output_dir_field("outputs/run")
    resume: bool = field(default=False, metadata={"help": "continue the run in --output_dir from its last checkpoint"})
    overwrite: bool = field(default=False, metadata={"help": "replace what --output_dir holds (default: refuse)"})
    keep_checkpoints: int = field(default=1, metadata={"help": "checkpoints kept, the newest (0: all)"})
    log_with: str = field(default="tensorboard", metadata={"help": "Accelerate tracker (tensorboard, wandb, none)"})
    progress: bool = field(default=True, metadata={"help": "show progress bars"})
    mixed_precision: str = field(
        default="no",
        metadata={"help": "autocast through Accelerate: no, fp16 or bf16 (on a GPU, or bf16 on the CPU)",
                  "choices": ("no", "fp16", "bf16")},
    )  # fmt: skip

    def __post_init__(self) -> None:
        reduction = self.loss_args.get("reduction", "mean")
        if reduction != "mean":
            raise ValueError(f"--loss_arg reduction={reduction}: a trainer steps on the batch's mean loss; drop it "
                             "(reduction='none' and 'sum' are for a loss in your own loop)")  # fmt: skip
