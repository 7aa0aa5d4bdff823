"""Two views checked and normalised in one pass over their stacked rows, or one by one: the measurement behind
:data:`cl_plugins.layouts.JOIN_VIEWS_MAX`.

Per layout (SimCLR's; CLIP's, both directions) and N, forward + backward of InfoNCE at τ 0.1 with the two views in one
pass (``layouts.unit_views`` stacking them) and one by one, interleaved, on ``--threads`` threads; the ratio one
pass / one by one and the aten operations of each (one call, from the profiler). One pass keeps the stacked copy
of the views for backward: the extra memory is 2 N D entries.

Usage::

    python benchmarks/views_pass.py                          # N 64 ... 4096, D 128, one thread
    python benchmarks/views_pass.py --output docs/benchmarks.md --append
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cl_plugins as clp  # noqa: E402
from benchmarks.compiled_step import LAYOUTS, add_output_arguments, counts, write_table  # noqa: E402
from benchmarks.loss_speed import TAU, inputs, time_cases  # noqa: E402
from cl_plugins import layouts  # noqa: E402

#: JOIN_VIEWS_MAX that makes every pair of views take one pass, and none
PASSES = {"one pass": sys.maxsize, "one by one": 0}


def joined(loss: torch.nn.Module, limit: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``loss`` called with :data:`cl_plugins.layouts.JOIN_VIEWS_MAX` at ``limit`` (restored after the call)."""

    def call(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        before, layouts.JOIN_VIEWS_MAX = layouts.JOIN_VIEWS_MAX, limit
        try:
            return loss(z1, z2)
        finally:
            layouts.JOIN_VIEWS_MAX = before

    return call


def measure(layout: str, n: int, dim: int, repeats: int) -> str:
    arguments, _ = LAYOUTS[layout]
    fns = {name: joined(clp.build_host_loss("infonce", host_tau=TAU, feature_dim=dim, **arguments), limit)
           for name, limit in PASSES.items()}  # fmt: skip
    times = time_cases(fns, n, dim, "cpu", repeats)
    z1, z2 = inputs(n, dim, "cpu")
    ops = [counts(fn, z1, z2)[1] for fn in fns.values()]
    one, apart = (times[name] * 1e3 for name in PASSES)
    return (f"| {layout} | {n:,} | {n * dim:,} | {one:.3f} | {apart:.3f} | {one / apart:.2f} | "
            f"{ops[0]} / {ops[1]} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024, 4096], help="batch sizes N")
    parser.add_argument("--dim", type=int, default=128, help="feature width D (default: 128)")
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS), help="pair layouts")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1, a quiet CPU)")
    parser.add_argument("--repeats", type=int, default=11, help="interleaved timed runs, at least (default: 11)")
    add_output_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    where = f"{platform.processor() or platform.machine()}, {args.threads} thread(s)"
    lines = [f"### Two views in one pass or one by one ({datetime.date.today()}, {where}, torch {torch.__version__}, "
             f"D {args.dim}, InfoNCE, forward + backward, ms)\n",
             "| layout | N | entries a view | one pass | one by one | ratio | aten ops (one pass / one by one) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for layout in args.layouts:
        for n in args.sizes:
            lines.append(measure(layout, n, args.dim, args.repeats))
            print(lines[-1], flush=True)
    write_table("\n".join(lines) + "\n", args)


if __name__ == "__main__":
    main()
