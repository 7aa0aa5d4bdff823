"""The loss-speed targets, met or not, computed from ``loss_speed.py``'s JSON rows (no number typed by hand).

    python benchmarks/loss_targets.py docs/results/loss_speed.json >> docs/benchmarks.md

Targets (2 CPU cores): every non-AMCL strategy ≤ 1.25 × our ``infonce`` at N ≥ 1024 (scalar-τ ≤ 1.05 ×) in both
layouts; our ``infonce`` ≤ 1.0 × ``F.cross_entropy`` at every N ≥ 256 in both layouts; at N = 65,536 in the SimCLR
layout every non-AMCL strategy within 1 GiB of loss memory where the dense baselines cannot run; at N = 16,384
≤ 1/20 of ``F.cross_entropy``'s memory and no more of its time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cl_plugins as clp

LAYOUTS = {"simclr": ("", "infonce", "F.cross_entropy NT-Xent"),
           "cross_view": (" (cross-view)", "infonce (cross-view)", "F.cross_entropy (cross-view)")}  # fmt: skip


def _row(rows: list[dict], case: str, n: int) -> dict | None:
    return next((r for r in rows if r["case"] == case and r["n"] == n), None)


def _ratio(rows: list[dict], a: str, b: str, n: int, key: str = "ms") -> float | None:
    ra, rb = _row(rows, a, n), _row(rows, b, n)
    return ra[key] / rb[key] if ra and rb and ra.get(key) and rb.get(key) else None


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "met" if ok else "**not met**"


def strategy_rows(rows: list[dict], sizes: list[int]) -> list[str]:
    names = [n for n in clp.available_losses() if not clp.get_loss_class(n).feature_dim_arg]  # AMCL has heads
    out = []
    for layout, (suffix, ours, _) in LAYOUTS.items():
        for n in (s for s in sizes if s >= 1024):
            for scalar in (True, False):
                group = [m for m in names if clp.get_loss_class(m).scalar_temperature == scalar]
                ratios = {m: _ratio(rows, m + suffix, ours, n) for m in group}
                known = {m: r for m, r in ratios.items() if r is not None}
                if not known:
                    continue
                worst = max(known, key=known.get)
                limit = 1.05 if scalar else 1.25
                kind = "scalar-τ" if scalar else "per-pair"
                out.append(f"| {kind} strategies ≤ {limit} × our infonce | {layout} | {n} | worst `{worst}` "
                           f"{known[worst]:.2f} × | {_verdict(known[worst] <= limit)} |")  # fmt: skip
    return out


def infonce_rows(rows: list[dict], sizes: list[int]) -> list[str]:
    out = []
    for layout, (_, ours, ce) in LAYOUTS.items():
        for n in (s for s in sizes if s >= 256):
            ratio = _ratio(rows, ours, ce, n)
            ce_row = _row(rows, ce, n)
            shown = f"{ratio:.2f} ×" if ratio is not None else (ce_row or {}).get("note", "not measured")
            out.append(f"| our infonce ≤ 1.0 × F.cross_entropy | {layout} | {n} | {shown} | "
                       f"{_verdict(None if ratio is None else ratio <= 1.0)} |")  # fmt: skip
    return out


def memory_rows(rows: list[dict]) -> list[str]:
    out = []
    names = [n for n in clp.available_losses() if not clp.get_loss_class(n).feature_dim_arg]
    big = [(_row(rows, m, 65536) or {}).get("mib") for m in names]
    if any(b is not None for b in big):
        worst = max((b, m) for b, m in zip(big, names) if b is not None)
        ce = _row(rows, "F.cross_entropy NT-Xent", 65536) or {}
        out.append(f"| every strategy ≤ 1 GiB at N = 65,536 | simclr | 65536 | worst `{worst[1]}` {worst[0]:.0f} MiB "
                   f"({sum(b is not None for b in big)} of {len(names)} ran); F.cross_entropy: "
                   f"{ce.get('note') or 'ran'} | {_verdict(worst[0] <= 1024 and all(b is not None for b in big))} |")
    for layout, (_, ours, ce) in LAYOUTS.items():
        mem, time = _ratio(rows, ours, ce, 16384, "mib"), _ratio(rows, ours, ce, 16384)
        if mem is not None and time is not None:
            out.append(f"| memory ≤ 1/20 and time ≤ 1 × F.cross_entropy at N = 16,384 | {layout} | 16384 | "
                       f"memory {mem:.3f} ×, time {time:.2f} × | {_verdict(mem <= 0.05 and time <= 1.0)} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", type=Path, help="rows of benchmarks/loss_speed.py --json")
    args = parser.parse_args()
    rows = json.loads(args.json.read_text())
    sizes = sorted({r["n"] for r in rows})
    print("| target | layout | N | measured | verdict |")
    print("|---|---|---:|---|---|")
    for line in strategy_rows(rows, sizes) + infonce_rows(rows, sizes) + memory_rows(rows):
        print(line)


if __name__ == "__main__":
    main()
