"""The property, searched: a seeded sample of commands that must be refused (every strategy's own numeric
arguments with values its checks refuse or accept, and the arguments only a loss's first call can refuse) and of
on-disk damage (truncated, garbled, deleted, or replaced by a pickle that would create a file) to any file of a
finished run. After any command: a refused one exits 2 with one line and leaves every byte of the previous run as it
was; no planted pickle ever runs; a resume either ends exactly as the intact resume does or is refused in one line."""

from __future__ import annotations

import hashlib
import inspect
import json
import random
import shutil
from pathlib import Path

import pytest
import torch

import cl_plugins as clp
from cl_plugins.integrations.runs import atomic, saved_model
from tests.integrations.runs.test_checkpoint import rewrite_marker
from tests.integrations.runs.test_run_core import CALL_TIME_ARGS
from tests.planted import Planted

SEED, MISTAKES, DAMAGES = 61, 30, 30
GRAPH = ["graphcl-tu", "--dataset", "MUTAG", "--seeds", "0", "--batch_size", "64", "--hidden", "8", "--eval_folds", "3",
         "--no-svm_search", "--log_with", "none", "--no-progress"]  # fmt: skip
GRACE = ["grace", "--dataset", "Cora", "--eval_seeds", "1", "--split", "public", "--log_with", "none", "--no-progress"]
#: the trainers the refused commands are searched on, with the flags of a finished run's second command
TRAINERS = {"graphcl-tu": (GRAPH, ["--epochs", "1"]), "grace": (GRACE, ["--epochs", "1"])}


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    from cl_plugins.integrations.console import main

    try:
        main(argv)
        code, crash = 0, ""
    except SystemExit as exc:
        code, crash = int(exc.code or 0), ""
    except Exception as exc:  # noqa: BLE001 - a traceback is a finding, reported with the others
        code, crash = 1, f"Traceback: {type(exc).__name__}: {str(exc)[:200]}"
    return code, capsys.readouterr().err + crash


def _numeric_arguments() -> list[tuple[str, str]]:
    """(strategy, name) of every numeric constructor argument of every registered strategy (its own checks)."""
    found = []
    for name in clp.available_losses():
        for p in inspect.signature(clp.get_loss_class(name).__init__).parameters.values():
            if isinstance(p.default, (int, float)) and not isinstance(p.default, bool):
                found.append((name, p.name))
    return found


def _mistakes(rng: random.Random, trainer: str) -> list[list[str]]:
    """Command-line fragments: numeric arguments out of range, arguments only a first call can refuse, booleans
    that are not (or are, in the command line's words), and arguments that would do nothing."""
    from cl_plugins.registry import flag_arguments

    values = ("-1", "0", "nan", "1e9", "abc", "[1]")
    numeric = [[name, f"{arg}={rng.choice(values)}"] for name, arg in _numeric_arguments()]
    call_time = [[name, arg] for name in clp.available_losses() if name != "amcl"
                 for arg in CALL_TIME_ARGS]  # fmt: skip
    flags = [[name, f"{flag}={rng.choice(('maybe', '2', '0.5', 'false', 'NO', '0'))}"]
             for name in clp.available_losses() if name != "amcl" for flag in flag_arguments(clp.get_loss_class(name))]
    found = rng.sample(numeric, MISTAKES // 3) + rng.sample(call_time, MISTAKES // 3) + rng.sample(flags, MISTAKES // 3)
    argv = [["--loss", loss, "--loss_arg", arg] for loss, arg in found]
    nothing = [["--seeds", "0", "0"], ["--loss_arg", "reduction=none"]]
    return argv + nothing + ([["--loss_arg", "hard_negative_weight=1"]] if trainer == "grace" else [])


def _damage(path: Path, how: str, marker: Path) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garble":
        path.write_bytes(data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1 :]
                         if data else b"\xff")  # fmt: skip
    elif how == "delete":
        path.unlink()
    else:
        with path.open("wb") as f:  # a file object: torch.save names its zip records after a path (a dotfile fails)
            torch.save({"state": Planted(marker)}, f)


