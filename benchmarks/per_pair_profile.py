"""Where a per-pair strategy's time goes beside InfoNCE's: variants that each drop one cost, timed side by side.

* ``infonce``: the scalar-temperature loss;
* ``free map``: a per-pair map that costs nothing (logit 10 s, derivative 10): the price of being a map at all;
* ``dystress without statistics``: DySTreSS's map without its tau sum/min/max over the negatives;
* ``dystress`` and ``temperature_free``, eager and compiled (``compile_maps=True``).

Forward + backward on two views [N, D] in the SimCLR layout with ``kernel="auto"``; the median of ``--repeats``
interleaved rounds after a warm-up (which also compiles), printed as a markdown table with ratios to ``infonce``.

Usage::

    python benchmarks/per_pair_profile.py --n 4096
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cl_plugins as clp  # noqa: E402
from cl_plugins.extension import LogitMap, Pairs  # noqa: E402


class _DySTreSSWithoutStatistics(clp.DySTreSSLoss):
    def logit_map(self, pairs: Pairs) -> LogitMap:
        full = super().logit_map(pairs)
        return LogitMap(full.value, full.with_derivative, bound=full.bound)


class _FreeMap(clp.DySTreSSLoss):
    def logit_map(self, pairs: Pairs) -> LogitMap:
        return LogitMap(lambda s: s * 10, lambda s: (s * 10, torch.full_like(s, 10.0)), bound=10.0)


def variants() -> dict[str, clp.ContrastiveLoss]:
    return {
        "infonce": clp.build_loss("infonce"),
        "free map (10 s)": _FreeMap(),
        "dystress without statistics": _DySTreSSWithoutStatistics(),
        "dystress": clp.build_loss("dystress"),
        "dystress, compiled": clp.build_loss("dystress", compile_maps=True),
        "temperature_free": clp.build_loss("temperature_free"),
        "temperature_free, compiled": clp.build_loss("temperature_free", compile_maps=True),
    }


def _time(loss: clp.ContrastiveLoss, z1: torch.Tensor, z2: torch.Tensor) -> float:
    start = time.perf_counter()
    loss(z1, z2).backward()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096, help="batch size N (the block is [2N, 2N])")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (median reported)")
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    z1, z2 = (torch.randn(args.n, args.dim, generator=g).requires_grad_() for _ in range(2))
    cases = variants()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for loss in cases.values():  # warm-up, and the compiled cases' compilation
        _time(loss, z1, z2)
    for _ in range(args.repeats):
        for name, loss in cases.items():
            times[name].append(_time(loss, z1, z2))
    base = statistics.median(times["infonce"])
    print(f"N = {args.n}, D = {args.dim}, {torch.get_num_threads()} threads, median of {args.repeats}\n")
    print("| variant | ms | × infonce |\n|---|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.1f} | {statistics.median(values) / base:.2f} |")


if __name__ == "__main__":
    main()
