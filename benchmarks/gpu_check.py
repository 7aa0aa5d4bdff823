"""The prepared GPU check: the device tests, every trainer's smallest real run in bf16, the loss compiled (and in
CUDA graphs, without a host sync), the kernel sweep, the loss table, and checkpoints saved on the GPU for the CPU
suite, in one time-boxed command.

Everything it measures goes to ``--out`` as it comes: ``gpu_check.json`` (all of it), ``gpu_check.md`` (the
tables), ``logs.txt`` (what failed, with its output), ``cuda_checkpoints.tar.gz`` (the saved runs).

Only the working tree travels to a GPU machine (64 MiB at most), so the data and upstream files it needs are
bundled first, here, into an ignored folder that the call carries::

    python benchmarks/gpu_check.py --make_bundle .gpu_bundle [--wheels DIR]   # here (data, upstream, wheels)
    # there, with carry=[".gpu_bundle"]:
    python benchmarks/gpu_check.py --device cuda --bundle .gpu_bundle --out $OUT --budget_s 500

``--wheels DIR`` adds the Python wheels the GPU image lacks (``datasets``, ``dill``, ``multiprocess`` for the text
trainers; ``rdkit`` for GraphCL transfer, if it fits); they are installed there into a folder on PYTHONPATH.
``DIR/build/`` holds a ``setuptools`` wheel (>= 77): with it the check installs this checkout there (editable,
offline), since ``integrations/`` imports as ``cl_plugins.integrations`` only through an install (``setup.py``).
On the CPU (CI): ``python benchmarks/gpu_check.py --device cpu --quick --out DIR`` runs a slice of each part.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_trainers  # noqa: E402

#: data-pack paths the trainers read (relative to CL_PLUGINS_DATA), and the upstream file of the loss table
BUNDLE_DATA = (
    "MANIFEST.md",
    "sentence/simcse/wiki1m_for_simcse.head.txt",
    "sentence/simcse/snli_devtest_triples_for_simcse.csv",
    "sentence/SentEval/data/downstream/STS/STSBenchmark",
    "bias",
    "graphs/tu/MUTAG",
    "graphs/planetoid/Cora",
    "molecules/dataset/bace",
    "molecules/zinc",
    "recsys/dcrec/dataset/beauty",
    "images/cifar10-jpg",
)
BUNDLE_UPSTREAM = ("open_clip",)
#: the adapters' parity tests that take ``--device`` (module, test): against open_clip's ClipLoss (bundled),
#: sentence-transformers' MNRL and a hand-written cross-entropy, on the GPU
PARITY = (("openclip", "infonce_is_clip_loss"), ("sentence_transformers", "infonce_is_mnrl"),
          ("hf_trainer", "infonce_equals_cross_entropy_over_scaled_cosines"))


def make_bundle(target: Path, data: Path, upstream: Path, wheels: Path | None) -> None:
    """Copy what the check reads into ``target`` (its ``data/``, ``upstream/`` and ``wheels/``)."""
    if target.exists():
        shutil.rmtree(target)
    for rel in BUNDLE_DATA:
        src, dst = data / rel, target / "data" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    for rel in BUNDLE_UPSTREAM:
        shutil.copytree(upstream / rel, target / "upstream" / rel)
    if wheels:
        shutil.copytree(wheels, target / "wheels")
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"{target}: {size / 2**20:.1f} MiB (the working tree and this folder travel, 64 MiB at most)")


def install_wheels(bundle: Path, work: Path) -> str | None:
    """Install the bundle's wheels into a folder of ``work``; the folder (for PYTHONPATH), or None."""
    wheels = sorted((bundle / "wheels").glob("*.whl")) if bundle else []
    if not wheels:
        return None
    site = work / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target",
           str(site), *map(str, wheels)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:  # the parts that need them fail and say so; the rest of the check runs
        print(f"the bundle's wheels did not install: {res.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    return str(site)


def install_checkout(bundle: Path | None) -> bool:
    """Make ``cl_plugins.integrations`` importable here and in the check's children; True when this process must
    restart to see it. ``integrations/`` takes that name only through an install (``setup.py``), so a bare checkout
    is installed editable into this interpreter, offline, its build tools from the bundle's ``wheels/build/``."""
    if importlib.util.find_spec("cl_plugins.integrations") is not None:
        return False
    tools = bundle / "wheels" / "build" if bundle else None
    if tools is None or not list(tools.glob("*.whl")):
        raise SystemExit("error: cl_plugins.integrations is not importable: run `pip install -e .` here first, or "
                         "bundle a setuptools wheel under --wheels DIR/build/ (see this file's docstring)")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(tools), "--no-deps", "-e",
           str(ROOT)]  # fmt: skip
    env = {**os.environ, "PIP_BREAK_SYSTEM_PACKAGES": "1"}  # a throwaway machine's system Python (PEP 668)
    for extra in ([], ["--user"]):  # the interpreter's own site-packages, else the user's
        res = subprocess.run([*cmd, *extra], capture_output=True, text=True, env=env)
        if res.returncode == 0:
            return True
    raise SystemExit(f"error: installing this checkout failed: {res.stderr.strip()[-500:]}")


