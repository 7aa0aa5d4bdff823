"""The contrastive sentence trainer's run configuration (:mod:`cl_plugins.integrations.modalities.text.trainer`):
SimCSE's flags, which MABEL's configuration extends. Imports nothing heavy (``--help`` reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.command_line import host_head_field
from cl_plugins.integrations.runs.config import RunConfig, output_dir_field

#: SimCSE's poolers (``simcse/models.py``)
POOLERS = ("cls", "cls_before_pooler", "avg", "avg_top2", "avg_first_last")


@strict_flags
@dataclass(kw_only=True)
class TrainConfig(RunConfig):
    model: str = field(metadata={"help": "Hugging Face BERT/RoBERTa checkpoint directory (or hub name online)"})
    train_file: str = field(metadata={"help": "one sentence per line (unsupervised) or sent0,sent1,hard_neg CSV"})
    output_dir: str = output_dir_field("outputs/simcse", "checkpoints, logs, best/ and model/")
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
    seed: int = field(default=42, metadata={"help": "seed of initialisation, data order and dropout"})
    eval_steps: int = field(default=125, metadata={"help": "STS-B dev evaluation every N steps (0: never)"})
    save_steps: int = field(default=0, metadata={"help": "full training-state checkpoint every N steps (0: never)"})
