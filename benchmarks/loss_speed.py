"""Forward+backward time and peak memory of every strategy against peer implementations.

Compared on the same layout and inputs (two views [N, D], fp32):

* ``F.cross_entropy``: the hand-written NT-Xent most codebases carry (SimCLR layout) and the
  SimCSE / CLIP form (cross-view layout);
* pytorch-metric-learning's ``NTXentLoss`` (SimCLR layout, labels give the positives);
* info-nce-pytorch's ``InfoNCE`` (cross-view layout);
* lightly's ``NTXentLoss`` when it imports (it needs torchvision, which has no CPU build here);
* every cl-plugins strategy (SimCLR layout; InfoNCE also cross-view).

Time is the median of ``--repeats`` runs after one warm-up run. Peak memory is measured in a
fresh subprocess per case: on CPU the rise of the process's peak resident set (VmHWM, reset
through /proc/self/clear_refs) over one forward+backward, with glibc's mmap threshold fixed so
freed tensors return to the OS; on CUDA ``torch.cuda.max_memory_allocated``.

Usage::

    python benchmarks/loss_speed.py                        # N in 256 1024 4096, D 128, CPU
    python benchmarks/loss_speed.py --device cuda --output docs/benchmarks.md --append
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cl_plugins as clp  # noqa: E402

TAU = 0.1
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# ---------------------------------------------------------------------------- peers
def plain_simclr(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = z @ z.T / TAU
    logits.fill_diagonal_(float("-inf"))
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(logits, labels)


def plain_cross_view(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    logits = F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).T / TAU
    return F.cross_entropy(logits, torch.arange(z1.shape[0], device=z1.device))


def pml_ntxent() -> Loss | None:
    try:
        from pytorch_metric_learning.losses import NTXentLoss
    except ImportError:
        return None
    loss = NTXentLoss(temperature=TAU)

    def fn(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        labels = torch.arange(z1.shape[0], device=z1.device).repeat(2)
        return loss(torch.cat([z1, z2]), labels)

    return fn


def info_nce() -> Loss | None:
    try:
        from info_nce import InfoNCE
    except ImportError:
        return None
    return InfoNCE(temperature=TAU)


def lightly_ntxent() -> Loss | None:
    try:
        from lightly.loss import NTXentLoss
    except Exception:  # lightly imports torchvision at package import
        return None
    return NTXentLoss(temperature=TAU)


# ---------------------------------------------------------------------------- cases
def ours(name: str, **kwargs) -> Callable[[int], Loss]:
    """Every strategy in the same host setting: τ = TAU mapped by the strategy itself, the inputs' width."""
    return lambda dim: clp.build_host_loss(name, host_tau=TAU, feature_dim=dim, **kwargs)


def label_of(name: str) -> str:
    return f"{name} (3 heads)" if clp.get_loss_class(name).feature_dim_arg else name


CASES: dict[str, tuple[str, Callable[[int], Loss | None]]] = {
    # label: (layout, factory of the feature width)
    "F.cross_entropy NT-Xent": ("simclr", lambda dim: plain_simclr),
    "lightly NTXentLoss": ("simclr", lambda dim: lightly_ntxent()),
    **{label_of(name): ("simclr", ours(name)) for name in clp.available_losses()},
    "amcl mle (3 heads)": ("simclr", ours("amcl", form="mle")),  # the paper's MLE form: O(N²·hidden)
    "F.cross_entropy (cross-view)": ("cross_view", lambda dim: plain_cross_view),
    "info-nce-pytorch InfoNCE": ("cross_view", lambda dim: info_nce()),
    "infonce (cross-view)": ("cross_view", ours("infonce", layout="cross_view")),
    # last: its O(N^3) allocations disturb the timings of whatever runs right after it
    "pytorch-metric-learning NTXentLoss": ("simclr", lambda dim: pml_ntxent()),
}
SCALAR = {label_of(n) for n in clp.available_losses() if clp.get_loss_class(n).scalar_temperature}


def build(label: str, dim: int, device: str) -> Loss | None:
    fn = CASES[label][1](dim)
    if isinstance(fn, torch.nn.Module):
        fn = fn.to(device)
    return fn


def inputs(n: int, dim: int, device: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    z1 = torch.randn(n, dim, generator=g).to(device).requires_grad_()
    z2 = torch.randn(n, dim, generator=g).to(device).requires_grad_()
    return z1, z2


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_cases(
    fns: dict[str, Loss], n: int, dim: int, device: str, repeats: int, budget_s: float = 0.5
) -> dict[str, float]:
    """Median forward+backward time of each case, runs interleaved round-robin so that slow
    drifts of the machine (frequency, other load) hit every case alike. At least ``repeats``
    rounds, more for fast cases (until about ``budget_s`` per case is spent)."""
    z1, z2 = inputs(n, dim, device)
    first = {}
    for label, fn in fns.items():  # warm-up
        sync(device)
        start = time.perf_counter()
        fn(z1, z2).backward()
        sync(device)
        first[label] = time.perf_counter() - start
    rounds = max(repeats, min(50, int(budget_s / max(max(first.values()), 1e-6))))
    times: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            z1.grad = z2.grad = None
            sync(device)
            start = time.perf_counter()
            fn(z1, z2).backward()
            sync(device)
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(t) for label, t in times.items()}


# ---------------------------------------------------------------------------- memory
def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    assert match
    return int(match.group(1))