class Report:
    """The check's results, rewritten to ``out`` after every addition (a time-out loses nothing written)."""

    def __init__(self, out: Path) -> None:
        self.out, self.data = out, {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        out.mkdir(parents=True, exist_ok=True)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.write()

    def append(self, key: str, value: Any) -> None:
        self.data.setdefault(key, []).append(value)
        self.write()
        print(key, json.dumps(value, default=str)[:300], flush=True)

    def log(self, title: str, text: str) -> None:
        with open(self.out / "logs.txt", "a") as f:
            f.write(f"\n===== {title}\n{text}\n")

    def write(self) -> None:
        tmp = self.out / ".gpu_check.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.out / "gpu_check.json")
        (self.out / "gpu_check.md").write_text(markdown(self.data))


def environment(device: str) -> dict[str, Any]:
    import torch

    versions = {}
    for name in ("transformers", "accelerate", "torch_geometric", "lightning", "sentence_transformers", "triton",
                 "datasets", "rdkit"):  # fmt: skip
        try:
            versions[name] = __import__(name).__version__
        except Exception as exc:  # absent there, or broken: both worth knowing
            versions[name] = f"not importable ({type(exc).__name__})"
    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "device": device, "cpus": os.cpu_count(), "versions": versions}  # fmt: skip
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        env["gpu"] = {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                      "multiprocessors": props.multi_processor_count}  # fmt: skip
    return env


def device_tests(device: str, quick: bool, budget_s: float, report: Report, env: dict[str, str]) -> None:
    """``pytest tests/test_device.py --device DEVICE`` (and, off the quick path, the framework recipes, whose
    frameworks pick the GPU themselves, and the adapters' parity tests on the device), within ``budget_s``
    together; pass/fail counts from the JUnit XML."""
    import xml.etree.ElementTree as ET

    frameworks = "tests/integrations/frameworks"
    for name, targets in (("device tests", ["tests/test_device.py"]),
                          ("framework adapters", [f"{frameworks}/test_framework_recipes.py",
                                                  *[f"{frameworks}/test_{m}.py::test_{t}" for m, t in PARITY]])):
        if quick and name == "framework adapters":
            continue
        if name != "device tests":
            budget_s -= sum(r.get("seconds", 0) for r in report.data.get("tests", []))
        xml = report.out / ".junit.xml"
        cmd = [sys.executable, "-m", "pytest", *targets, "--device", device, "-q", "-p", "no:cacheprovider",
               f"--junitxml={xml}", *(["-k", "infonce or macl"] if quick else [])]  # fmt: skip
        _, row = time_boxed(f"pytest {name}", cmd, budget_s, report, env)
        suite = ET.parse(xml).getroot().find("testsuite") if "returncode" in row and xml.exists() else None
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")} if suite else {}
        xml.unlink(missing_ok=True)
        report.append("tests", {"part": name, **row, **counts})


def time_boxed(name: str, cmd: list[str], budget_s: float, report: Report,
               env: dict[str, str]) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """Run ``cmd`` from the repository root within ``budget_s``: (what it printed, even where the time box cut it,
    and {"returncode"} or {"error"} with "seconds"); a failure's output goes to the logs under ``name``."""
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=budget_s, env=env)
        out, row = res.stdout, {"returncode": res.returncode}
        if res.returncode:
            report.log(name, res.stdout[-20000:] + res.stderr[-5000:])
    except subprocess.TimeoutExpired as stopped:  # always bytes, whatever text= says
        out = (stopped.stdout or b"").decode(errors="replace")
        row = {"error": f"time box of {budget_s:.0f} s ran out"}
    return out, {**row, "seconds": round(time.monotonic() - t0, 1)}


