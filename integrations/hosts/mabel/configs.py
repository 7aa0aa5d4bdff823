"""MABEL's run configuration and the parsers of ``mabel-train`` and ``mabel-eval``: the command lines alone,
importing nothing heavy, so that ``cl-plugins COMMAND --help`` answers before torch loads; the trainer and
evaluation modules run them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import dataclass_parser, new_parser
from cl_plugins.integrations.modalities.text.config import TrainConfig
from cl_plugins.integrations.runs.config import output_dir_field

#: the bias benchmarks of ``mabel-eval``
TASKS = ("stereoset", "crows", "seat")


PAPER = dict(batch_size=32, learning_rate=5e-5, epochs=2.0, max_seq_length=128, pooler="cls", do_mlm=True,
             mlm_weight=0.1, align_weight=0.05, temp=0.05)  # fmt: skip


@strict_flags
@dataclass(kw_only=True)
class MabelConfig(TrainConfig):
    model: str = field(default="", metadata={"help": "AutoModelForMaskedLM folder (default: MiniLM + fitted MLM head)"})
    train_file: str = field(
        default="", metadata={"help": "MABEL's entailment_data.csv or a sent0,sent1 CSV (default: SICK train)"}
    )
    output_dir: str = output_dir_field("outputs/mabel", "checkpoints, logs, best/ and model/")
    align_weight: float = field(default=0.05, metadata={"help": "weight of the alignment term (MABEL's align_temp)"})
    align_temp: float = field(default=0.05, metadata={"help": "constant τ inside the alignment term"})
    bias_type: str = field(default="gender", metadata={"help": "word list of bias_attribute_words.json to swap"})
    paper: bool = field(default=False, metadata={"help": "MABEL's recipe (see the module help)"})
    mlm_head_texts: int = field(default=8000, metadata={"help": "lines of local text that fit the offline MLM head"})
    bias_eval: bool = field(default=True, metadata={"help": "run StereoSet, CrowS-Pairs and SEAT on the result"})
    bias_eval_limit: int = field(default=0, metadata={"help": "first N StereoSet / CrowS examples (0: all)"})
    seat_samples: int = field(default=100_000, metadata={"help": "permutations of the SEAT p-values"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.paper:
            for name, value in PAPER.items():
                setattr(self, name, value)


#: MABEL's recipe minus what a CPU run changes; applied when a flag is left at SimCSE's default
DEFAULTS = dict(PAPER, max_seq_length=64, eval_steps=125)


def train_parser(description: str | None) -> argparse.ArgumentParser:
    """``mabel-train``'s command line: one flag per field of :class:`MabelConfig`, at :data:`DEFAULTS`."""
    defaults = {f.name: DEFAULTS[f.name] for f in fields(MabelConfig) if f.name in DEFAULTS}
    return dataclass_parser(MabelConfig, description, defaults)


def evaluate_parser(description: str | None) -> argparse.ArgumentParser:
    """``mabel-eval``'s command line (its module's docstring as ``description``)."""
    parser = new_parser(description)
    parser.add_argument("model", help="AutoModelForMaskedLM folder (e.g. outputs/mabel/best)")
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated: stereoset, crows, seat")
    parser.add_argument("--bias_type", default="gender", help="CrowS-Pairs bias type ('' for all)")
    parser.add_argument("--seat_samples", type=int, default=100_000, help="permutations of the SEAT p-value")
    parser.add_argument("--limit", type=int, default=0, help="first N StereoSet / CrowS examples (0: all)")
    parser.add_argument("--output", default="", help="write the JSON here too")
    return parser
