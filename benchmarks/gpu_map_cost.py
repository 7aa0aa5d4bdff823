"""What a per-pair map costs on the Triton kernel, over InfoNCE's scalar temperature (the "every other
strategy within 1.15x of ``infonce``").

CLIP layout (two views [N, D], both directions), float32 features, ``kernel="triton"``, one forward and backward:
the median of ``--reps`` CUDA-event timed runs after a warm-up. Beside each strategy's own Triton form, variants of
it written here, as a user would write a map (:func:`cl_plugins.extension.triton_map`), swapped in for the run:
forms with other special functions, and a trivial map of the same kind (a constant temperature: not the loss, the
floor of any per-pair map); and InfoNCE in SimCLR's layout on the Triton, streaming and dense kernels. Each
variant's loss is checked against the strategy's own in its layout (``loss_diff``), and a profile of one step per
strategy (the CUDA kernels by time) says whether the time is in the Triton kernels or around them. Prints a table;
``--out`` also writes ``map_cost.json`` and ``map_cost.md``.

    python benchmarks/gpu_map_cost.py --out results/  # a GPU; Triton's interpreter on the CPU with --n 64
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gpu_loss_table import CLIP, _backward, _timed, our_loss  # noqa: E402
from cl_plugins.extension import tl, triton_map  # noqa: E402
from cl_plugins.losses import dystress, temperature_free  # noqa: E402


@triton_map
def _dystress_cosine(x, params, profile):  # type: ignore[no-untyped-def]
    """DySTreSS's cosine profile with Triton's own cosine and two divisions (its form until 2026-11-28). Other
    profiles: the strategy's form."""
    if profile == 0:
        tau = params[0] + 0.5 * (params[1] - params[0]) * (1.0 - tl.cos(3.141592653589793 * x))
        return x / tau, 1.0 / tau, tau
    return _dystress_own(x, params, profile)


@triton_map
def _constant_temperature(x, params, constant):  # type: ignore[no-untyped-def]
    """A per-pair map with nothing per pair: x / tau_min (not DySTreSS: the floor of any map)."""
    inverse = 1.0 / params[0]
    return x * inverse, x * 0.0 + inverse, x * 0.0 + params[0]


@triton_map
def _atanh_two_divisions(x, params, unused):  # type: ignore[no-untyped-def]
    """Temperature-free's 2 atanh(c) as log((1 + c) / (1 - c)), its derivative 2 / (1 - c^2): two divisions (its
    form until 2026-11-28)."""
    c = tl.minimum(tl.maximum(x, params[0]), params[1])
    return tl.log((1.0 + c) / (1.0 - c)), tl.where(c == x, 2.0 / (1.0 - c * c), 0.0), x * 0.0


@triton_map
def _atanh_log2(x, params, unused):  # type: ignore[no-untyped-def]
    """Temperature-free's 2 atanh(c) as ln 2 * log2((1 + c) / (1 - c)): the base-2 logarithm, which the GPU has
    as an instruction."""
    c = tl.minimum(tl.maximum(x, params[0]), params[1])
    inverse = 1.0 / (1.0 - c * c)
    return 0.6931471805599453 * tl.log2((1.0 + c) * (1.0 + c) * inverse), tl.where(c == x, 2.0 * inverse, 0.0), x * 0.0


@triton_map
def _atanh_linear(x, params, unused):  # type: ignore[no-untyped-def]
    """2 x: a map of temperature-free's kind with nothing per pair (not the loss: its floor)."""
    return 2.0 * x, x * 0.0 + 2.0, x * 0.0


