"""DCRec's cost per training step under each strategy, timed in turns in one process.

    python benchmarks/dcrec_step_cost.py                 # ML-100K, the claims runs' strategies, 5 rounds of 20 steps

The claims runs' own times (``benchmarks/claims_runs.py dcrec-ml100k``) cannot give a cost ratio: those runs
took hours each, over several sittings, alone or beside another run, at one or two threads. This times the same
training step (forward, backward, Adam step, the strategy's per-step upkeep) on the same batches for every
strategy, in turns (the order rotates each round, so a slow spell hits every strategy alike), and writes
``--json``; ``benchmarks/claims.py`` takes the matrix's DCRec cost ratios from it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.claims_runs import SETTINGS  # noqa: E402
from benchmarks.results_store import machine  # noqa: E402

#: the claims runs' DCRec settings: (strategy, its arguments)
CLAIMS_SETTINGS: list[tuple[str, dict[str, Any]]] = SETTINGS["dcrec-ml100k"]
DEFAULT_JSON = ROOT / "docs" / "results" / "dcrec_step_cost.json"


def fixed_batches(rows: Any, batch_size: int, count: int, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """``count`` training batches drawn once, so every strategy steps on the same rows."""
    generator = torch.Generator().manual_seed(seed)
    tensors = rows.tensors()
    n = len(tensors[0])
    return [tuple(t[idx] for t in tensors)
            for idx in (torch.randperm(n, generator=generator)[:batch_size] for _ in range(count))]  # fmt: skip


def time_steps(model: torch.nn.Module, batches: list[tuple[torch.Tensor, ...]], warmup: int) -> float:
    """Seconds per training step over ``batches[warmup:]`` (the first steps pay allocation and lazy set-up)."""
    import cl_plugins as clp

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    start = 0.0
    for i, batch in enumerate(batches):
        if i == warmup:
            start = time.perf_counter()
        loss = model(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        clp.after_optimizer_step(model.loss_fn)
    return (time.perf_counter() - start) / (len(batches) - warmup)


def measure(dataset: str, settings: list[tuple[str, dict[str, Any]]], steps: int, rounds: int,
            warmup: int = 2) -> dict[str, list[float]]:  # fmt: skip
    """{strategy: seconds per step, one value per round}, the strategies timed in turns with a rotating order."""
    import cl_plugins as clp
    from cl_plugins.integrations.hosts.dcrec import train as dcrec

    base = dcrec.DCRecConfig(dataset=dataset).resolved()
    splits = dcrec.prepare_splits(base)
    batches = fixed_batches(splits.train, base.batch_size, warmup + steps)
    epoch_steps = -(-len(splits.train.tensors()[0]) // base.batch_size)
    out: dict[str, list[float]] = {s: [] for s, _ in settings}
    for r in range(rounds):
        turn = r % len(settings)
        for strategy, params in settings[turn:] + settings[:turn]:
            torch.manual_seed(r)
            config = dcrec.DCRecConfig(dataset=dataset, loss=strategy, loss_args=params).resolved()
            model = dcrec.build_model(config, splits)
            clp.set_epoch_length(model.loss_fn, epoch_steps)
            out[strategy].append(time_steps(model, batches, warmup))
    return out


def summarise(seconds: dict[str, list[float]], baseline: str = "infonce") -> dict[str, dict[str, float]]:
    """Median seconds per step, and the median over rounds of each round's ratio to ``baseline`` (paired by
    round: both timed within the same few seconds)."""
    base = seconds[baseline]
    return {s: {"seconds_per_step": statistics.median(v),
                "ratio": statistics.median(a / b for a, b in zip(v, base, strict=True))}
            for s, v in seconds.items()}  # fmt: skip


def table(summary: dict[str, dict[str, float]]) -> str:
    lines = ["| strategy | seconds per step (median) | × infonce (median of per-round ratios) |", "|---|---:|---:|"]
    lines += [f"| {s} | {v['seconds_per_step']:.3f} | {v['ratio']:.2f} |" for s, v in summary.items()]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ml-100k", help="DCRec data set (default: ml-100k, the claims runs')")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per strategy and round (default: 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of turns over the strategies (default: 5)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: 0, torch's own choice)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"output (default: {DEFAULT_JSON})")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or args.threads < 0:
        parser.error("--steps and --rounds must be >= 1 and --threads >= 0 (0: torch's default)")
    return args


def main(argv: list[str] | None = None) -> None:
    from cl_plugins.integrations.runs.atomic import write_json

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if CLAIMS_SETTINGS[0][0] != "infonce":
        raise ValueError("the claims runs' first DCRec setting must be the infonce baseline")
    seconds = measure(args.dataset, CLAIMS_SETTINGS, args.steps, args.rounds)
    summary = summarise(seconds)
    write_json(args.json, {
        "dataset": args.dataset, "steps": args.steps, "rounds": args.rounds, "threads": torch.get_num_threads(),
        "machine": machine(),
        "seconds": seconds, "summary": summary,
    })  # fmt: skip
    print(table(summary))


if __name__ == "__main__":
    main()
