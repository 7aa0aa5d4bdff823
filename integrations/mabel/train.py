"""Train MABEL (gender-debiased sentence encoder) with any cl-plugins strategy, on SimCSE's loop.

    accelerate launch examples/mabel_debias.py --loss temperature_free
    python examples/mabel_debias.py --paper --model bert-base-uncased --train_file entailment_data.csv

After training, the selected model (``best/``, else ``final/``) is evaluated with StereoSet,
CrowS-Pairs and SEAT (:mod:`integrations.mabel.evaluate`; ``--no-bias_eval`` skips it).

The loop, checkpoints (``--save_steps``, exact ``--resume``), tracker logging, progress bar and
STS-B dev model selection are SimCSE's (:func:`integrations.simcse.train.train`); the model is
:class:`integrations.mabel.model.MabelModel`. ``--paper`` sets MABEL's recipe: batch 32,
lr 5e-5, 2 epochs, max length 128, CLS pooling with MABEL's head, MLM weight 0.1, alignment
weight 0.05, τ 0.05. Without ``--paper`` the same recipe runs with max length 64 (SICK's
sentences are short).

Defaults offline: the encoder is all-MiniLM-L6-v2 with an MLM head fitted on local text
(:mod:`integrations.mabel.mlm_head`, cached under ``$CL_PLUGINS_CACHE/mabel``); the training
pairs are SICK train's entailment pairs, gender-swapped with bias-bench's word list.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from integrations.common import atomic
from integrations.common.cli import one_line_errors, parse_config
from integrations.common.paths import cache_dir
from integrations.common.run_config import output_dir_field
from integrations.common.run_guard import guarded
from integrations.simcse.train import TrainConfig, build_strategy, dropout_overrides, train

from .counterfactual import load_word_pairs, swap_table
from .data import read_items, sick_items
from .model import MabelModel

PAPER = dict(batch_size=32, learning_rate=5e-5, epochs=2.0, max_seq_length=128, pooler="cls", do_mlm=True,
             mlm_weight=0.1, align_weight=0.05, temp=0.05)  # fmt: skip


@dataclass(kw_only=True)
class MabelConfig(TrainConfig):
    model: str = field(default="", metadata={"help": "AutoModelForMaskedLM folder (default: MiniLM + fitted MLM head)"})
    train_file: str = field(
        default="", metadata={"help": "MABEL's entailment_data.csv or a sent0,sent1 CSV (default: SICK train)"}
    )
    output_dir: str = output_dir_field("outputs/mabel", "checkpoints, logs, best/ and final/")
    align_weight: float = field(default=0.05, metadata={"help": "weight of the alignment term (MABEL's align_temp)"})
    align_temp: float = field(default=0.05, metadata={"help": "constant τ inside the alignment term"})
    bias_type: str = field(default="gender", metadata={"help": "word list of bias_attribute_words.json to swap"})
    paper: bool = field(default=False, metadata={"help": "MABEL's recipe (see the module help)"})
    mlm_head_texts: int = field(default=8000, metadata={"help": "lines of local text that fit the offline MLM head"})
    bias_eval: bool = field(default=True, metadata={"help": "run StereoSet, CrowS-Pairs and SEAT on the result"})
    bias_eval_limit: int = field(default=0, metadata={"help": "first N StereoSet / CrowS examples (0: all)"})
    seat_samples: int = field(default=100_000, metadata={"help": "permutations of the SEAT p-values"})

    def __post_init__(self) -> None:
        if self.paper:
            for name, value in PAPER.items():
                setattr(self, name, value)


#: MABEL's recipe minus what a CPU run changes; applied when a flag is left at SimCSE's default
DEFAULTS = dict(PAPER, max_seq_length=64, eval_steps=125)


def offline_mlm(config: MabelConfig) -> Path:
    """all-MiniLM-L6-v2 with a fitted MLM head (built once, then cached)."""
    from integrations.common.paths import data_path
    from integrations.simcse.model import offline_encoder_dir

    from .mlm_head import fit_mlm_head

    out = cache_dir("mabel") / f"minilm_mlm_{config.mlm_head_texts}"
    if (out / "mlm_head.json").exists():
        return out
    encoder = offline_encoder_dir()
    wiki = data_path("sentence/simcse/wiki1m_for_simcse.head.txt", hint="the data pack (see its MANIFEST.md)")
    texts = [line.strip() for line in wiki.read_text(encoding="utf-8").splitlines() if line.strip()]
    fit_mlm_head(encoder, texts[: config.mlm_head_texts], out, progress=config.progress)
    return out


def build_model(config: MabelConfig) -> MabelModel:
    return MabelModel.from_pretrained(
        config.model, build_strategy(config), do_mlm=True, config_overrides=dropout_overrides(config),
        align_weight=config.align_weight, align_temp=config.align_temp, pooler=config.pooler,
        mlm_weight=config.mlm_weight, keep_host_head=config.host_head,
    )  # fmt: skip


@guarded
def run(config: MabelConfig) -> dict[str, Any]:
    from accelerate.utils import set_seed

    if not config.model:
        config.model = str(offline_mlm(config))
    table = swap_table(load_word_pairs(config.bias_type))
    items = read_items(config.train_file, table) if config.train_file else sick_items(table)
    if not items:
        raise ValueError("no training pair holds a word of the swap list; check --train_file and --bias_type")
    config.do_mlm = True
    set_seed(config.seed)
    summary = train(config, items=items, model=build_model(config), project="mabel")
    summary["train_items"] = len(items)
    if config.bias_eval:
        from .evaluate import evaluate_bias, summary_row

        chosen = summary["best"] or summary["final"]
        bias = evaluate_bias(chosen, limit=config.bias_eval_limit, seat_samples=config.seat_samples)
        summary["bias"] = {**bias, "summary": summary_row(bias)}
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / "train_summary.json", {**summary, "config": asdict(config)})
    return summary


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    defaults = {f.name: DEFAULTS[f.name] for f in fields(MabelConfig) if f.name in DEFAULTS}
    summary = run(parse_config(MabelConfig, __doc__, argv, defaults))
    print(json.dumps(summary, indent=2, default=str))
    return summary


if __name__ == "__main__":
    main()
