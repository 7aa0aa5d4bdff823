"""Run a function on two gloo processes on CPU and collect what each rank returns."""

from __future__ import annotations

import gc
import os
import pickle
import socket
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, fn: Callable[..., Any], args: tuple, out_dir: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as f:
            pickle.dump(result, f)
        del result
        # DDP reducers and gloo work objects must be gone before the group is destroyed,
        # or a gloo thread can abort the process at exit
        gc.collect()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def torchrun(nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run`` on a free rendezvous port (``--standalone``), never the fixed
    default 29500 that two test runs, or a leftover process, would share."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]


def failure_report(result: Any, limit: int = 6000) -> str:
    """A failed torchrun's stderr, from the first traceback on (a rank's own error, not torchrun's summary)."""
    err = result.stderr or ""
    start = err.find("Traceback")
    return err[start : start + limit] if start >= 0 else err[-limit:]


def run_distributed(fn: Callable[..., Any], *args: Any, world: int = 2) -> list[Any]:
    """``fn(rank, world, *args)`` on ``world`` processes; returns the per-rank results."""
    with tempfile.TemporaryDirectory() as out_dir:
        files = [os.path.join(out_dir, f"{r}.pkl") for r in range(world)]
        try:
            mp.spawn(_worker, args=(world, _free_port(), fn, args, out_dir), nprocs=world, join=True)
        except mp.ProcessExitedException:
            # a crash in gloo's teardown after every rank wrote its result does not affect them
            if not all(os.path.exists(f) for f in files):
                raise
        results = []
        for r in range(world):
            with open(os.path.join(out_dir, f"{r}.pkl"), "rb") as f:
                results.append(pickle.load(f))
    return results


def split(n: int, world: int, uneven: bool) -> list[slice]:
    """Row slices of each rank; ``uneven`` gives rank 0 fewer rows."""
    if not uneven:
        step = n // world
        return [slice(r * step, (r + 1) * step) for r in range(world)]
    cut = n // world - 1
    return [slice(0, cut), slice(cut, n)]
