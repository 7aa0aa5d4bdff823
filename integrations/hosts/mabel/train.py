"""Train MABEL (gender-debiased sentence encoder) with any cl-plugins strategy, on SimCSE's loop.

    accelerate launch examples/mabel_debias.py --loss temperature_free
    python examples/mabel_debias.py --paper --model bert-base-uncased --train_file entailment_data.csv

After training, the selected model (``best/``, else ``model/``) is evaluated with StereoSet,
CrowS-Pairs and SEAT (:mod:`cl_plugins.integrations.hosts.mabel.evaluate`; ``--no-bias_eval`` skips it).

The loop, checkpoints (``--save_steps``, exact ``--resume``), tracker logging, progress bar and
STS-B dev model selection are SimCSE's (:func:`cl_plugins.integrations.modalities.text.trainer.train`); the model is
:class:`cl_plugins.integrations.hosts.mabel.model.MabelModel`. ``--paper`` sets MABEL's recipe: batch 32,
lr 5e-5, 2 epochs, max length 128, CLS pooling with MABEL's head, MLM weight 0.1, alignment
weight 0.05, τ 0.05. Without ``--paper`` the same recipe runs with max length 64 (SICK's
sentences are short).

Defaults offline: the encoder is all-MiniLM-L6-v2 with an MLM head fitted on local text
(:mod:`cl_plugins.integrations.hosts.mabel.mlm_head`, cached under ``$CL_PLUGINS_CACHE/mabel``); the training
pairs are SICK train's entailment pairs, gender-swapped with bias-bench's word list.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cl_plugins.integrations.command_line import config_from_args, one_line_errors
from cl_plugins.integrations.data.paths import cache_dir
from cl_plugins.integrations.hosts.mabel.configs import MabelConfig, train_parser
from cl_plugins.integrations.hosts.mabel.counterfactual import load_word_pairs, swap_table
from cl_plugins.integrations.hosts.mabel.data import read_items, sick_items
from cl_plugins.integrations.hosts.mabel.model import MabelModel
from cl_plugins.integrations.modalities.text.trainer import build_strategy, dropout_overrides, train
from cl_plugins.integrations.runs import atomic
from cl_plugins.integrations.runs.guard import guarded
from cl_plugins.integrations.runs.layout import RunLayout


def offline_mlm(config: MabelConfig) -> Path:
    """all-MiniLM-L6-v2 with a fitted MLM head (built once, then cached)."""
    from cl_plugins.integrations.data.catalogue import data_path
    from cl_plugins.integrations.hosts.mabel.mlm_head import fit_mlm_head
    from cl_plugins.integrations.modalities.text.encoder import offline_encoder_dir

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
def run(config: MabelConfig, *, layout: RunLayout) -> dict[str, Any]:
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
        from cl_plugins.integrations.hosts.mabel.evaluate import evaluate_bias, summary_row

        chosen = summary["best"] or summary["model"]
        bias = evaluate_bias(chosen, limit=config.bias_eval_limit, seat_samples=config.seat_samples)
        summary["bias"] = {**bias, "summary": summary_row(bias)}
    atomic.write_json(layout.summary, {**summary, "config": asdict(config)})
    return summary


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    summary = run(config_from_args(MabelConfig, train_parser(__doc__).parse_args(argv)))
    print(json.dumps(summary, indent=2, default=str))
    return summary


if __name__ == "__main__":
    main()
