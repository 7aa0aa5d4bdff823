"""Vision strategies benchmark: SSL kNN / linear accuracy and MSC one-class ROC-AUC, per strategy.

    python benchmarks/vision_strategies.py                                   # CPU-sized defaults below
    python benchmarks/vision_strategies.py --parts ssl --frameworks simclr simco --seeds 0 1
    python benchmarks/vision_strategies.py --parts ssl --subset_per_class 0 --width 64 --epochs 200 \\
        --label "GPU, papers' recipe"                                          # the CIFAR-10 recipe

Parts:

* ``ssl``: ResNet-18 (CIFAR stem, first-stage width ``--width``; 64 is the standard network)
  trained with ``--frameworks`` × ``--strategies`` on ``--subset_per_class`` CIFAR-10 training
  images per class for ``--epochs`` epochs (batch 128, SGD lr 0.06, cosine, SimCLR augmentation at
  32 × 32); kNN (k 200, t 0.1) with the whole training split as the bank and linear probing, on the
  whole test split. The vision settings of each strategy are in
  ``integrations/hosts/vision/ssl_methods.py`` (MACL τ0 0.1 α 0.5 A0 0, DySTreSS 0.07–0.2, dual τα 0.1
  τβ 1.0, InfoNCE τ 0.1).
* ``msc``: MSC on one-class CIFAR-10 with the default backbone (the ``ssl`` part's ``infonce``
  SimCLR backbone of seed 0: CIFAR-10 training images, no labels), each strategy in place of
  MSC's NT-Xent at τ 0.25; mean ROC-AUC over ``--msc_classes``.

Results accumulate in ``--json`` (a re-run replaces its rows) and ``--output`` is rewritten from it,
next to the papers' numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import results_store  # noqa: E402

import cl_plugins as clp  # noqa: E402
from cl_plugins.integrations.hosts.vision.ssl_methods import LAYOUT  # noqa: E402

STRATEGIES = ["infonce", "macl", "dystress", "dual_temperature", "temperature_free", "amcl"]
PAPERS = [
    "MACL paper, CIFAR-10, ResNet-18, 200 epochs, batch 256: linear NT-Xent 84.65, dual temperature 85.86, "
    "MACL 87.27; kNN NT-Xent 81.46, MACL 85.32",
    "DySTreSS paper, CIFAR-10, ResNet-18, 200 epochs, batch 128, kNN (k 200): SimCLR 83.65, MoCo v2 83.9, "
    "MACL 84.85, DySTreSS 85.68; CIFAR10-LT: 62.91 (Kukleva et al.) → 64.98",
    "Dual temperature paper, CIFAR-10, 200 epochs, batch 256, online linear: MoCo v2 82.35, SimMoCo 82.36, SimCo 85.61",
    "Temperature-free paper, Imagenette SimCLR kNN: τ 0.1 / 0.25 / 0.5 / 1 → 80.69 / 84.43 / 83.75 / 82.27, free 84.65",
]
PAPER_MSC = (
    "Temperature-free paper, MSC one-class CIFAR-10 mean ROC-AUC (ImageNet ResNet-152, 25 epochs): "
    "τ 0.1 96.902, τ 0.25 97.215, τ 0.5 97.184, τ 1 97.012, free 97.279"
)


def _mean_std(values: list[float]) -> str:
    from cl_plugins.integrations.runs.results import fmt_mean_std

    return fmt_mean_std(values) if len(values) > 1 else f"{values[0]:.2f}"


def part_ssl(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    from cl_plugins.integrations.hosts.vision.train import VisionConfig, run

    for framework in args.frameworks:
        for strategy in args.strategies:
            if LAYOUT[framework] not in clp.get_loss_class(strategy).layouts:
                print(f"skip {framework} {strategy}: no {LAYOUT[framework]} layout", flush=True)
                continue
            runs = []
            for seed in args.seeds:
                cfg = VisionConfig(
                    framework=framework,
                    loss=strategy,
                    dataset=args.dataset,
                    subset_per_class=args.subset_per_class,
                    width=args.width,
                    epochs=args.epochs,
                    batch_size=args.batch_size,
                    image_size=args.image_size,
                    mixed_precision=args.mixed_precision,
                    eval_every=0,
                    seed=seed,
                    output_dir=str(args.workdir / "ssl" / args.dataset / framework / strategy / f"seed{seed}"),
                    log_with="none",
                    overwrite=True,  # an unfinished run there (no results.json) is redone; the rows live in --json
                    progress=False,
                )
                if args.reuse and (Path(cfg.output_dir) / "results.json").exists():
                    runs.append(json.loads((Path(cfg.output_dir) / "results.json").read_text()))
                else:
                    runs.append(run(cfg))
                print(framework, strategy, seed, {k: round(100 * runs[-1][k], 2) for k in ("knn_top1", "linear_top1")})
            yield (
                dict(
                    part="ssl",
                    dataset=args.dataset,
                    framework=framework,
                    strategy=strategy,
                    label=args.label,
                    seeds=args.seeds,
                    settings=dict(
                        subset_per_class=args.subset_per_class,
                        train_images=runs[0]["train_images"],
                        width=args.width,
                        epochs=args.epochs,
                        batch_size=args.batch_size,
                        image_size=args.image_size,
                    ),
                    knn_top1=[100 * r["knn_top1"] for r in runs],
                    linear_top1=[100 * r["linear_top1"] for r in runs],
                    seconds=sum(r["train_seconds"] for r in runs) / len(runs),
                    final_loss=[r["epoch_loss"][-1] for r in runs],
                )
            )


def part_msc(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    from cl_plugins.integrations.hosts.msc.anomaly import MSCConfig, run

    backbone = args.msc_backbone or (
        args.workdir / "ssl" / "cifar10" / "simclr" / "infonce" / f"seed{args.seeds[0]}" / "model"
    )
    for strategy in args.msc_strategies:
        t0 = time.time()
        cfg = MSCConfig(
            backbone_path=str(backbone),
            loss=strategy,
            normal_classes=args.msc_classes,
            seeds=args.msc_seeds,
            epochs=args.msc_epochs,
            lr=args.msc_lr,
            eval_every=0,
            train_per_class=args.msc_train_per_class,
            test_per_class=args.msc_test_per_class,
            output_dir=str(args.workdir / "msc" / strategy),
            log_with="none",
            overwrite=True,  # a re-measure replaces the run folder; the rows live in --json
            progress=False,
        )
        res = run(cfg)
        yield (
            dict(
                part="msc",
                dataset="cifar10",
                framework="msc",
                strategy=strategy,
                label=args.label,
                backbone=str(backbone),
                settings=dict(
                    epochs=args.msc_epochs,
                    lr=args.msc_lr,
                    classes=args.msc_classes,
                    seeds=args.msc_seeds,
                    train_per_class=args.msc_train_per_class,
                    test_per_class=args.msc_test_per_class,
                ),
                mean_roc_auc=res["mean_roc_auc"],
                mean_roc_auc_std=res["mean_roc_auc_std"],
                before=res["mean_roc_auc_before"],
                per_class=res["per_class_final"],
                seconds=time.time() - t0,
            )
        )
        print("msc", strategy, f"{res['mean_roc_auc']:.2f} (before {res['mean_roc_auc_before']:.2f})", flush=True)


def render(results: dict[str, Any]) -> str:
    rows = results["rows"]
    lines = ["# Vision strategies", "", f"Generated by `benchmarks/vision_strategies.py` ({results['machine']}).", ""]
    ssl = [r for r in rows if r["part"] == "ssl"]
    for label in dict.fromkeys(r["label"] for r in ssl):
        group = [r for r in ssl if r["label"] == label]
        s = group[0]["settings"]
        subset = "all" if not s["subset_per_class"] else f"{s['subset_per_class']} per class"
        lines += [
            f"## Self-supervised CIFAR-10: {label}",
            "",
            f"ResNet-18 (CIFAR stem, width {s['width']}), {s['epochs']} epochs, batch {s['batch_size']}, "
            f"{s['image_size']} × {s['image_size']} px, training images: {subset} ({s['train_images']}). "
            "kNN (k 200, t 0.1, bank: the 50,000 training images) and a linear probe on frozen features, "
            "top-1 % on the 10,000 test images; mean ± std over seeds.",
            "",
            "| dataset | framework | strategy | seeds | kNN top-1 | linear top-1 | final loss | train time |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for r in group:
            lines.append(
                f"| {r['dataset']} | {r['framework']} | {r['strategy']} | {len(r['seeds'])} "
                f"| {_mean_std(r['knn_top1'])} | {_mean_std(r['linear_top1'])} "
                f"| {sum(r['final_loss']) / len(r['final_loss']):.3f} | {r['seconds']:.0f} s |"
            )
        lines.append("")
    lines += ["Papers (full recipes; not comparable with a CPU-sized run):", ""]
    lines += [f"- {p}." for p in PAPERS]
    lines.append("")
    msc = [r for r in rows if r["part"] == "msc"]
    if msc:
        s = msc[0]["settings"]
        lines += [
            "## MSC one-class anomaly detection (CIFAR-10, mean ROC-AUC %)",
            "",
            f"Backbone: `{Path(msc[0]['backbone']).parent.relative_to(Path(msc[0]['backbone']).parents[4])}` "
            "(the infonce SimCLR run above: CIFAR-10 training images, no labels). "
            f"{s['epochs']} fine-tuning epochs, lr {s['lr']}, normal classes {s['classes']}, seeds {s['seeds']}, "
            f"{s['train_per_class'] or 5000} normal training images, "
            f"{s['test_per_class'] or 1000} test images per class.",
            "",
            "| strategy | before fine-tuning | after | time |",
            "|---|---:|---:|---:|",
        ]
        for r in msc:
            lines.append(f"| {r['strategy']} | {r['before']:.2f} | {r['mean_roc_auc']:.2f} | {r['seconds']:.0f} s |")
        lines += ["", f"- {PAPER_MSC}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["ssl", "msc"], help="ssl and / or msc")
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES, help="strategies of the ssl part")
    parser.add_argument("--frameworks", nargs="+", default=["simclr"], help="simclr, simco, mocov2, simmoco")
    parser.add_argument("--dataset", default="cifar10", help="cifar10 or cifar10_lt")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="ssl seeds")
    parser.add_argument("--subset_per_class", type=int, default=500, help="training images per class (0: all)")
    parser.add_argument("--width", type=int, default=16, help="ResNet-18 first-stage width (64: standard)")
    parser.add_argument("--epochs", type=int, default=30, help="ssl epochs (papers: 200)")
    parser.add_argument("--batch_size", type=int, default=128, help="ssl batch size")
    parser.add_argument("--image_size", type=int, default=32, help="ssl resolution")
    parser.add_argument("--mixed_precision", default="no", help="no, fp16 or bf16")
    parser.add_argument("--label", default="CPU-sized run", help="heading of these rows (e.g. 'GPU, full recipe')")
    parser.add_argument("--reuse", action="store_true", help="keep finished runs (their results.json)")
    parser.add_argument("--msc_strategies", nargs="+", default=STRATEGIES, help="strategies of the msc part")
    parser.add_argument("--msc_backbone", type=Path, default=None, help="backbone (default: the ssl infonce run)")
    parser.add_argument("--msc_classes", type=int, nargs="+", default=list(range(10)), help="normal classes")
    parser.add_argument("--msc_seeds", type=int, nargs="+", default=[0], help="msc seeds")
    parser.add_argument("--msc_epochs", type=int, default=3, help="msc fine-tuning epochs (MSC: 20)")
    parser.add_argument("--msc_lr", type=float, default=1e-3, help="msc learning rate (MSC: 1e-5, for ResNet-152)")
    parser.add_argument("--msc_train_per_class", type=int, default=1000, help="normal training images (0: 5,000)")
    parser.add_argument("--msc_test_per_class", type=int, default=0, help="test images per class (0: 1,000)")
    parser.add_argument("--workdir", type=Path, default=Path("outputs/vision_strategies"), help="run folders")
    parser.add_argument("--json", type=Path, default=ROOT / "docs" / "results" / "vision.json", help="accumulated rows")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "results" / "vision.md", help="markdown table")
    args = parser.parse_args()

    results = results_store.load(args.json)
    parts = {"ssl": part_ssl, "msc": part_msc}
    key = lambda r: (r["part"], r["label"], r["dataset"], r["framework"], r["strategy"])  # noqa: E731
    for name in args.parts:
        for row in parts[name](args):  # saved one by one: an interrupted benchmark keeps what it measured
            results_store.merge(results, [row], key, args.json, args.output, render)
    print(render(results))


if __name__ == "__main__":
    main()
