"""The intrinsic bias evaluations of a model folder: StereoSet, CrowS-Pairs (masked LM) and SEAT (encoder).

    cl-plugins mabel-eval outputs/mabel/best
    cl-plugins mabel-eval bert-base-uncased --tasks stereoset,crows --bias_type gender

``MODEL`` is an ``AutoModelForMaskedLM`` folder (StereoSet, CrowS-Pairs) whose encoder SEAT embeds
with the pooler and head saved by our trainers (their ``cl_plugins.json``), else ``[CLS]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from cl_plugins.integrations.command_line import one_line_errors
from cl_plugins.integrations.evaluation.bias.crows_pairs import evaluate_crows, load_crows_pairs
from cl_plugins.integrations.evaluation.bias.seat import GENDER_TESTS, run_seat
from cl_plugins.integrations.evaluation.bias.stereoset import evaluate_stereoset, load_intrasentence
from cl_plugins.integrations.hosts.mabel.configs import TASKS, evaluate_parser
from cl_plugins.integrations.modalities.text.encoder import pretrained
from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder, trained_settings
from cl_plugins.integrations.runs import atomic


def evaluate_bias(
    model_dir: str | Path,
    tasks: tuple[str, ...] = TASKS,
    *,
    bias_type: str = "gender",
    seat_tests: tuple[str, ...] = GENDER_TESTS,
    seat_samples: int = 100_000,
    limit: int = 0,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Metrics of ``tasks``; ``limit`` > 0 keeps the first examples of StereoSet and CrowS-Pairs (smoke runs)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    unknown = set(tasks) - set(TASKS)
    if unknown:
        raise ValueError(f"tasks must be among {TASKS}, got {sorted(unknown)}")
    trained_settings(Path(model_dir))  # another trainer's folder is refused here, in one line
    out: dict[str, Any] = {"model": str(model_dir)}
    if "stereoset" in tasks or "crows" in tasks:
        tokenizer = pretrained(AutoTokenizer, model_dir, "model")
        mlm, info = pretrained(AutoModelForMaskedLM, model_dir, "model", output_loading_info=True)
        if info["missing_keys"]:  # a head initialised at random would score noise
            raise ValueError(f"{model_dir} has no trained masked-LM head (missing {sorted(info['missing_keys'])[:3]}); "
                             "StereoSet and CrowS-Pairs need one: pass a MABEL folder (or a SimCSE run with "
                             "--do_mlm), or --tasks seat")  # fmt: skip
        mlm.eval()
        if "stereoset" in tasks:
            examples = load_intrasentence()
            out["stereoset"] = evaluate_stereoset(mlm, tokenizer, examples[:limit] if limit else examples,
                                                  batch_size=batch_size)  # fmt: skip
        if "crows" in tasks:
            pairs = load_crows_pairs(bias_type=bias_type or None)
            out["crows"] = evaluate_crows(mlm, tokenizer, pairs[:limit] if limit else pairs, batch_size=batch_size)
    if "seat" in tasks:
        encode = load_encoder(model_dir)
        out["seat"] = run_seat(lambda s: torch.as_tensor(encode(s)), seat_tests, n_samples=seat_samples)
    return out


def summary_row(result: dict[str, Any]) -> dict[str, float]:
    """The headline numbers: StereoSet gender LM / SS / ICAT, CrowS-Pairs metric, SEAT mean |d|."""
    row = {}
    if "stereoset" in result:
        for key in ("lm", "ss", "icat"):
            row[f"stereoset_gender_{key}"] = result["stereoset"].get("gender", {}).get(key, float("nan"))
            row[f"stereoset_all_{key}"] = result["stereoset"]["overall"][key]
    if "crows" in result:
        row["crows"] = result["crows"]["overall"]["metric"]
    if "seat" in result:
        row["seat_mean_abs_d"] = result["seat"]["mean_abs_effect_size"]
    return row


@one_line_errors
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = evaluate_parser(__doc__)
    args = parser.parse_args(argv)
    result = evaluate_bias(args.model, tuple(t for t in args.tasks.split(",") if t), bias_type=args.bias_type,
                           seat_samples=args.seat_samples, limit=args.limit)  # fmt: skip
    result["summary"] = summary_row(result)
    text = json.dumps(result, indent=2)
    if args.output:
        atomic.write_text(Path(args.output), text)
    print(text)
    return result


if __name__ == "__main__":
    main()