def compiled_runs(device: str, quick: bool) -> dict[str, list[str]]:
    """The command lines of the compiled part: the whole matrix compiled (in CUDA graphs with a training step under
    sync debug mode, on a GPU; without labels, excluding them, labels as positives), and ours beside the
    hand-written loss from N 64 (eager, compiled, CUDA graphs, Inf-CL); on the quick path a slice of each."""
    gpu = device.startswith("cuda")
    matrix = ["benchmarks/compiled_matrix.py", "--device", device, "--label_policies", "none", "exclude",
              "positives_out", *(["--mode", "reduce-overhead", "--sync_debug", "--n", "1024"] if gpu else [])]
    step = ["benchmarks/compiled_step.py", "--device", device, "--strategies", "infonce", "macl",
            "--sizes", "64", "256", "1024", "4096", "16384"]  # fmt: skip
    # the Triton kernels as operators: compiled whole and captured in CUDA graphs, at a size where auto takes them
    # (InfoNCE: one direction, the pair, a block against itself; DySTreSS: a map with its statistic and a bias)
    triton = ["benchmarks/compiled_matrix.py", "--device", device, "--kernel", "triton", "--mode", "reduce-overhead",
              "--n", "8192", "--strategies", "infonce", "dystress", "--layouts", "clip", "simclr", "hard_negatives",
              "--rounds", "5"]  # fmt: skip
    if quick:
        matrix += ["--strategies", "infonce", "--layouts", "simclr", "--n", "16", "--rounds", "1"]
        step = step[:3] + ["--strategies", "infonce", "--layouts", "SimCLR", "--sizes", "16", "--repeats", "1"]
        triton = triton[:7] + ["--strategies", "infonce", "--layouts", "clip", "--n", "16", "--rounds", "1"]
    runs = {"compiled_matrix": matrix, "compiled_step": step}
    return {**runs, "compiled_triton": triton} if gpu else runs


def compiled(device: str, quick: bool, deadline: float, report: Report, env: dict[str, str]) -> None:
    """Each of :func:`compiled_runs` in a process of its own with an equal share of what is left: its table's rows, as
    printed, go to the report as they are."""
    runs = compiled_runs(device, quick)
    for left, (name, args) in zip(range(len(runs), 0, -1), runs.items()):
        budget = max(1.0, (deadline - time.monotonic()) / left)
        out, row = time_boxed(name, [sys.executable, *args], budget, report, env)  # rows printed in time count
        table = [line for line in out.splitlines() if line.startswith(("|", "###"))]
        report.append("compiled", {"part": name, **row, "table": table})


