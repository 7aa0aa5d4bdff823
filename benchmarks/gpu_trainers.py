"""The trainers' part of the GPU check: each trainer's smallest real run (the data pack's files, tiny models),
bf16 through Accelerate, a few steps ending in its evaluation; their saved folders packed as CPU-suite fixtures.

Accelerate puts every run on the GPU when one is visible; ``--device cpu`` hides it (``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["--log_with", "none", "--no-progress", "--mixed_precision", "bf16"]
#: files larger than this are left out of the packed checkpoints (the fixtures stay small)
MAX_PACKED_BYTES = 4 << 20
#: parts of a results.json that are no result
BOOKKEEPING = ("seconds", "config", "settings", "seed", "rows", "n_dev", "n_test", "molecules", "dropped", "tasks",
               "epoch")  # fmt: skip


def child_env(data: Path, cache: Path, site: str | None, device: str = "cuda") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CL_PLUGINS_", "PYTEST_"))}
    path = os.pathsep.join([str(ROOT), *([site] if site else []), env.get("PYTHONPATH", "")])
    env.update(CL_PLUGINS_DATA=str(data), CL_PLUGINS_CACHE=str(cache), CL_PLUGINS_OFFLINE="1", PYTHONPATH=path)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def prepare_inputs(work: Path, data: Path) -> dict[str, Path]:
    """Tiny random BERTs (an encoder, a masked LM) and the text trainers' training files, sliced from the pack."""
    sys.path.insert(0, str(ROOT))
    from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

    work.mkdir(parents=True, exist_ok=True)
    wiki = (data / "sentence/simcse/wiki1m_for_simcse.head.txt").read_text().splitlines()[:2048]
    (work / "wiki.txt").write_text("\n".join(wiki) + "\n")
    with open(data / "sentence/simcse/snli_devtest_triples_for_simcse.csv", newline="") as f:
        rows = [(r["sent0"], r["sent1"]) for _, r in zip(range(512), csv.DictReader(f))]
    buf = io.StringIO()
    csv.writer(buf).writerows([("sent0", "sent1"), *rows])
    (work / "pairs.csv").write_text(buf.getvalue())
    return {"bert": make_tiny_bert(work / "bert", hidden=64), "mlm": make_tiny_bert(work / "mlm", hidden=64, mlm=True),
            "wiki": work / "wiki.txt", "pairs": work / "pairs.csv"}  # fmt: skip


def ex(name: str) -> list[str]:
    """The command line of ``examples/<name>``."""
    return [sys.executable, str(ROOT / "examples" / name)]


def host(module: str) -> list[str]:
    """The command line of a host's module, ``python -m cl_plugins.integrations.hosts.<module>``."""
    return [sys.executable, "-m", f"cl_plugins.integrations.hosts.{module}"]


def commands(work: Path, inputs: dict[str, Path], quick: bool) -> dict[str, list[list[str]]]:
    """trainer -> the commands it runs, in order (MSC trains on the vision run's backbone)."""
    tu = [*ex("graphcl_tu.py"), "--dataset", "MUTAG", "--seeds", "0", "--epochs", "3", "--batch_size", "64",
          "--hidden", "8", "--eval_folds", "3", "--no-svm_search", "--loss", "macl", *COMMON]  # fmt: skip
    runs = {
        "graphcl_tu": [[*tu, "--output_dir", str(work / "graphcl_tu")]],
        # two epochs: the CPU suite resumes it to three from the checkpoint saved on the GPU
        "graphcl_tu_short": [[*tu, "--epochs", "2", "--output_dir", str(work / "graphcl_tu_short")]],
        "grace": [[*host("graph.grace"), "--dataset", "Cora", "--epochs", "20", "--eval_seeds",
                   "1", "--split", "public", "--loss", "macl", *COMMON, "--output_dir", str(work / "grace")]],
    }  # fmt: skip
    if quick:
        return runs
    vision = ["--width", "4", "--proj_hidden", "16", "--proj_dim", "8", "--image_size", "16", "--linear_epochs", "1"]
    runs |= {
        "simcse": [[*host("simcse.train_then_evaluate"), "--model", str(inputs["bert"]), "--train_file",
                    str(inputs["wiki"]), "--max_steps", "30", "--eval_steps", "15", "--batch_size", "64", "--tasks",
                    "STSBenchmark", "--mixed_precision", "bf16", "--output_dir", str(work / "simcse")]],
        "mabel": [[*host("mabel.train"), "--model", str(inputs["mlm"]), "--train_file",
                   str(inputs["pairs"]),
                   "--batch_size", "32", "--max_steps", "10", "--eval_steps", "0", "--loss", "macl",
                   "--bias_eval_limit", "6", "--seat_samples", "200", *COMMON, "--output_dir", str(work / "mabel")]],
        "graphcl_transfer": [[*host("graph.graphcl_transfer"), "--pretrain_molecules", "256",
                              "--pretrain_epochs", "2", "--pretrain_batch_size", "64", "--num_layers", "2",
                              "--emb_dim", "32", "--datasets", "bace", "--runseeds", "0", "--finetune_epochs", "1",
                              "--loss", "dual_temperature", *COMMON, "--output_dir", str(work / "graphcl_transfer")]],
        "dcrec": [[*host("dcrec.train"), "--dataset", "beauty", "--epochs", "2",
                   "--max_train_rows",
                   "2048",
                   "--max_eval_rows", "256", "--batch_size", "256", "--loss", "temperature_free", *COMMON,
                   "--output_dir", str(work / "dcrec")]],
        "vision+msc": [
            [*host("vision.train"), "--subset_per_class", "50", *vision, "--batch_size", "128",
             "--epochs", "2", "--eval_bank_per_class", "20", "--eval_test_per_class", "10", "--loss", "macl", *COMMON,
             "--output_dir", str(work / "vision")],
            [*ex("msc_anomaly.py"), "--backbone_path", str(work / "vision"), "--normal_classes", "3",
             "--epochs", "2", "--train_per_class", "40", "--test_per_class", "10", "--batch_size", "32", "--lr",
             "0.05", *COMMON, "--output_dir", str(work / "msc")],
        ],
    }  # fmt: skip
    return runs


