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

from integrations.common.cli import new_parser, one_line_errors  # noqa: E402


def build_parser():  # type: ignore[no-untyped-def]
    parser = new_parser(__doc__)
    parser.add_argument("--strategy", default="infonce", help="a cl-plugins strategy (default: infonce = MNRL)")
    parser.add_argument("--model", default="", help="SentenceTransformer folder (default: offline all-MiniLM-L6-v2)")
    parser.add_argument("--sentences", type=int, default=10000, help="wiki sentences to train on")
    parser.add_argument("--epochs", type=float, default=1.0, help="epochs (0: evaluate the model as it is)")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per step")
    parser.add_argument("--mini_batch", type=int, default=64, help="rows embedded at once (GradCache)")
    parser.add_argument("--lr", type=float, default=3e-5, help="learning rate (SimCSE: 3e-5)")
    parser.add_argument("--max_length", type=int, default=32, help="tokens per sentence (SimCSE: 32)")
    parser.add_argument("--tasks", default="sts", help="SentEval tasks: sts, STSBenchmark, ... (comma-separated)")
    parser.add_argument("--seed", type=int, default=42, help="seed")
    parser.add_argument("--output_dir", default="outputs/st_simcse", help="model and results.json")
    return parser


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainingArguments

    from integrations.common import atomic
    from integrations.common.paths import data_path
    from integrations.frameworks.sentence_transformers import CachedStrategyRankingLoss, StrategyTrainer
    from integrations.senteval import engine
    from integrations.simcse.model import offline_encoder_dir

    args = build_parser().parse_args(argv)
    torch.manual_seed(args.seed)
    model = SentenceTransformer(args.model or str(offline_encoder_dir()), device="cpu")
    model.max_seq_length = args.max_length
    out = Path(args.output_dir)
    summary: dict[str, Any] = {"settings": vars(args)}
    if args.epochs > 0:
        lines = data_path("sentence/simcse/wiki1m_for_simcse.head.txt").read_text().splitlines()
        texts = [t for t in lines if t.strip()][: args.sentences]
        pairs = Dataset.from_dict({"anchor": texts, "positive": texts})
        loss = CachedStrategyRankingLoss(model, args.strategy, mini_batch_size=args.mini_batch)
        train_args = SentenceTransformerTrainingArguments(
            output_dir=str(out / "trainer"), num_train_epochs=args.epochs, per_device_train_batch_size=args.batch_size,
            learning_rate=args.lr, seed=args.seed, report_to=[], save_strategy="no",
            logging_steps=20, use_cpu=not torch.cuda.is_available(), dataloader_drop_last=True,
        )  # fmt: skip
        result = StrategyTrainer(model=model, args=train_args, train_dataset=pairs, loss=loss).train()
        summary["train_loss"] = result.training_loss
        summary["strategy"] = loss.get_config_dict()
    model.eval()
    encode = lambda sentences: model.encode(list(sentences), batch_size=128, convert_to_numpy=True)  # noqa: E731
    results = engine.evaluate(encode, args.tasks, mode="test", progress=False)
    summary["sts"] = engine.summary(results)
    atomic.write_json(out / "results.json", summary)
    print(json.dumps(summary["sts"], indent=2))
    return summary


if __name__ == "__main__":
    main()
