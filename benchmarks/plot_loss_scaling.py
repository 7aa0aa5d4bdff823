"""Time and peak memory against N (log-log) from ``loss_speed.py``'s JSON rows.

    python benchmarks/plot_loss_scaling.py docs/results/loss_speed.json --output docs/figures/loss_scaling.png

One panel per layout and quantity; cases that could not run at an N (out of memory) end their line there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SHOWN = {
    "simclr": ["F.cross_entropy NT-Xent", "pytorch-metric-learning NTXentLoss", "infonce", "infonce [fused]",
               "infonce [stream]", "macl", "dual_temperature", "dystress", "temperature_free"],
    "cross_view": ["F.cross_entropy (cross-view)", "info-nce-pytorch InfoNCE", "sentence-transformers MNRL",
                   "sentence-transformers CachedMNRL (mini-batch 32)", "infonce (cross-view)", "dystress (cross-view)",
                   "temperature_free (cross-view)"],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", type=Path, help="rows written by benchmarks/loss_speed.py --json")
    parser.add_argument("--output", type=Path, default=Path("docs/figures/loss_scaling.png"), help="PNG to write")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = json.loads(args.json.read_text())
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for col, (layout, cases) in enumerate(SHOWN.items()):
        for row, (key, unit) in enumerate((("ms", "time of forward + backward (ms)"), ("mib", "peak memory (MiB)"))):
            ax = axes[row][col]
            for case in cases:
                points = sorted((r["n"], r[key]) for r in rows if r["case"] == case and r.get(key))
                if points:
                    style = "-" if case.startswith(("infonce", "macl", "dual", "dystress", "temperature")) else "--"
                    ax.plot(*zip(*points), style, marker="o", label=case)
            ax.set(xscale="log", yscale="log", xlabel="N (pairs per batch)", ylabel=unit, title=f"{layout} layout")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("cl-plugins against peers, D = 128, fp32 (dashed: peers; a line that stops could not run further)")
    fig.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
