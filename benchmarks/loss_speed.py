"""Forward+backward time and peak memory of every strategy against peer implementations.

Compared on the same layout and inputs (two views [N, D], fp32):

* ``F.cross_entropy``: the hand-written NT-Xent most codebases carry (SimCLR layout), the
  SimCSE form (cross-view layout) and the CLIP form (cross-view, both directions);
* pytorch-metric-learning's ``NTXentLoss`` (SimCLR layout, labels give the positives);
* info-nce-pytorch's ``InfoNCE`` (cross-view layout);
* sentence-transformers' ``MultipleNegativesRankingLoss`` and ``CachedMultipleNegativesRankingLoss`` (its
  loss on given embeddings, the cached one chunked by its ``mini_batch_size`` rows with backward per chunk);
* open_clip's ``ClipLoss``, loaded from ``../shared/upstream/open_clip`` (cross-view, both directions);
* lightly's ``NTXentLoss`` when it imports (it needs torchvision, which has no CPU build here);
* every cl-plugins strategy in both layouts, with ``kernel="auto"``; InfoNCE also on each kernel.

Time is the median of ``--repeats`` interleaved runs after one warm-up run. Peak memory is measured
in a fresh subprocess per case: on CPU the rise of the process's peak resident set (VmHWM, reset
through /proc/self/clear_refs) over one forward+backward, with glibc's mmap threshold fixed so
freed tensors return to the OS; on CUDA ``torch.cuda.max_memory_allocated``. From
``--single-run-from`` on (default N = 16384) each case runs once, in its fresh process, for both.
A case whose [A, M] matrices cannot fit in the memory available is reported as such, not run.

Usage::

    python benchmarks/loss_speed.py                        # N in 256 ... 65536, D 128, CPU
    python benchmarks/loss_speed.py --sizes 256 1024 --json docs/results/loss_speed.json --reuse
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


def plain_clip(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    logits = F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).T / TAU
    labels = torch.arange(z1.shape[0], device=z1.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def open_clip_loss() -> Loss | None:
    import importlib.util

    path = ROOT.parent / "shared" / "upstream" / "open_clip" / "src" / "open_clip" / "loss.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("upstream_open_clip_loss", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    loss = module.ClipLoss()
    # CLIP normalises its features in the model; the loss takes them normalised
    return lambda z1, z2: loss(F.normalize(z1, dim=1), F.normalize(z2, dim=1), 1 / TAU)


def _sentence_transformers(cached: bool) -> Loss | None:
    try:
        from sentence_transformers.sentence_transformer import losses
    except ImportError:
        return None
    if not cached:
        mnrl = losses.MultipleNegativesRankingLoss(torch.nn.Sequential(torch.nn.Identity()), scale=1 / TAU)
        return lambda z1, z2: mnrl.compute_loss_from_embeddings([z1, z2], None)
    cached_loss = losses.CachedMultipleNegativesRankingLoss(torch.nn.Sequential(torch.nn.Identity()), scale=1 / TAU)

    class _Chunked(torch.autograd.Function):
        """Its loss part: ``calculate_loss(with_backward=True)`` runs backward per ``mini_batch_size`` rows."""

        @staticmethod
        def forward(ctx, z1, z2):  # type: ignore[override]
            reps = [[z1.detach().requires_grad_()], [z2.detach().requires_grad_()]]
            with torch.enable_grad():
                value = cached_loss.calculate_loss(reps, with_backward=True)
            ctx.save_for_backward(reps[0][0].grad, reps[1][0].grad)
            return value.detach()

        @staticmethod
        def backward(ctx, grad):  # type: ignore[override]
            g1, g2 = ctx.saved_tensors
            return g1 * grad, g2 * grad

    return _Chunked.apply


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


def pml_supcon(classes: int = 100) -> Loss | None:
    """pytorch-metric-learning's ``SupConLoss`` on both views, pair i labelled i mod ``classes``."""
    try:
        from pytorch_metric_learning.losses import SupConLoss
    except ImportError:
        return None
    loss = SupConLoss(temperature=TAU)

    def fn(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        labels = (torch.arange(z1.shape[0], device=z1.device) % classes).repeat(2)
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


def labelled(factory: Callable[[int], Loss], classes: int = 100) -> Callable[[int], Loss]:
    """A loss that takes labels, with pair i labelled i mod ``classes`` (a batch of ``classes`` classes)."""

    def make(dim: int) -> Loss:
        loss = factory(dim)

        def fn(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
            return loss(z1, z2, labels=torch.arange(z1.shape[0], device=z1.device) % classes)

        return fn

    return make


def label_of(name: str) -> str:
    return f"{name} (3 heads)" if clp.get_loss_class(name).feature_dim_arg else name


CROSS = " (cross-view)"
CASES: dict[str, tuple[str, Callable[[int], Loss | None]]] = {
    # label: (layout, factory of the feature width)
    "F.cross_entropy NT-Xent": ("simclr", lambda dim: plain_simclr),
    "lightly NTXentLoss": ("simclr", lambda dim: lightly_ntxent()),
    **{label_of(name): ("simclr", ours(name)) for name in clp.available_losses()},
    "infonce [fused]": ("simclr", ours("infonce", kernel="fused")),
    "infonce [stream]": ("simclr", ours("infonce", kernel="stream")),
    "amcl mle (3 heads)": ("simclr", ours("amcl", form="mle")),  # the paper's MLE form: O(N²·hidden)
    # label_policy="exclude" on 100 classes: the label masks' cost beside the unlabelled rows above
    **{f"{name} + same_label": ("simclr", labelled(ours(name, label_policy="exclude")))
       for name in ("infonce", "macl", "dystress", "temperature_free")},  # fmt: skip
    "infonce [stream] + same_label": ("simclr", labelled(ours("infonce", kernel="stream", label_policy="exclude"))),
    # the per-pair maps compiled into one loop (compile_maps=True; the first call compiles, outside the timings)
    **{f"{name} [compiled]": ("simclr", ours(name, compile_maps=True)) for name in ("dystress", "temperature_free")},
    **{f"{name} [compiled]{CROSS}": ("cross_view", ours(name, layout="cross_view", compile_maps=True))
       for name in ("dystress", "temperature_free")},  # fmt: skip
    # label_policy="positives_out" (supervised contrastive) on 100 classes, each form, and its peer
    **{f"infonce + supcon {form}": ("simclr", labelled(ours("infonce", label_policy=f"positives_{form}")))
       for form in ("out", "in", "pair")},  # fmt: skip
    "macl + supcon out": ("simclr", labelled(ours("macl", label_policy="positives_out"))),
    "infonce [stream] + supcon out": ("simclr", labelled(ours("infonce", kernel="stream",
                                                              label_policy="positives_out"))),
    "infonce [stream] + supcon out (1000 classes)": ("simclr", labelled(ours("infonce", kernel="stream",
                                                                             label_policy="positives_out"),
                                                                        classes=1000)),
    "pytorch-metric-learning SupConLoss (100 classes)": ("simclr", lambda dim: pml_supcon()),
    "F.cross_entropy" + CROSS: ("cross_view", lambda dim: plain_cross_view),
    "info-nce-pytorch InfoNCE": ("cross_view", lambda dim: info_nce()),
    "sentence-transformers MNRL": ("cross_view", lambda dim: _sentence_transformers(cached=False)),
    "sentence-transformers CachedMNRL (mini-batch 32)": ("cross_view", lambda dim: _sentence_transformers(cached=True)),
    **{label_of(name) + CROSS: ("cross_view", ours(name, layout="cross_view")) for name in clp.available_losses()
       if "cross_view" in clp.get_loss_class(name).layouts},
    "F.cross_entropy CLIP (both directions)": ("cross_view-sym", lambda dim: plain_clip),
    "open_clip ClipLoss": ("cross_view-sym", lambda dim: open_clip_loss()),
    "infonce (cross-view, symmetric)": ("cross_view-sym", ours("infonce", layout="cross_view", symmetric=True)),
    # the per-pair maps in CLIP's layout (both directions), beside our infonce's
    **{f"{name} (CLIP)": ("cross_view-sym", ours(name, layout="cross_view", symmetric=True))
       for name in ("dystress", "temperature_free")},  # fmt: skip
    # last: its O(N^3) allocations disturb the timings of whatever runs right after it
    "pytorch-metric-learning NTXentLoss": ("simclr", lambda dim: pml_ntxent()),
}
SCALAR = {label_of(n) + x for n in clp.available_losses() if clp.get_loss_class(n).scalar_temperature
          for x in ("", CROSS)}  # fmt: skip
#: copies of the [A, M] float32 matrix a case keeps at its peak (an estimate, to refuse what cannot fit)
DENSE_COPIES = {"F.cross_entropy": 3, "info-nce": 3, "sentence-transformers MNRL": 3, "lightly": 3,
                "open_clip": 4, "pytorch-metric": 3, "amcl": 4, "infonce [fused]": 1.5}  # fmt: skip


def anchors_candidates(layout: str, n: int) -> tuple[int, int]:
    return (2 * n, 2 * n) if layout == "simclr" else (n, n)


def dense_gib(label: str, layout: str, n: int) -> float:
    """GiB of [A, M] matrices the case keeps (0 for the streaming and chunked ones)."""
    a, m = anchors_candidates(layout, n)
    copies = next((c for prefix, c in DENSE_COPIES.items() if label.startswith(prefix)), None)
    if copies is None and not label.startswith(("infonce [stream]", "sentence-transformers CachedMNRL")):
        copies = 0 if a * m >= clp.kernels.dispatch.STREAM_FROM_ELEMENTS else 1.5
    return (copies or 0) * a * m * 4 * (2 if layout == "cross_view-sym" else 1) / 2**30


def available_gib() -> float:
    with open("/proc/meminfo") as f:
        return int(re.search(r"MemAvailable:\s+(\d+) kB", f.read()).group(1)) / 2**20


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


def memory_probe(label: str, n: int, dim: int, device: str, warm_up: bool = True) -> tuple[float, float]:
    """(ms, peak extra MiB) of one forward+backward, after a warm-up run unless ``warm_up=False`` (run in a
    fresh process)."""
    torch.manual_seed(0)
    fn = build(label, dim, device)
    assert fn is not None
    z1, z2 = inputs(n, dim, device)
    if warm_up:
        fn(z1, z2).backward()
        z1.grad = z2.grad = None
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        start = time.perf_counter()
        fn(z1, z2).backward()
        torch.cuda.synchronize()
        return 1e3 * (time.perf_counter() - start), (torch.cuda.max_memory_allocated() - base) / 2**20
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _rss_kib("VmRSS")
    start = time.perf_counter()
    fn(z1, z2).backward()
    return 1e3 * (time.perf_counter() - start), (_rss_kib("VmHWM") - base) / 1024


def measure_memory(label: str, n: int, dim: int, device: str, warm_up: bool = True) -> tuple[float, float] | None:
    # after a warm-up, freed tensors must go back to the OS for the second run's peak to show (glibc thresholds
    # fixed); a single run from a fresh process needs no such setting, and forcing every tile of the streaming
    # kernel through mmap would slow down exactly the run being timed
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0") if warm_up else None
    cmd = [sys.executable, __file__, "--memory-probe", label, str(n), str(dim), "--device", device]
    proc = subprocess.run(cmd + ([] if warm_up else ["--no-warm-up"]), capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return None
    ms, mib = proc.stdout.strip().splitlines()[-1].split()
    return float(ms), float(mib)


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


REFERENCES = {  # layout: (our infonce, the hand-written F.cross_entropy)
    "simclr": ("infonce", "F.cross_entropy NT-Xent"),
    "cross_view": ("infonce" + CROSS, "F.cross_entropy" + CROSS),
    "cross_view-sym": ("infonce (cross-view, symmetric)", "F.cross_entropy CLIP (both directions)"),
}


def skip_reason(label: str, layout: str, n: int, args: argparse.Namespace) -> str | None:
    if "mle" in label and n > args.amcl_mle_max_n:
        return "skipped: O(N²·hidden) time (--amcl-mle-max-n)"
    # NTXentLoss's pair-by-pair matrix is O(N³); SupConLoss works on the [2N, 2N] matrix (several copies)
    if label.startswith("pytorch-metric-learning NTXentLoss") and n > args.pml_max_n:
        return "skipped: O(N³) memory (--pml-max-n)"
    need, have = dense_gib(label, layout, n), available_gib()
    if need > 0.8 * have:
        return f"cannot run here: its [A, M] matrices need ≈ {need:.0f} GiB, {have:.0f} GiB available"
    return None


def measure_size(n: int, labels: list[str], args: argparse.Namespace) -> list[dict]:
    """Rows of one N: interleaved timing + a memory probe each, or (large N) one fresh-process run each."""
    rows, fns = [], {}
    for label in labels:
        layout = CASES[label][0]
        skip = skip_reason(label, layout, n, args)
        fn = None if skip else build(label, args.dim, args.device)
        if fn is None:
            rows.append(dict(case=label, layout=layout, n=n, ms=None, mib=None, note=skip or "not importable here"))
        else:
            fns[label] = fn
    single = n >= args.single_run_from
    timings: dict[str, float] = {}
    if not single:
        slow = {k: v for k, v in fns.items() if "lse" in k or k.startswith("pytorch-metric")}
        timings = time_cases({k: v for k, v in fns.items() if k not in slow}, n, args.dim, args.device, args.repeats)
        for label, fn in slow.items():
            timings.update(time_cases({label: fn}, n, args.dim, args.device, 1 if n > 512 else 3))
    for label in fns:
        probe = None if args.no_memory and not single else measure_memory(label, n, args.dim, args.device, not single)
        ms = probe[0] if single and probe else (1e3 * timings[label] if label in timings else None)
        note = "" if ms is not None else "failed (killed: out of memory?)"
        rows.append(dict(case=label, layout=CASES[label][0], n=n, ms=ms, mib=probe[1] if probe else None,
                         note=note + (" one run" if single and ms is not None else "")))  # fmt: skip
        print(f"N={n:5d} {label:48s} {fmt(ms, '10.2f')} ms  {fmt(rows[-1]['mib'], '8.1f')} MiB", flush=True)
    return rows


def table(results: list[dict], args: argparse.Namespace) -> str:
    def ref(n: int, layout: str, which: int) -> dict | None:
        label = REFERENCES[layout][which]
        return next((r for r in results if r["n"] == n and r["case"] == label), None)

    lines = [
        f"### {machine(args.device)}: D = {args.dim}, fp32, forward + backward",
        "",
        f"torch {torch.__version__}, {datetime.date.today()}, median of ≥ {args.repeats} interleaved runs (from "
        f"N = {args.single_run_from}: one run in a fresh process); ratios are to our `infonce` and to the "
        "hand-written `F.cross_entropy` on the same layout and N.",
        "",
        "| N | case | layout | time (ms) | × our infonce | × F.cross_entropy | peak memory (MiB) "
        "| memory × F.cross_entropy |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ours_r, ce_r = ref(r["n"], r["layout"], 0), ref(r["n"], r["layout"], 1)
        t_ours = r["ms"] / ours_r["ms"] if r["ms"] and ours_r and ours_r["ms"] else None
        t_ce = r["ms"] / ce_r["ms"] if r["ms"] and ce_r and ce_r["ms"] else None
        m_ce = r["mib"] / ce_r["mib"] if r["mib"] and ce_r and ce_r["mib"] else None
        name = r["case"] + (" *" if r["case"] in SCALAR else "")
        shown = fmt(r["ms"], ".2f") if r["ms"] else r["note"]
        lines.append(f"| {r['n']} | {name} | {r['layout']} | {shown} | {fmt(t_ours, '.2f')} | {fmt(t_ce, '.2f')} "
                     f"| {fmt(r['mib'], '.1f')} | {fmt(m_ce, '.3f')} |")  # fmt: skip
    lines += ["", "\\* scalar-temperature strategy.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096, 16384, 65536], help="batch sizes N")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension D")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (median reported)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="subset of case labels")
    parser.add_argument("--single-run-from", type=int, default=16384,
                        help="from this N on, each case runs once in a fresh process (time and memory together)")
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
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses (small N)")
    parser.add_argument("--output", type=Path, help="write the markdown table to this file")
    parser.add_argument("--append", action="store_true", help="append to --output instead of overwriting")
    parser.add_argument("--json", type=Path, help="raw rows as JSON, written after every N")
    parser.add_argument("--reuse", action="store_true", help="keep the rows of --json measured at the same D")
    parser.add_argument("--memory-probe", nargs=3, metavar=("LABEL", "N", "DIM"), help=argparse.SUPPRESS)
    parser.add_argument("--no-warm-up", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.memory_probe:
        label, n, dim = args.memory_probe
        print(*memory_probe(label, int(n), int(dim), args.device, warm_up=not args.no_warm_up))
        return

    order = {label: i for i, label in enumerate(CASES)}
    results = json.loads(args.json.read_text()) if args.reuse and args.json and args.json.is_file() else []
    results = [r for r in results if r.get("dim", args.dim) == args.dim and r["case"] in order]
    for n in args.sizes:
        done = {r["case"] for r in results if r["n"] == n}
        todo = [label for label in args.cases if label not in done]
        if todo:
            results += [dict(r, dim=args.dim) for r in measure_size(n, todo, args)]
            results.sort(key=lambda r: (r["n"], order[r["case"]]))
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(results, indent=2))
    text = table([r for r in results if r["n"] in args.sizes and r["case"] in args.cases], args)
    print()
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        with open(args.output, "a" if args.append else "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
