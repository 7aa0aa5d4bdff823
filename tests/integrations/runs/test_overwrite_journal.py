"""``--overwrite`` loses nothing when stopped between any two of its file operations: the set-aside, the settle and
the restore are journaled, and the next command of any kind (another run, a refused one, a reader) restores the
previous run exactly, or finishes the settle of the new one (issue: a kill inside --overwrite lost the run)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cl_plugins.integrations.runs import guard
from tests import ROOT

KILLED = -9


def _cmd(out: Path, mode: str, *flags: str, fault: str = "") -> int:
    env = {**os.environ, "CL_PLUGINS_FAULT": fault}
    cmd = [sys.executable, "-m", "tests.integrations.runs.overwrite_run", str(out), mode, *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env).returncode


def _snapshot(folder: Path, runs_alike: bool = False) -> dict[str, str]:
    """Every file's hash (the lock aside); ``runs_alike``: the manifest by its configuration only (a run's id and
    time and folder differ from one run to the next)."""

    def content(p: Path) -> bytes:
        if runs_alike and p.name == guard.MANIFEST:
            config = json.loads(p.read_text())["config"]
            return json.dumps({k: v for k, v in config.items() if k not in guard.NOT_COMPARED}).encode()
        return p.read_bytes()

    return {str(p.relative_to(folder)): hashlib.sha256(content(p)).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != guard.LOCK}  # fmt: skip


def _as_before_or_replaced(out: Path, before: dict[str, str], replaced: Path | None) -> bool:
    """The previous run exactly, or (``replaced`` given) a finished replacement like ``replaced``."""
    return _snapshot(out) == before or (replaced is not None and _snapshot(out, True) == _snapshot(replaced, True))


@pytest.fixture(scope="module")
def states(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """A finished run, its snapshot, and what a finished --overwrite of it leaves."""
    root = tmp_path_factory.mktemp("overwrite")
    assert _cmd(root / "previous", "write") == 0
    assert _cmd(root / "replaced", "write") == 0 and _cmd(root / "replaced", "write", "--overwrite") == 0
    return root / "previous", _snapshot(root / "previous"), root / "replaced"


NEXT = {"a refused new run": ("write",), "a reader": ("read",), "a failing overwrite": ("fail", "--overwrite")}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fail", "write"])
@pytest.mark.parametrize("next_command", list(NEXT))
def test_a_stop_between_any_two_file_operations_of_overwrite_loses_nothing(states, tmp_path, mode, next_command):
    import shutil

    previous, before, replaced = states
    windows = 0
    for n in range(1, 60):
        out = tmp_path / f"stop_{n}"
        shutil.copytree(previous, out)
        code = _cmd(out, mode, "--overwrite", fault=f"overwrite:step:{n}")
        finished = None if mode == "fail" else replaced
        if code != KILLED:  # no operation left to stop at: the command ended as it does unstopped
            assert _as_before_or_replaced(out, {} if finished else before, finished)
            break
        windows += 1
        assert (out / guard.JOURNAL).is_file() or _as_before_or_replaced(out, before, replaced)
        assert _cmd(out, *NEXT[next_command], fault=f"overwrite:step:{n}") in (KILLED, 0, 2)  # stopped inside, too
        assert _cmd(out, *NEXT[next_command]) in (0, 2)
        assert _as_before_or_replaced(out, before, finished), n
    assert windows >= 6
