"""Run safety: a SIGKILL at any stage of a save never costs more than the last checkpoint, a resumed run ends
where an uninterrupted one ends, and a folder being replaced is never seen half-written."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cl_plugins.integrations.modalities.text.testing import make_tiny_bert
from cl_plugins.integrations.runs import atomic, saved_model
from tests import ROOT
from tests.integrations.hosts.simcse.test_simcse_train import SENTENCES

KILLED = -9


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """This module's runs share a cache of their own, which its first run builds: nothing else writes it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CL_PLUGINS_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


#: what the runs of this module inherit: nothing another test's process may have left in the environment
PASSED_ON = ("PATH", "HOME", "PYTHONPATH", "VIRTUAL_ENV", "CL_PLUGINS_DATA", "CL_PLUGINS_CACHE", "CL_PLUGINS_OFFLINE")


def clean_env(**values: str) -> dict[str, str]:
    """The environment of a run whose result is compared bit for bit with another's: only :data:`PASSED_ON`, and
    one thread (its reductions must not depend on the machine), then ``values``."""
    env = {k: os.environ[k] for k in PASSED_ON if k in os.environ}
    return {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **values}


def _run(cmd: list[str], fault: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=clean_env(CL_PLUGINS_FAULT=fault))  # fmt: skip


# ---------------------------------------------------------------------------- the folder primitive
def _write_folder(root: Path, version: str, fault: str = "") -> int:
    script = textwrap.dedent(f"""
        from pathlib import Path
        from cl_plugins.integrations.runs import atomic
        with atomic.folder(Path({str(root / "best")!r})) as tmp:
            (tmp / "weights").write_text({version!r})
            (tmp / "vocab").write_text({version!r})
    """)
    return _run([sys.executable, "-c", script], fault).returncode


@pytest.mark.parametrize("point", ["save:written", "save:marked"])
def test_a_kill_before_the_swap_keeps_the_previous_complete_folder(tmp_path, point):
    assert _write_folder(tmp_path, "v1") == 0
    assert _write_folder(tmp_path, "v2", point) == KILLED
    assert atomic.is_complete(tmp_path / "best")
    assert {p.name: p.read_text() for p in (tmp_path / "best").iterdir() if p.name != atomic.MARKER} == {
        "weights": "v1", "vocab": "v1"}  # fmt: skip


def test_a_kill_between_the_renames_is_finished_by_the_next_reader(tmp_path):
    assert _write_folder(tmp_path, "v1") == 0
    assert _write_folder(tmp_path, "v2", "save:swapped") == KILLED
    assert not (tmp_path / "best").exists()  # the old one moved aside, the new one staged and complete
    assert atomic.is_complete(tmp_path / "best")
    assert (tmp_path / "best" / "vocab").read_text() == "v2" and not list(tmp_path.glob("best.*.old"))


def test_latest_complete_skips_an_interrupted_checkpoint(tmp_path):
    (tmp_path / "epoch_1").mkdir()
    (tmp_path / "epoch_1" / atomic.MARKER).write_text("{}")
    (tmp_path / "epoch_2").mkdir()  # no marker: killed while being written
    with pytest.warns(UserWarning, match="epoch_2: incomplete"):
        assert atomic.latest_complete(tmp_path, "epoch") == tmp_path / "epoch_1"


# ---------------------------------------------------------------------------- the trainer families
def _graph_cmd(out: Path, *extra: str) -> list[str]:
    args = "--dataset MUTAG --seeds 0 --epochs 3 --batch_size 64 --hidden 8 --eval_folds 3 --no-svm_search"
    return [sys.executable, str(ROOT / "examples" / "graphcl_tu.py"), *args.split(), "--loss", "macl",
            "--log_with", "none", "--no-progress", "--output_dir", str(out), *extra]  # fmt: skip


def _graph_weights(out: Path) -> dict[str, torch.Tensor]:
    return saved_model.read(out / "seed_0" / "model", ["graphcl_tu"], "run model").weights


@pytest.fixture(scope="module")
def graph_straight(data_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("graph") / "straight"
    assert _run(_graph_cmd(out)).returncode == 0
    return _graph_weights(out)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["save:written:2", "save:marked:2", "save:published:2"])
def test_epoch_trainer_killed_in_a_save_resumes_to_the_uninterrupted_result(graph_straight, tmp_path, point):
    broken = tmp_path / "broken"
    assert _run(_graph_cmd(broken), point).returncode == KILLED
    resumed = _run(_graph_cmd(broken, "--resume"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    b = _graph_weights(broken)
    assert all(torch.equal(graph_straight[k], b[k]) for k in graph_straight)


def _simcse_cmd(root: Path, out: Path, *extra: str) -> list[str]:
    args = [
        "--model",
        str(root / "bert"),
        "--train_file",
        str(root / "train.txt"),
        "--output_dir",
        str(out),
        "--batch_size",
        "4",
        "--max_seq_length",
        "16",
        "--learning_rate",
        "1e-3",
        "--max_steps",
        "4",
        "--save_steps",
        "1",
        "--eval_steps",
        "0",
        "--seed",
        "7",
        "--log_with",
        "none",
        "--no-progress",
    ]
    return [sys.executable, "-m", "cl_plugins.integrations.hosts.simcse.train", *args, *extra]


@pytest.fixture(scope="module")
def simcse_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("simcse")
    make_tiny_bert(root / "bert")
    (root / "train.txt").write_text("\n".join(SENTENCES) + "\n")
    assert _run(_simcse_cmd(root, root / "straight")).returncode == 0
    return root


@pytest.mark.slow
@pytest.mark.parametrize("point", ["save:written:3", "save:marked:3", "save:published:3"])
def test_step_trainer_killed_in_a_save_resumes_to_the_uninterrupted_result(simcse_root, tmp_path, point):
    from safetensors.torch import load_file

    broken = tmp_path / "broken"
    assert _run(_simcse_cmd(simcse_root, broken), point).returncode == KILLED
    resumed = _run(_simcse_cmd(simcse_root, broken, "--resume"))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = (load_file(str(p / "model" / "model.safetensors")) for p in (simcse_root / "straight", broken))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