def markdown(data: dict[str, Any]) -> str:
    lines = [f"# GPU check, {data['started']}", "", "```", json.dumps(data.get("environment", {}), indent=1), "```"]
    for key, cols in (("tests", ["part", "tests", "failures", "errors", "skipped", "seconds", "error"]),
                      ("trainers", ["trainer", "returncode", "seconds", "result", "error"]),
                      ("kernel_sweep", ["stage", "n", "d", "direction", "row", "ms", "x_floor_fp32", "x_floor_bf16",
                                        "x_floor_bytes", "peak_mib", "loss_err", "grad_err", "fp32", "bf16", "gb_s",
                                        "error"]),
                      ("loss_table", ["strategy", "kernel", "n", "d", "dtype", "ms", "x_bound", "peak_mib",
                                      "error"])):  # fmt: skip
        rows = data.get(key, [])
        if rows:
            lines += ["", f"## {key}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    for run in data.get("compiled", []):  # the scripts' own tables
        state = run.get("error") or f"exit {run.get('returncode')}"
        lines += ["", f"## {run['part']} ({state}, {run.get('seconds')} s)", "", *run.get("table", [])]
    return "\n".join(lines) + "\n"


def loss_table(device: str, quick: bool, deadline: float, upstream: Path | None, report: Report,
               sizes: list[int] | None = None, dims: list[int] | None = None, tile_sweep: bool = True,
               kernels: list[str] | None = None) -> None:
    import torch

    from benchmarks import gpu_loss_table

    bound: dict[tuple, float] = {}

    def record(row: dict[str, Any]) -> None:
        key = (row["n"], row["d"], row["dtype"])
        if row["strategy"] == "matmul x4" and "ms" in row:
            bound[key] = row["ms"]
        if "ms" in row and key in bound:
            row["x_bound"] = round(row["ms"] / bound[key], 2)
        report.append("loss_table", row)

    sizes = sizes or ([256] if quick else [4096, 16384, 65536, 131072])
    dims = dims or ([32] if quick else [128, 512])
    dtypes = [torch.float32] if quick else [torch.float32, torch.bfloat16]
    dev, reps = torch.device(device), 1 if quick else 3
    # the tile sweep first: it decides the streaming kernel's GPU tiles, and the table may run out of time
    if tile_sweep:
        gpu_loss_table.tile_sweep(dev, 512 if quick else 65536, 32 if quick else 128, deadline, record, reps)
    gpu_loss_table.table(dev, sizes, dims, dtypes, deadline, upstream, record, reps, kernels)


def kernel_sweep(device: str, quick: bool, deadline: float, report: Report, max_n: int, refs_max_n: int) -> None:
    """The Triton kernel's configurations against float64 and the losses users would pick instead
    (``benchmarks/gpu_kernel_sweep.py``); on a CPU it needs Triton's interpreter."""
    import torch

    from benchmarks import gpu_kernel_sweep
    from cl_plugins.kernels import triton_lse

    dev = torch.device(device)
    if not triton_lse.usable_on(dev):
        return report.append("kernel_sweep", {"stage": "-", "error": f"Triton cannot run on {device} here"})
    gpu_kernel_sweep.sweep(dev, deadline, lambda row: report.append("kernel_sweep", row), quick, 1 if quick else 3,
                           max_n, refs_max_n)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default: cuda)")
    p.add_argument("--out", type=Path, help="folder for gpu_check.json, gpu_check.md, logs.txt, checkpoints")
    p.add_argument("--quick", action="store_true", help="a slice of every part (CI: --device cpu --quick)")
    p.add_argument("--budget_s", type=float, default=500, help="time box of the whole check, seconds (default: 500)")
    p.add_argument("--bundle", type=Path, help="the folder --make_bundle wrote (default: ../shared beside the repo)")
    p.add_argument("--make_bundle", type=Path, help="write the bundle to this folder and stop")
    p.add_argument("--wheels", type=Path, help="with --make_bundle: a folder of wheels to bundle")
    p.add_argument("--skip", nargs="*", default=[], help="parts to leave out: tests, trainers, compiled, "
                   "kernel_sweep, tile_sweep, loss_table")  # fmt: skip
    p.add_argument("--sweep_max_n", type=int, default=1 << 20, help="the kernel sweep's largest N (default: 2^20)")
    p.add_argument("--sweep_refs_max_n", type=int, default=1 << 20,
                   help="the kernel sweep measures the losses to beat up to this N (default: 2^20)")  # fmt: skip
    p.add_argument("--sizes", type=int, nargs="+", help="the loss table's N (default: 4096 16384 65536 131072)")
    p.add_argument("--dims", type=int, nargs="+", help="the loss table's D (default: 128 512)")
    p.add_argument("--kernels", nargs="+", help="the loss table's kernels (default: auto dense fused stream, and "
                   "triton where it imports)")  # fmt: skip
    args = p.parse_args(argv)
    if args.make_bundle is None and args.out is None:
        p.error("--out is required (or --make_bundle)")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    shared = ROOT.parent / "shared"
    if args.make_bundle:
        make_bundle(args.make_bundle, shared / "data", shared / "upstream", args.wheels)
        return {}
    if install_checkout(args.bundle):  # the editable install's import hook loads when Python starts
        os.execv(sys.executable, [sys.executable, *sys.argv])
    deadline = time.monotonic() + args.budget_s
    data = args.bundle / "data" if args.bundle else Path(os.environ.get("CL_PLUGINS_DATA", shared / "data"))
    upstream = args.bundle / "upstream" if args.bundle else shared / "upstream"
    report = Report(args.out)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu_check_{os.getpid()}"
    site = install_wheels(args.bundle, work) if args.bundle else None
    env = gpu_trainers.child_env(data, work / "cache", site, args.device)
    env["CL_PLUGINS_UPSTREAM"] = str(upstream.resolve())  # the parity tests' upstream files
    if site:
        sys.path.insert(0, site)
    report.set("environment", environment(args.device))

    def left() -> float:
        return deadline - time.monotonic()

    if "tests" not in args.skip:
        device_tests(args.device, args.quick, min(150.0, 0.3 * left()), report, env)
    if "trainers" not in args.skip:
        gpu_trainers.run_all(args.quick, work, time.monotonic() + 0.55 * left(), report, env)
    if "compiled" not in args.skip:
        compiled(args.device, args.quick, time.monotonic() + 0.3 * left(), report, env)
    if "kernel_sweep" not in args.skip:
        kernel_sweep(args.device, args.quick, deadline - 5 if "loss_table" in args.skip else deadline - 0.4 * left(),
                     report, args.sweep_max_n, args.sweep_refs_max_n)  # fmt: skip
    if "loss_table" not in args.skip:
        loss_table(args.device, args.quick, deadline - 5, upstream, report, args.sizes, args.dims,
                   "tile_sweep" not in args.skip, args.kernels)
    report.set("finished", time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    shutil.rmtree(work, ignore_errors=True)
    return report.data


if __name__ == "__main__":
    main()
