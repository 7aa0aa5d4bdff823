"""Plot temperature (and effective 1/tau) against cosine similarity for the strategies.

python benchmarks/plot_temperatures.py            # writes docs/figures/temperature_vs_similarity.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import cl_plugins as clp  # noqa: E402

TAU_MIN, TAU_MAX = 0.07, 0.2


def curves() -> tuple[torch.Tensor, list[tuple[str, torch.Tensor, dict]]]:
    s = torch.linspace(-0.999, 0.999, 801, dtype=torch.float64)
    out: list[tuple[str, torch.Tensor, dict]] = [
        ("infonce (tau = 0.1)", torch.full_like(s, 0.1), dict(color="black", lw=2)),
    ]
    macl = clp.build_loss("macl", tau0=0.1, alpha=0.5, a0=0.0)
    for a, style in zip((0.2, 0.5, 0.9), (":", "-.", "--")):
        tau = float(macl.temperature(a))
        out.append(
            (f"macl, alignment A = {a} (tau0 0.1, alpha 0.5)", torch.full_like(s, tau), dict(color="tab:red", ls=style))
        )
    profiles = [
        ("cosine", {}, "tab:blue"),
        ("shifted", dict(shift=-0.4, scale=0.7), "tab:cyan"),
        ("linear", {}, "tab:green"),
        ("exponential", {}, "tab:olive"),
        ("monotone", {}, "tab:purple"),
    ]
    for profile, kw, color in profiles:
        tau = clp.dystress_temperature(s, TAU_MIN, TAU_MAX, profile, **kw)
        extra = f" ({', '.join(f'{k} {v}' for k, v in kw.items())})" if kw else ""
        out.append((f"dystress {profile}{extra}", tau, dict(color=color)))
    return s, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(__file__).resolve().parents[1] / "docs" / "figures" / "temperature_vs_similarity.png"
    parser.add_argument("--output", type=Path, default=default, help="PNG file to write")
    args = parser.parse_args()

    s, lines = curves()
    fig, (ax_tau, ax_inv) = plt.subplots(1, 2, figsize=(13, 6.5))
    for label, tau, style in lines:
        ax_tau.plot(s, tau, label=label, **style)
        ax_inv.plot(s, 1 / tau, label=label, **style)
    free = clp.effective_inverse_tau(s)
    ax_inv.plot(s, free, color="tab:orange", lw=2, label="temperature_free: 2 atanh(s) / s")
    ax_tau.set(xlabel="cosine similarity s", ylabel="temperature tau", title="Temperature of a pair")
    ax_inv.set(
        xlabel="cosine similarity s",
        ylabel="effective 1 / tau = logit / s",
        yscale="log",
        title="Effective inverse temperature",
    )
    ax_tau.set_ylim(0, 0.25)
    for ax in (ax_tau, ax_inv):
        ax.grid(alpha=0.3)
    handles, labels = ax_inv.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
