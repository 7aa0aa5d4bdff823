"""Every registry strategy in every layout, compiled whole, against itself eagerly: one table.

Per (strategy, layout, label policy): ``torch.compile(loss, fullgraph=True)`` (``--mode reduce-overhead``: CUDA
graphs on a GPU) on two batches, the largest differences of the value and of the input and parameter gradients from
the eager loss, and forward + backward times (median of interleaved runs, eager and compiled). On a GPU
``--sync_debug`` also runs one eager training step (loss, backward, an optimizer step on a learned temperature)
under ``torch.cuda.set_sync_debug_mode("error")``: "0" where nothing waited for the device, else the error's first
line.
The CI tests compile a sample (``tests/test_compiled_loss.py``); this is the whole matrix.

Usage::

    python benchmarks/compiled_matrix.py                                  # CPU, N 256, D 128
    python benchmarks/compiled_matrix.py --label_policies none exclude positives_out positives_in positives_pair
    python benchmarks/compiled_matrix.py --device cuda --mode reduce-overhead --sync_debug --output m.md
    python benchmarks/compiled_matrix.py --device cuda --kernel triton --mode reduce-overhead --n 8192
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cl_plugins as clp  # noqa: E402
from cl_plugins.kernels.dispatch import KERNELS  # noqa: E402
from cl_plugins.labels import LABEL_POLICIES  # noqa: E402
from cl_plugins.registry import get_loss_class  # noqa: E402

#: layout name -> (loss arguments, extra call arguments)
LAYOUTS = {
    "simclr": ({"layout": "simclr"}, ()),
    "grace": ({"layout": "grace"}, ()),
    "cross_view": ({"layout": "cross_view"}, ()),
    "clip": ({"layout": "cross_view", "symmetric": True}, ()),
    "hard_negatives": ({"layout": "cross_view", "hard_negative_weight": 0.5}, ("hard_negatives",)),
    "queue": ({"layout": "queue"}, ("queue",)),
}


def inputs(n: int, d: int, device: str, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    made = {k: torch.randn(n, d, generator=g) for k in ("z1", "z2", "extra")}
    return {k: v.to(device).requires_grad_(k != "extra") for k, v in made.items()}


def step_of(loss: torch.nn.Module, extra: tuple[str, ...], labels: dict[str, torch.Tensor]):  # type: ignore[no-untyped-def]
    return lambda v: loss(v["z1"], v["z2"], **{k: v["extra"] for k in extra}, **labels)


def labels_of(policy: str, extra: tuple[str, ...], n: int, device: str) -> dict[str, torch.Tensor]:
    """The label arguments of a call (eight pairs per label; the queue's rows labelled alike), none for "none"."""
    if policy == "none":
        return {}
    y = (torch.arange(n) % max(2, n // 8)).to(device)
    return {"labels": y, **({"queue_labels": y.flip(0)} if "queue" in extra else {})}


def compiler_settings(policy: str) -> dict[str, bool]:
    """Labels as positives list their same-label pairs, whose number is data: the compiler traces it only so."""
    if policy in ("none", "exclude"):
        return {}
    return {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}


def differences(loss: torch.nn.Module, eager, compiled, v: dict[str, torch.Tensor]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(|value difference|, largest |gradient difference|) of the compiled call from the eager one."""
    wrt = [v["z1"], v["z2"], *(p for p in loss.parameters() if p.requires_grad)]
    got, want = compiled(v), eager(v)
    g_got, g_want = torch.autograd.grad(got, wrt), torch.autograd.grad(want, wrt)
    grad = max(float((a - b).abs().max()) for a, b in zip(g_got, g_want, strict=True))
    return float((got - want).detach().abs()), grad


def median_ms(fns: dict[str, object], v: dict[str, torch.Tensor], device: str, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn(v).backward()  # type: ignore[operator]
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times[label].append((time.perf_counter() - start) * 1e3)
    return {k: statistics.median(t) for k, t in times.items()}


def sync_debug(loss: torch.nn.Module, eager, v: dict[str, torch.Tensor]) -> str:  # type: ignore[no-untyped-def]
    """One eager training step under ``set_sync_debug_mode("error")``: "0", or what waited."""
    params = [p for p in loss.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01) if params else None
    eager(v).backward()  # a first call may compile a Triton kernel (its autotuner waits): not the step measured
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        eager(v).backward()
        if opt is not None:
            opt.step()
        clp.after_optimizer_step(loss)
        return "0"
    except RuntimeError as error:
        return str(error).strip().splitlines()[0][:120]
    finally:
        torch.cuda.set_sync_debug_mode(0)


def case(strategy: str, layout: str, policy: str, args: argparse.Namespace) -> str:
    arguments, extra = LAYOUTS[layout]
    labelled = {} if policy == "none" else {"label_policy": policy}
    try:
        loss = clp.build_host_loss(strategy, host_tau=0.1, feature_dim=args.dim, kernel=args.kernel, **arguments,
                                   **labelled)  # fmt: skip
    except ValueError as error:  # a strategy without this label policy: said in its row
        return f"| {strategy} | {layout} | {policy} | not built: {str(error)[:100]} | | | | | |"
    loss = loss.to(args.device)
    eager = step_of(loss, extra, labels_of(policy, extra, args.n, args.device))
    torch._dynamo.reset()
    try:
        if args.skip_compile:
            raise RuntimeError("not compiled (--skip_compile)")
        with torch._dynamo.config.patch(**compiler_settings(policy)):
            compiled = torch.compile(eager, fullgraph=True, mode=args.mode)
            batches = [inputs(args.n, args.dim, args.device, seed) for seed in (0, 1, 2)]
            value, grad = (max(pair) for pair in zip(*(differences(loss, eager, compiled, v) for v in batches[:2])))
            ms = median_ms({"eager": eager, "compiled": compiled}, batches[2], args.device, args.rounds)
        speed_up = ms["eager"] / ms["compiled"]
        row = f"{value:.1e} | {grad:.1e} | {ms['eager']:.3f} | {ms['compiled']:.3f} | {speed_up:.2f}"
    except Exception as error:  # noqa: BLE001 - a case that does not compile is a row of the table
        row = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:100]} | | | |"
    synced = sync_debug(loss, eager, inputs(args.n, args.dim, args.device, 3)) if args.sync_debug else "–"
    return f"| {strategy} | {layout} | {policy} | {row} | {synced} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--n", type=int, default=256, help="batch size N (default: 256)")
    p.add_argument("--dim", type=int, default=128, help="feature width D (default: 128)")
    p.add_argument("--kernel", default="auto", choices=KERNELS, help="the losses' kernel= (default: auto)")
    p.add_argument("--mode", default=None, help="torch.compile mode, e.g. reduce-overhead (default: None)")
    p.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS), help="(default: all)")
    p.add_argument("--strategies", nargs="+", default=clp.available_losses(), help="(default: the registry)")
    p.add_argument("--label_policies", nargs="+", default=["none"], choices=["none", *LABEL_POLICIES],
                   help="none (no labels) and/or label policies, each a row per strategy and layout (default: none)")
    p.add_argument("--rounds", type=int, default=11, help="timed rounds (default: 11)")
    p.add_argument("--sync_debug", action="store_true", help="on a GPU: a training step under sync debug mode")
    p.add_argument("--skip_compile", action="store_true", help="only the sync debug column")
    p.add_argument("--output", default="", help="append the table to this file (default: print only)")
    args = p.parse_args()
    if args.sync_debug and not args.device.startswith("cuda"):
        p.error("--sync_debug needs --device cuda (CPU syncs are counted by tests/test_host_syncs.py)")
    head = (f"### Compiled whole ({args.device}, N {args.n}, D {args.dim}, kernel {args.kernel}, mode {args.mode}, "
            f"torch {torch.__version__})"
            "\n\n| strategy | layout | labels | value diff | grad diff | eager ms | compiled ms | speed-up "
            "| syncs in a step |\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    print(head, flush=True)
    rows = []
    for strategy in args.strategies:
        for layout in args.layouts:
            if LAYOUTS[layout][0]["layout"] not in get_loss_class(strategy).layouts:
                continue
            for policy in args.label_policies:
                rows.append(case(strategy, layout, policy, args))
                print(rows[-1], flush=True)
    if args.output:
        with open(args.output, "a", encoding="utf-8") as f:
            f.write("\n" + "\n".join([head, *rows]) + "\n")


if __name__ == "__main__":
    main()