_dystress_own = dystress._map.triton
#: (strategy, variant, the module whose statement's Triton form it replaces, the form or None for the strategy's
#: own, the layout, the kernel)
VARIANTS: tuple[tuple[str, str, Any, Any, dict[str, Any], str], ...] = (
    ("infonce", "own", None, None, CLIP, "triton"),
    ("dystress", "own", dystress, None, CLIP, "triton"),
    ("dystress", "tl.cos, two divisions (until 2026-11-28)", dystress, _dystress_cosine, CLIP, "triton"),
    ("dystress", "constant temperature (floor)", dystress, _constant_temperature, CLIP, "triton"),
    ("temperature_free", "own", temperature_free, None, CLIP, "triton"),
    ("temperature_free", "two divisions (until 2026-11-28)", temperature_free, _atanh_two_divisions, CLIP, "triton"),
    ("temperature_free", "log2, one division", temperature_free, _atanh_log2, CLIP, "triton"),
    ("temperature_free", "2 x (floor)", temperature_free, _atanh_linear, CLIP, "triton"),
    # SimCLR's block of 2N anchors against themselves: the Triton kernel beside the ones it would replace
    ("infonce", "SimCLR layout, triton", None, None, {"layout": "simclr"}, "triton"),
    ("infonce", "SimCLR layout, stream", None, None, {"layout": "simclr"}, "stream"),
    ("infonce", "SimCLR layout, dense", None, None, {"layout": "simclr"}, "dense"),
)


@contextlib.contextmanager
def swapped(module: Any, form: Any) -> Iterator[None]:
    """The strategy's losses built inside the block take ``form`` as their statement's Triton form (its torch forms
    as they are)."""
    if module is None or form is None:
        yield
        return
    own = module._map
    module._map = dataclasses.replace(own, triton=form)
    try:
        yield
    finally:
        module._map = own


def profile(step: Callable[[], None], rows: int = 8) -> str:
    """The CUDA kernels of one ``step``, by total time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    with profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=60)


def measure(n: int, d: int, reps: int, device: torch.device, profiles: bool) -> tuple[list[dict[str, Any]], str]:
    g = torch.Generator(device=device).manual_seed(n + d)
    a, b = (torch.randn(n, d, device=device, generator=g).requires_grad_() for _ in range(2))
    rows, text, own_loss, base = [], "", {}, None
    for strategy, variant, module, form, options, kernel in VARIANTS:
        row: dict[str, Any] = {"strategy": strategy, "variant": variant, "n": n, "d": d}
        key = (strategy, options["layout"])
        try:
            with swapped(module, form):
                loss_of = our_loss(strategy, kernel, d, options).to(device)
                with torch.no_grad():
                    value = float(loss_of(a, b))
                step = _backward(loss_of, a, b)
                ms, mib = _timed(step, device, reps)
                if profiles and variant == "own" and device.type == "cuda":
                    text += f"\n### {strategy}, own form, N = {n}, D = {d}\n\n```\n{profile(step)}\n```\n"
            own_loss.setdefault(key, value)
            base = ms if base is None else base  # the first row: infonce, CLIP, its own
            row.update(ms=round(ms, 3), peak_mib=round(mib, 1), loss_diff=abs(value - own_loss[key]),
                       x_infonce=round(ms / base, 2))  # fmt: skip
        except Exception as exc:  # recorded, not raised: one failing variant must not cost the rest
            row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc) else ''}"
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows, text


def markdown(rows: list[dict[str, Any]], profiles: str, device: str) -> str:
    cols = ["strategy", "variant", "n", "d", "ms", "x_infonce", "loss_diff", "peak_mib", "error"]
    lines = [f"# Per-pair maps on the Triton kernel ({device})", "", "| " + " | ".join(cols) + " |",
             "|" + "---|" * len(cols)]  # fmt: skip
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n" + profiles


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[16384], help="batch sizes (default: 16384)")
    p.add_argument("--d", type=int, default=128, help="feature width (default: 128)")
    p.add_argument("--reps", type=int, default=5, help="timed runs per row (default: 5)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu under TRITON_INTERPRET=1 (default: cuda)")
    p.add_argument("--out", type=Path, help="folder for map_cost.json and map_cost.md")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    rows, profiles = [], ""
    for n in args.n:
        got, text = measure(n, args.d, args.reps, device, profiles=n == args.n[0])
        rows, profiles = rows + got, profiles + text
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "map_cost.json").write_text(json.dumps({"device": name, "rows": rows}, indent=1))
        (args.out / "map_cost.md").write_text(markdown(rows, profiles, name))
    print(markdown(rows, profiles, name))
    return rows


if __name__ == "__main__":
    main()