def _other_step(path: Path) -> None:
    """The same file from the run's other checkpoint (step_3 <-> step_6), where the file is a checkpoint's."""
    steps = {"step_3": "step_6", "step_6": "step_3"}
    if path.parent.name in steps:
        shutil.copy(path.parent.with_name(steps[path.parent.name]) / path.name, path)


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory) -> dict[str, Path]:
    """A finished 2-epoch run (both checkpoints kept), from a copy of it the intact resume to 3 epochs, and another
    run of the same settings (whose files a forger could copy in)."""
    from cl_plugins.integrations.console import main

    root = tmp_path_factory.mktemp("search")
    main([*GRAPH, "--epochs", "2", "--keep_checkpoints", "0", "--output_dir", str(root / "finished")])
    shutil.copytree(root / "finished", root / "resumed")
    main([*GRAPH, "--epochs", "3", "--keep_checkpoints", "0", "--resume", "--output_dir", str(root / "resumed")])
    main([*GRAPH, "--epochs", "2", "--keep_checkpoints", "0", "--output_dir", str(root / "other")])
    return {"finished": root / "finished", "resumed": root / "resumed", "other": root / "other"}


def _outcome(folder: Path) -> tuple[dict[str, torch.Tensor], list]:
    weights = saved_model.read(folder / "seed_0" / "model", ["graphcl_tu"], "run model").weights
    return weights, json.loads((folder / "results.json").read_text())["runs"][0]["epoch_loss"]


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_a_refused_command_never_changes_the_previous_run(data_root, trainer, tmp_path, monkeypatch, capsys):
    from cl_plugins.integrations.console import main

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    base, again = TRAINERS[trainer]
    finished = tmp_path / "finished"
    main([*base, "--epochs", "2", "--output_dir", str(finished)])
    found = []
    for mistake in _mistakes(random.Random(f"{SEED}{trainer}"), trainer):
        out = tmp_path / "run"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(finished, out)
        before = _snapshot(out)
        code, err = _run([*base, *again, "--overwrite", "--output_dir", str(out), *mistake], capsys)
        if code == 0:
            continue  # a value the strategy accepts: a new run replaced the old one, as asked
        one_line = code == 2 and err.count("error: ") == 1 and "Traceback" not in err
        if not (one_line and _snapshot(out) == before):
            found.append(f"{' '.join(mistake)}: exit {code}, {err.strip().splitlines()[-1:]}")
    assert not found, "\n".join(found)


@pytest.mark.slow
def test_a_damaged_run_resumes_as_the_intact_one_or_is_refused_in_one_line(runs, tmp_path, capsys):
    rng = random.Random(SEED)
    files = sorted(_snapshot(runs["finished"]))
    expected = _outcome(runs["resumed"])
    found = []
    for _ in range(DAMAGES):
        name, how = rng.choice(files), rng.choice(("truncate", "garble", "delete", "pickle", "other run", "other step"))
        out, marker = tmp_path / "run", tmp_path / "ran"
        marker.unlink(missing_ok=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(runs["finished"], out)
        if how == "other run":
            shutil.copy(runs["other"] / name, out / name)
        elif how == "other step":
            _other_step(out / name)
        else:
            _damage(out / name, how, marker)
        if rng.random() < 0.5 and (out / name).parent.joinpath(atomic.MARKER).is_file():
            how += " (marker rewritten)"
            rewrite_marker((out / name).parent)
        before = _snapshot(out)
        code, err = _run([*GRAPH, "--epochs", "3", "--keep_checkpoints", "0", "--resume", "--output_dir", str(out)],
                         capsys)  # fmt: skip
        if marker.exists():
            found.append(f"{how} {name}: the planted pickle ran")
        elif code == 0:
            weights, losses = _outcome(out)
            if losses != expected[1] or any(not torch.equal(weights[k], expected[0][k]) for k in weights):
                found.append(f"{how} {name}: resumed to another result")
        elif not (code == 2 and err.count("error: ") == 1 and "Traceback" not in err and _snapshot(out) == before):
            found.append(f"{how} {name}: exit {code}, {err.strip().splitlines()[-1:]}")
    assert not found, "\n".join(found)
