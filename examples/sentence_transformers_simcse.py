"""Unsupervised SimCSE in sentence-transformers with any cl-plugins strategy, evaluated on the seven STS tasks.

    python examples/sentence_transformers_simcse.py --strategy macl --sentences 10000
    python examples/sentence_transformers_simcse.py --strategy infonce --batch_size 512 --mini_batch 64   # cached

all-MiniLM-L6-v2 (the offline package, or ``--model``) trains one epoch on the first ``--sentences`` lines of the
data pack's wiki file, each sentence its own positive (dropout makes the two views), with
``CachedStrategyRankingLoss`` at MNRL's scale 20 and ``StrategyTrainer``; then our SentEval harness reports STS
Spearman (the model before training with ``--epochs 0``). Results go to ``--output_dir/results.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataclasses import asdict, dataclass, field  # noqa: E402

from cl_plugins.integrations.command_line import one_line_errors, parse_config  # noqa: E402
from cl_plugins.integrations.runs.guard import guarded  # noqa: E402
from cl_plugins.integrations.runs.layout import RunLayout  # noqa: E402


@dataclass(kw_only=True)
class STSimCSEConfig:
    """The settings of a run; the run guard records them in ``--output_dir`` (no resume: a run is minutes)."""

    strategy: str = field(default="infonce", metadata={"help": "a cl-plugins strategy (infonce = MNRL)"})
    loss_args: dict[str, Any] = field(default_factory=dict, metadata={"help": "strategy parameters (--loss_arg)"})
    model: str = field(default="", metadata={"help": "SentenceTransformer folder (default: offline all-MiniLM-L6-v2)"})
    sentences: int = field(default=10000, metadata={"help": "wiki sentences to train on"})
    epochs: float = field(default=1.0, metadata={"help": "epochs (0: evaluate the model as it is)"})
    batch_size: int = field(default=64, metadata={"help": "sentences per step"})
    mini_batch: int = field(default=64, metadata={"help": "rows embedded at once (GradCache)"})
    lr: float = field(default=3e-5, metadata={"help": "learning rate (SimCSE: 3e-5)"})
    max_length: int = field(default=32, metadata={"help": "tokens per sentence (SimCSE: 32)"})
    tasks: str = field(default="sts", metadata={"help": "SentEval tasks: sts, STSBenchmark, ... (comma-separated)"})
    seed: int = field(default=42, metadata={"help": "seed"})
    output_dir: str = field(default="outputs/st_simcse", metadata={"help": "where the run writes (results.json)"})
    overwrite: bool = field(default=False, metadata={"help": "replace what --output_dir holds (default: refuse)"})


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run(parse_config(STSimCSEConfig, __doc__, argv))


@guarded
def run(args: STSimCSEConfig, *, layout: RunLayout) -> dict[str, Any]:
    """Train (unless ``--epochs 0``), evaluate, write ``results.json``; the folder is the run guard's."""
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainingArguments

    from cl_plugins.integrations.data.catalogue import data_path
    from cl_plugins.integrations.evaluation.senteval import engine
    from cl_plugins.integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyTrainer
    from cl_plugins.integrations.modalities.text.encoder import offline_encoder_dir
    from cl_plugins.integrations.runs import atomic

    torch.manual_seed(args.seed)
    model = SentenceTransformer(args.model or str(offline_encoder_dir()), device="cpu")
    model.max_seq_length = args.max_length
    summary: dict[str, Any] = {"settings": asdict(args)}
    if args.epochs > 0:
        lines = data_path("sentence/simcse/wiki1m_for_simcse.head.txt").read_text().splitlines()
        texts = [t for t in lines if t.strip()][: args.sentences]
        pairs = Dataset.from_dict({"anchor": texts, "positive": texts})
        loss = CachedStrategyRankingLoss(model, args.strategy, mini_batch_size=args.mini_batch, **args.loss_args)
        train_args = SentenceTransformerTrainingArguments(
            output_dir=str(layout.part("trainer").folder), num_train_epochs=args.epochs,
            per_device_train_batch_size=args.batch_size,
            learning_rate=args.lr, seed=args.seed, report_to=[], save_strategy="no",
            logging_steps=20, use_cpu=not torch.cuda.is_available(), dataloader_drop_last=True,
        )  # fmt: skip
        result = StrategyTrainer(model=model, args=train_args, train_dataset=pairs, loss=loss).train()
        summary["train_loss"] = result.training_loss
        summary["strategy"] = loss.get_config_dict()
    model.eval()

    def encode(sentences: list[str]) -> Any:
        return model.encode(list(sentences), batch_size=128, convert_to_numpy=True)

    results = engine.evaluate(encode, args.tasks, mode="test", progress=False)
    summary["sts"] = engine.summary(results)
    atomic.write_json(layout.summary, summary)
    print(json.dumps(summary["sts"], indent=2))
    return summary


if __name__ == "__main__":
    main()
