"""The run property for the trainers not covered elsewhere (GraphCL TU, SimCSE, MSC and vision are in
``test_run_safety.py``, ``test_run_core.py`` and ``test_vision_data.py``): a run killed at a save point and
resumed, or stopped early and resumed with a longer ``--epochs``, ends with the weights and the complete
``results.json`` of the uninterrupted run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from cl_plugins.integrations.runs import saved_model
from tests import ROOT
from tests.integrations.hosts.dcrec.test_dcrec_train import TINY as DCREC_TINY
from tests.integrations.hosts.dcrec.test_dcrec_train import write_split
from tests.integrations.runs.test_run_safety import clean_env

KILLED = -9
#: what differs between two runs of the same plan: where they ran, their clocks, and how they were started
UNSTABLE = {"config", "settings", "output_dir", "train_seconds", "resume"}


def _grace(out: Path, epochs: int) -> list[str]:
    return ["cl_plugins.integrations.hosts.graph.grace", "--dataset", "Cora", "--epochs", str(epochs),
            "--checkpoint_every", "1", "--eval_seeds", "1", "--split", "public", "--loss", "macl",
            "--output_dir", str(out)]  # fmt: skip


def _transfer(out: Path, epochs: int) -> list[str]:
    return ["cl_plugins.integrations.hosts.graph.graphcl_transfer", "--pretrain_molecules", "96", "--pretrain_epochs",
            str(epochs),
            "--pretrain_batch_size", "32", "--num_layers", "2", "--emb_dim", "16", "--datasets", "bace",
            "--runseeds", "0", "--finetune_epochs", "1", "--loss", "dual_temperature",
            "--output_dir", str(out)]  # fmt: skip


def _dcrec(out: Path, epochs: int) -> list[str]:
    return ["cl_plugins.integrations.hosts.dcrec.train", *DCREC_TINY, "--epochs", str(epochs), "--loss", "macl",
            "--output_dir", str(out)]  # fmt: skip


#: trainer -> (command, its saved model's folder and trainer name)
TRAINERS: dict[str, tuple[Callable[[Path, int], list[str]], str, str]] = {
    "grace": (_grace, "seed_0/model", "grace"),
    "graphcl_transfer": (_transfer, "model", "graphcl_transfer"),
    "dcrec": (_dcrec, "seed_2020/model", "dcrec"),
}


def _run(args: list[str], env: dict[str, str], fault: str = "", *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", *args, "--log_with", "none", "--no-progress", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=clean_env(**env, CL_PLUGINS_FAULT=fault))  # fmt: skip


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in UNSTABLE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _outcome(out: Path, trainer: str) -> tuple[dict[str, torch.Tensor], Any]:
    _, folder, name = TRAINERS[trainer]
    weights = saved_model.read(out / folder, [name], "run model").weights
    return weights, _stable(json.loads((out / "results.json").read_text()))


@pytest.fixture(scope="module")
def environments(data_root, tmp_path_factory) -> dict[str, dict[str, str]]:
    toy = tmp_path_factory.mktemp("dcrec_data")
    write_split(toy)
    cache = {"CL_PLUGINS_CACHE": str(tmp_path_factory.mktemp("cache"))}
    return {"grace": cache, "graphcl_transfer": cache, "dcrec": {**cache, "CL_PLUGINS_DATA": str(toy)}}


@pytest.fixture(scope="module")
def straight(environments, tmp_path_factory) -> dict[str, tuple[dict[str, torch.Tensor], Any]]:
    """Each trainer's uninterrupted 3-epoch run."""
    results = {}
    for trainer, (cmd, _, _) in TRAINERS.items():
        out = tmp_path_factory.mktemp(trainer) / "straight"
        res = _run(cmd(out, 3), environments[trainer])
        assert res.returncode == 0, res.stderr[-2000:]
        results[trainer] = _outcome(out, trainer)
    return results


def _assert_same(a: tuple[dict[str, torch.Tensor], Any], b: tuple[dict[str, torch.Tensor], Any]) -> None:
    assert a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])
    assert a[1] == b[1]


#: each trainer killed in one phase of a save (all three phases and every trainer covered, each pairing once: the
#: loop's own tests kill both trainer kinds in every phase, tests/integrations/runs/test_run_safety.py)
KILLS = [("grace", "save:written:2"), ("graphcl_transfer", "save:published:2"), ("dcrec", "save:published:3")]


@pytest.mark.slow
@pytest.mark.parametrize(("trainer", "point"), KILLS)
def test_killed_in_a_save_and_resumed_ends_as_the_uninterrupted_run(straight, environments, tmp_path, trainer, point):
    cmd, env = TRAINERS[trainer][0], environments[trainer]
    broken = tmp_path / "broken"
    assert _run(cmd(broken, 3), env, point).returncode == KILLED
    assert not (broken / "results.json").exists()
    resumed = _run(cmd(broken, 3), env, "", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    _assert_same(_outcome(broken, trainer), straight[trainer])


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_a_shorter_run_resumed_with_more_epochs_ends_as_the_longer_run(straight, environments, tmp_path, trainer):
    cmd, env = TRAINERS[trainer][0], environments[trainer]
    split = tmp_path / "split"
    assert _run(cmd(split, 2), env).returncode == 0
    resumed = _run(cmd(split, 3), env, "", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    _assert_same(_outcome(split, trainer), straight[trainer])