def memory_probe(label: str, n: int, dim: int, device: str) -> float:
    """Peak extra MiB of one forward+backward (run in a fresh process)."""
    torch.manual_seed(0)
    fn = build(label, dim, device)
    assert fn is not None
    z1, z2 = inputs(n, dim, device)
    fn(z1, z2).backward()
    z1.grad = z2.grad = None
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(z1, z2).backward()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _rss_kib("VmRSS")
    fn(z1, z2).backward()
    return (_rss_kib("VmHWM") - base) / 1024


def measure_memory(label: str, n: int, dim: int, device: str) -> float | None:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    cmd = [sys.executable, __file__, "--memory-probe", label, str(n), str(dim), "--device", device]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return None
    return float(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- main
def machine(device: str) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = re.findall(r"model name\s*:\s*(.+)", f.read())
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} threads"


def fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096], help="batch sizes N")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (median reported)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="subset of case labels")
    parser.add_argument(
        "--amcl-mle-max-n",
        type=int,
        default=1024,
        help="skip AMCL's mle form above this N (its cost is O(N^2 * hidden) per head)",
    )
    parser.add_argument(
        "--pml-max-n",
        type=int,
        default=256,
        help="skip pytorch-metric-learning above this N: its NTXentLoss builds a "
        "[2N, 2N(2N-2)] positive-by-negative-pair matrix, O(N^3) memory",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--output", type=Path, help="write the markdown table to this file")
    parser.add_argument("--append", action="store_true", help="append to --output instead of overwriting")
    parser.add_argument("--json", type=Path, help="also write raw results as JSON")
    parser.add_argument("--memory-probe", nargs=3, metavar=("LABEL", "N", "DIM"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.memory_probe:
        label, n, dim = args.memory_probe
        print(memory_probe(label, int(n), int(dim), args.device))
        return

    results = []
    for n in args.sizes:
        fns: dict[str, Loss] = {}
        for label in args.cases:
            layout = CASES[label][0]
            skip = None
            if "mle" in label and n > args.amcl_mle_max_n:
                skip = "skipped: O(N²·hidden) time (--amcl-mle-max-n)"
            elif label.startswith("pytorch-metric-learning") and n > args.pml_max_n:
                skip = "skipped: O(N³) memory (--pml-max-n)"
            fn = None if skip else build(label, args.dim, args.device)
            if fn is None:
                skip = skip or "not importable here"
                results.append(dict(case=label, layout=layout, n=n, ms=None, mib=None, note=skip))
            else:
                fns[label] = fn
        # the slow ones (AMCL's LSE form, pytorch-metric-learning) are timed on their own
        slow = {k: v for k, v in fns.items() if "lse" in k or k.startswith("pytorch-metric")}
        fast = {k: v for k, v in fns.items() if k not in slow}
        timings = time_cases(fast, n, args.dim, args.device, args.repeats)
        for label, fn in slow.items():
            timings.update(time_cases({label: fn}, n, args.dim, args.device, 1 if n > 512 else 3))
        for label in fns:
            ms = 1e3 * timings[label]
            mib = None if args.no_memory else measure_memory(label, n, args.dim, args.device)
            results.append(dict(case=label, layout=CASES[label][0], n=n, ms=ms, mib=mib, note=""))
            print(f"N={n:5d} {label:38s} {ms:10.2f} ms  {fmt(mib, '8.1f')} MiB", flush=True)
        order = {label: i for i, label in enumerate(args.cases)}
        results.sort(key=lambda r: (r["n"], order[r["case"]]))

    def ref(n: int, layout: str, key: str) -> dict | None:
        label = {
            "ours": "infonce" if layout == "simclr" else "infonce (cross-view)",
            "ce": "F.cross_entropy NT-Xent" if layout == "simclr" else "F.cross_entropy (cross-view)",
        }[key]
        return next((r for r in results if r["n"] == n and r["case"] == label), None)

    lines = [
        f"### {machine(args.device)}: D = {args.dim}, fp32, forward + backward",
        "",
        f"torch {torch.__version__}, {datetime.date.today()}, median of ≥ {args.repeats} interleaved runs; ratios are "
        "to our `infonce` and to the hand-written `F.cross_entropy` on the same layout and N.",
        "",
        "| N | case | layout | time (ms) | × our infonce | × F.cross_entropy | peak memory (MiB) "
        "| memory × our infonce |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ours_r, ce_r = ref(r["n"], r["layout"], "ours"), ref(r["n"], r["layout"], "ce")
        t_ours = r["ms"] / ours_r["ms"] if r["ms"] and ours_r and ours_r["ms"] else None
        t_ce = r["ms"] / ce_r["ms"] if r["ms"] and ce_r and ce_r["ms"] else None
        m_ours = r["mib"] / ours_r["mib"] if r["mib"] and ours_r and ours_r["mib"] else None
        name = r["case"] + (" *" if r["case"] in SCALAR else "")
        lines.append(
            f"| {r['n']} | {name} | {r['layout']} | {fmt(r['ms'], '.2f') if r['ms'] else r['note']} | "
            f"{fmt(t_ours, '.2f')} | {fmt(t_ce, '.2f')} | {fmt(r['mib'], '.1f')} | {fmt(m_ours, '.2f')} |"
        )
    lines += ["", "\\* scalar-temperature strategy (target: ≤ 1.15 × our infonce).", ""]
    table = "\n".join(lines)
    print()
    print(table)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        mode = "a" if args.append else "w"
        with open(args.output, mode) as f:
            f.write(table + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