def headline(results: Any, prefix: str = "", limit: int = 6) -> dict[str, float]:
    """The first few numbers of a results.json (timings left out), for the check's table."""
    found: dict[str, float] = {}

    def walk(value: Any, path: str) -> None:
        if len(found) >= limit or any(k in path for k in BOOKKEEPING):
            return
        if isinstance(value, dict | list):
            for k, v in value.items() if isinstance(value, dict) else enumerate(value):
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found[path] = round(float(value), 4)

    walk(results, prefix)
    return found


def run_one(name: str, cmds: list[list[str]], deadline: float, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    """One trainer's row and, when it failed, its output."""
    t0, row, log = time.monotonic(), {"trainer": name}, ""
    for cmd in cmds:
        try:
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env,
                                 timeout=max(1.0, deadline - time.monotonic()))  # fmt: skip
        except subprocess.TimeoutExpired:
            row["error"] = "time box ran out"
            break
        row["returncode"] = res.returncode
        if res.returncode:
            row["error"] = (res.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
            log = " ".join(cmd) + "\n" + res.stdout[-4000:] + res.stderr[-8000:]
            break
    out = Path(cmds[-1][cmds[-1].index("--output_dir") + 1])
    if "error" not in row and (out / "results.json").is_file():
        row["result"] = headline(json.loads((out / "results.json").read_text()))
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row, log


def packed_files(work: Path, names: list[str]) -> Iterator[Path]:
    for name in names:
        for path in sorted((work / name).rglob("*")):
            rel = path.relative_to(work).parts
            if path.is_file() and "logs" not in rel and path.stat().st_size <= MAX_PACKED_BYTES:
                yield path


def run_all(quick: bool, work: Path, deadline: float, report: Any, env: dict[str, str]) -> None:
    """Every trainer, four at a time; then their folders packed into ``cuda_checkpoints.tar.gz``."""
    inputs = prepare_inputs(work, Path(env["CL_PLUGINS_DATA"]))
    runs = commands(work, inputs, quick)
    if "graphcl_transfer" in runs and importlib.util.find_spec("rdkit") is None:  # its 32 MB wheel rarely travels
        del runs["graphcl_transfer"]
        report.append("trainers", {"trainer": "graphcl_transfer", "error": "not run: RDKit is not installed here"})
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(run_one, name, cmds, deadline, env) for name, cmds in runs.items()]
        for future in futures:
            row, log = future.result()
            report.append("trainers", row)
            if log:
                report.log(f"trainer {row['trainer']}", log)
    done = [r["trainer"].replace("vision+msc", "vision") for r in report.data.get("trainers", []) if "error" not in r]
    done += ["msc"] if "vision" in done else []
    with tarfile.open(report.out / "cuda_checkpoints.tar.gz", "w:gz") as tar:
        for path in packed_files(work, done):
            tar.add(path, arcname=str(path.relative_to(work)))
