"""Planetoid's raw files are pickles: any folder a user names (``--data_root``) is read by an allow-list before
torch-geometric unpickles it, so a crafted file runs nothing and is refused in one line naming it."""

from __future__ import annotations

import pickle
import shutil
from collections import defaultdict

import numpy as np
import pytest

from cl_plugins.integrations.hosts.graph import planetoid_raw
from tests.planted import Planted


@pytest.mark.parametrize("name", ["Cora", "CiteSeer"])
def test_the_real_files_pass_the_allow_list(data_root, name):
    planetoid_raw.check(data_root / "graphs" / "planetoid" / name / "raw", name)
    graph = planetoid_raw.load(data_root / "graphs" / "planetoid" / name / "raw" / f"ind.{name.lower()}.graph")
    assert isinstance(graph, defaultdict) and len(graph) > 1000


@pytest.mark.parametrize(("part", "obj", "says"), [
    ("graph", {"a": [1]}, "not a dict of node -> list of neighbour ids"),
    ("y", [1, 2], "a list where a label array belongs"),
    ("ty", np.array(["a"]), "dtype <U1, not numbers"),
    ("x", np.array([object()], dtype=object), "which a Planetoid file never does"),
])  # fmt: skip
def test_a_file_holding_anything_else_is_refused(data_root, tmp_path, part, obj, says):
    raw = tmp_path / "Cora" / "raw"
    shutil.copytree(data_root / "graphs" / "planetoid" / "Cora" / "raw", raw)
    (raw / f"ind.cora.{part}").write_bytes(pickle.dumps(obj, protocol=4))
    with pytest.raises(ValueError, match=f"ind.cora.{part} is not a Planetoid file: .*{says}"):
        planetoid_raw.check(raw, "Cora")


@pytest.mark.parametrize("part", ["x", "graph"])
def test_a_crafted_planetoid_file_under_data_root_runs_nothing(data_root, tmp_path, monkeypatch, capsys, part):
    from cl_plugins.integrations.console import main

    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    mine, marker = tmp_path / "mine", tmp_path / "pwned"
    shutil.copytree(data_root / "graphs" / "planetoid" / "Cora", mine / "Cora")
    (mine / "Cora" / "raw" / f"ind.cora.{part}").write_bytes(pickle.dumps(Planted(marker), protocol=2))
    with pytest.raises(SystemExit) as info:
        main(["grace", "--dataset", "Cora", "--data_root", str(mine), "--epochs", "1", "--no-progress",
              "--log_with", "none", "--output_dir", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("error: ") == 1 and "Traceback" not in err, err
    assert f"ind.cora.{part} is not a Planetoid file: it is not a readable pickle" in err
    assert "exec, which a Planetoid file never does" in err
    assert not marker.exists() and not (tmp_path / "out").exists()
