"""The loss at the batch sizes users train with, eager and compiled, beside the hand-written loss: one table.

Per layout (SimCLR's; CLIP's, both directions) and N, forward + backward of InfoNCE (or ``--strategies``) at τ 0.1:
ours eager and ``torch.compile(loss)``, the hand-written ``F.cross_entropy`` of the same layout eager and compiled,
open_clip's ``ClipLoss`` in CLIP's layout (the pinned upstream file; on a GPU also CUDA graphs and Inf-CL), the
ratios ours / hand-written, and per call (eager, on the path a GPU takes) the host syncs
(``aten::_local_scalar_dense``: a ``bool()``, ``float()`` or ``.item()`` of a tensor, which on a GPU waits for every
queued kernel) and the aten operations (each a kernel launch on a GPU), from the profiler; compiled, the
microseconds the guards take that ``torch.compile`` evaluates before each call (timed alone). Times are medians of
interleaved runs after a warm-up (compilation included there), on ``--threads`` threads.

Usage::

    python benchmarks/compiled_step.py                            # N 64 ... 4096, D 128, one thread
    python benchmarks/compiled_step.py --sizes 64 256 --output docs/benchmarks.md --append
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cl_plugins as clp  # noqa: E402
from benchmarks.gpu_kernel_sweep import inf_cl_loss  # noqa: E402
from benchmarks.loss_speed import TAU, inputs, open_clip_loss, plain_clip, plain_simclr, time_cases  # noqa: E402
from cl_plugins.integrations.runs import atomic  # noqa: E402

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: layout -> (our layout arguments, the hand-written loss of that layout)
LAYOUTS: dict[str, tuple[dict, Loss]] = {
    "SimCLR": ({"layout": "simclr"}, plain_simclr),
    "CLIP": ({"layout": "cross_view", "symmetric": True}, plain_clip),
}


def counts(fn: Loss, z1: torch.Tensor, z2: torch.Tensor) -> tuple[int, int]:
    """(host syncs, aten operations) of one forward + backward of ``fn``, on the path a GPU takes: eagerly on the
    CPU a learned temperature's kernels read the logits' bound from the values (the host is the device there, the
    read waits for nothing: :data:`cl_plugins.kernels.contract.BOUND_FROM_VALUES_ON_CPU`), which is off here."""
    from torch.profiler import ProfilerActivity, profile

    from cl_plugins.kernels import contract

    as_on_the_cpu, contract.BOUND_FROM_VALUES_ON_CPU = contract.BOUND_FROM_VALUES_ON_CPU, False
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn(z1, z2).backward()
    finally:
        contract.BOUND_FROM_VALUES_ON_CPU = as_on_the_cpu
    names = [e.name for e in prof.events()]
    return names.count("aten::_local_scalar_dense"), sum(name.startswith("aten::") for name in names)


def guard_us(compiled: Callable, z1: torch.Tensor, z2: torch.Tensor, repeats: int = 2000) -> float | None:
    """Microseconds one evaluation of the guards of ``compiled`` (a ``torch.compile``'d loss module or function,
    called on ``z1``, ``z2`` before) takes: the check ``torch.compile`` makes before each call, timed alone (the
    profiler's "TorchDynamo Cache Lookup" reads several times more). None where this torch version does not expose
    them there (a private API)."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    module = getattr(compiled, "_orig_mod", None)
    target = type(module).forward if module is not None else getattr(compiled, "_torchdynamo_orig_callable", None)
    try:
        check = _debug_get_cache_entry_list(target.__code__)[0].guard_manager.check  # type: ignore[union-attr]
        bound = inspect.signature(target).bind(*([module] if module is not None else []), z1, z2)
    except (AttributeError, IndexError, TypeError):
        return None
    bound.apply_defaults()
    frame = dict(bound.arguments)
    if not check(frame):  # not the entry this call runs
        return None
    start = time.perf_counter()
    for _ in range(repeats):
        check(frame)
    return (time.perf_counter() - start) / repeats * 1e6


def cases(strategy: str, layout: str, device: str) -> dict[str, Loss]:
    """The timed callables of one strategy in one layout (eager and compiled, ours and hand-written; on a GPU
    also compiled with CUDA graphs, ``mode="reduce-overhead"``)."""
    arguments, plain = LAYOUTS[layout]

    def build() -> torch.nn.Module:  # one loss per entry: an eager call must not change the compiled one's state
        return clp.build_host_loss(strategy, host_tau=TAU, feature_dim=128, **arguments).to(device)

    torch._dynamo.reset()  # every case compiles afresh: one loss class's forward would reach the recompile limit
    ours = build()
    found = {"ours": ours, "ours compiled": torch.compile(build()), "hand-written": plain,
             "hand-written compiled": torch.compile(plain)}  # fmt: skip
    if device.startswith("cuda"):
        found["ours graphs"] = torch.compile(build(), mode="reduce-overhead")
        found["hand-written graphs"] = torch.compile(plain, mode="reduce-overhead")
    clip = open_clip_loss() if layout == "CLIP" else None
    if clip is not None:
        found["open_clip ClipLoss"] = clip
    inf_cl = inf_cl_loss(one_direction=False) if layout == "CLIP" and device.startswith("cuda") else None
    if inf_cl is not None:  # Inf-CL's kernels run on a GPU only
        found["Inf-CL"] = inf_cl
    return found


def measure(strategy: str, layout: str, n: int, dim: int, repeats: int, device: str = "cpu") -> dict:
    fns = cases(strategy, layout, device)
    times = time_cases(fns, n, dim, device, repeats)
    z1, z2 = inputs(n, dim, device)
    syncs, ops = counts(fns["ours"], z1, z2)
    plain_syncs, plain_ops = counts(fns["hand-written"], z1, z2)
    guards = [guard_us(fns[name], z1, z2) for name in ("ours compiled", "hand-written compiled")]
    return {"strategy": strategy, "layout": layout, "n": n, "times": times, "syncs": syncs, "ops": ops,
            "plain_syncs": plain_syncs, "plain_ops": plain_ops, "guards_us": guards}  # fmt: skip


def row(r: dict) -> str:
    t = {k: v * 1e3 for k, v in r["times"].items()}
    clip = f"{t['open_clip ClipLoss']:.3f}" if "open_clip ClipLoss" in t else "–"
    eager, compiled = t["ours"] / t["hand-written"], t["ours compiled"] / t["hand-written compiled"]
    guards = " / ".join("–" if g is None else f"{g:.1f}" for g in r.get("guards_us", (None, None)))
    graphs = (f" {t['ours graphs']:.3f} | {t['hand-written graphs']:.3f} | "
              f"{t['ours graphs'] / t['hand-written graphs']:.2f} | "
              f"{t['Inf-CL']:.3f} |" if "Inf-CL" in t else " – |") if "ours graphs" in t else ""  # fmt: skip
    return (f"| {r['strategy']} | {r['layout']} | {r['n']:,} | {t['ours']:.3f} | {t['ours compiled']:.3f} | "
            f"{t['hand-written']:.3f} | {t['hand-written compiled']:.3f} | {clip} | {eager:.2f} | {compiled:.2f} | "
            f"{r['syncs']} / {r['plain_syncs']} | {r['ops']} / {r['plain_ops']} | {guards} |{graphs}")  # fmt: skip


def table(results: list[dict], args: argparse.Namespace) -> str:
    gpu = args.device.startswith("cuda")
    cpu = f"{platform.processor() or platform.machine()}, {args.threads} thread(s)"
    where = torch.cuda.get_device_name() if gpu else cpu
    head = (f"### The loss at small batches, eager and compiled ({datetime.date.today()}, {where}, "
            f"torch {torch.__version__}, D {args.dim}, fp32, forward + backward, ms)\n\n"
            "| strategy | layout | N | ours | ours compiled | hand-written | hand-written compiled | open_clip | "
            "eager ratio | compiled ratio | syncs (ours / hand) | aten ops (ours / hand) | guards µs (ours / hand) |"
            + (" ours CUDA graphs | hand-written CUDA graphs | graphs ratio | Inf-CL |" if gpu else "")
            + "\n|" + "---|" * (17 if gpu else 13))  # fmt: skip
    return "\n".join([head, *(row(r) for r in results)]) + "\n"


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--output`` and ``--append``, which :func:`write_table` reads."""
    parser.add_argument("--output", default="", help="write the table to this file (default: print it)")
    parser.add_argument("--append", action="store_true", help="append to --output instead of replacing it")


def write_table(text: str, args: argparse.Namespace) -> None:
    """Print ``text``, or write it to ``args.output`` (after its text with ``args.append``) through a temporary
    sibling renamed over it, so that a kill leaves the old file or the new one."""
    if not args.output:
        print(text)
        return
    path = Path(args.output)
    before = path.read_text(encoding="utf-8") + "\n" if args.append and path.exists() else ""
    atomic.write_text(path, before + text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024, 4096], help="batch sizes N")
    parser.add_argument("--dim", type=int, default=128, help="feature width D (default: 128)")
    parser.add_argument("--strategies", nargs="+", default=["infonce"], help="registry names (default: infonce)")
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS), help="pair layouts")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda adds CUDA-graph columns; default: cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1, a quiet CPU)")
    parser.add_argument("--repeats", type=int, default=11, help="interleaved timed runs, at least (default: 11)")
    add_output_arguments(parser)
    args = parser.parse_args()
    unknown = sorted(set(args.strategies) - set(clp.available_losses()))
    if unknown:
        parser.error(f"--strategies {' '.join(unknown)}: not in the registry ({', '.join(clp.available_losses())})")
    torch.set_num_threads(args.threads)
    results = []
    for strategy in args.strategies:
        for layout in args.layouts:
            for n in args.sizes:
                results.append(measure(strategy, layout, n, args.dim, args.repeats, args.device))
                print(row(results[-1]), flush=True)
    write_table(table(results, args), args)


if __name__ == "__main__":
    main()
