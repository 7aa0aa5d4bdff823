"""Real-data smoke tests of the graph loaders and harnesses, and short end-to-end runs (with resume)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

from cl_plugins.integrations.hosts.graph.datasets import load_planetoid, load_tu  # noqa: E402
from cl_plugins.integrations.runs import saved_model
from tests import ROOT
from tests.dist_utils import failure_report, torchrun  # noqa: E402
from tests.planted import Planted


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.mark.parametrize(
    "name, graphs, features, classes",
    [("MUTAG", 188, 7, [63, 125]), ("PROTEINS", 1113, 3, [663, 450]), ("NCI1", 4110, 37, [2053, 2057]),
     ("IMDB-BINARY", 1000, 1, [500, 500])],
)  # fmt: skip
def test_tu_datasets_load_from_the_pack(data_root, name, graphs, features, classes):
    ds = load_tu(name)
    assert len(ds) == graphs and ds[0].x.size(1) == features
    assert torch.bincount(ds.y).tolist() == classes
    assert not (data_root / "graphs" / "tu" / name / "processed").exists()  # the pack stays untouched


def test_tu_features_for_unlabelled_graphs(data_root):
    degree = load_tu("IMDB-BINARY", features="degree", max_degree=10)
    assert degree[0].x.shape[1] == 11 and torch.allclose(degree[0].x.sum(1), torch.ones(degree[0].num_nodes))
    with pytest.raises(ValueError, match="no node labels"):
        load_tu("IMDB-BINARY", features="labels")


def test_tu_loader_reads_any_raw_tu_folder(tmp_path):
    raw = tmp_path / "TOY" / "raw"
    raw.mkdir(parents=True)
    # two triangles, no node labels
    (raw / "TOY_A.txt").write_text(
        "\n".join(
            f"{a}, {b}"
            for a, b in [(1, 2), (2, 1), (2, 3), (3, 2), (1, 3), (3, 1), (4, 5), (5, 4), (5, 6), (6, 5), (4, 6), (6, 4)]
        )
        + "\n"
    )
    (raw / "TOY_graph_indicator.txt").write_text("\n".join(["1"] * 3 + ["2"] * 3) + "\n")
    (raw / "TOY_graph_labels.txt").write_text("1\n-1\n")
    ds = load_tu("TOY", root=tmp_path)
    assert len(ds) == 2 and ds[0].x.tolist() == [[1.0]] * 3
    assert load_tu("TOY", root=tmp_path, features="degree", max_degree=3)[0].x[:, 2].tolist() == [1.0] * 3


def test_missing_dataset_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("CL_PLUGINS_DATA", str(tmp_path))
    monkeypatch.setattr("torch_geometric.datasets.tu_dataset.fs.cp", _offline)
    with pytest.raises(FileNotFoundError, match="CL_PLUGINS_DATA"):
        load_tu("NOPE")


def test_missing_graph_data_names_the_right_folder_and_never_downloads_offline(tmp_path, monkeypatch):
    """--data_root names its own folder; with downloads off nothing reaches for the network (a one-line error)."""
    monkeypatch.setenv("CL_PLUGINS_DATA", str(tmp_path / "root"))
    monkeypatch.setattr("torch_geometric.datasets.tu_dataset.fs.cp", _forbidden)
    monkeypatch.setattr("torch_geometric.datasets.planetoid.fs.cp", _forbidden, raising=False)
    with pytest.raises(FileNotFoundError, match=f"--data_root {tmp_path / 'mine'}: no MUTAG/raw folder"):
        load_tu("MUTAG", root=tmp_path / "mine")
    with pytest.raises(FileNotFoundError, match="--data_root .*: no Cora/raw folder"):
        load_planetoid("Cora", root=tmp_path / "mine")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for load, name in ((load_tu, "NOPE"), (load_planetoid, "Cora")):
        with pytest.raises(FileNotFoundError, match=f"{name}: no raw files under .*downloads are off"):
            load(name)


def _forbidden(*args, **kwargs):
    raise AssertionError("a download was attempted")


def _offline(*args, **kwargs):
    raise OSError("offline")


@pytest.mark.parametrize("name, nodes, split", [("Cora", 2708, (140, 500, 1000)), ("CiteSeer", 3327, (120, 500, 1000))])
def test_planetoid_from_the_pack(data_root, name, nodes, split):
    g = load_planetoid(name)[0]
    assert g.num_nodes == nodes
    assert tuple(int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)) == split
    torch.testing.assert_close(g.x.sum(1)[g.x.sum(1) > 0], torch.ones(int((g.x.sum(1) > 0).sum())))


def test_moleculenet_and_zinc_from_the_pack(data_root):
    pytest.importorskip("rdkit")
    from cl_plugins.integrations.hosts.graph.molecules import MoleculeNetData, scaffold_split, zinc_smiles

    bbbp = MoleculeNetData("bbbp")
    assert len(bbbp) == 2039 and bbbp.tasks == ["p_np"] and bbbp.dropped == 0
    train, valid, test = scaffold_split(bbbp.smiles)
    assert (len(train), len(valid), len(test)) == (1631, 204, 204)
    assert not set(train) & set(valid) and not set(valid) & set(test)
    assert MoleculeNetData("tox21").num_tasks == 12
    assert len(zinc_smiles()) == 29445


# ---------------------------------------------------------------------------- end to end (tiny)
def test_graphcl_tu_end_to_end_and_exact_resume(data_root, tmp_path):
    from cl_plugins.integrations.hosts.graph import graphcl_tu

    def config(out, epochs, resume=False):
        return graphcl_tu.TUConfig(dataset="MUTAG", seeds=[0], epochs=epochs, batch_size=64, hidden=8, eval_folds=3,
                                   svm_search=False, output_dir=str(out), log_with="none", progress=False,
                                   loss="macl", resume=resume)  # fmt: skip

    full = graphcl_tu.run(config(tmp_path / "a", 2))
    assert 0.5 < full["accuracy_mean"] / 100 <= 1.0
    graphcl_tu.run(config(tmp_path / "b", 1))
    graphcl_tu.run(config(tmp_path / "b", 2, resume=True))
    a = saved_model.read(tmp_path / "a" / "seed_0" / "model", ["graphcl_tu"], "run").weights
    b = saved_model.read(tmp_path / "b" / "seed_0" / "model", ["graphcl_tu"], "run").weights
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
    saved = json.loads((tmp_path / "a" / "results.json").read_text())
    assert saved["config"]["loss"] == "macl"
    emb = np.load(tmp_path / "a" / "seed_0" / "embeddings.npz")
    assert emb["embeddings"].shape == (188, 24)


def test_grace_end_to_end(data_root, tmp_path):
    from cl_plugins.integrations.hosts.graph import grace

    cfg = grace.GraceConfig(dataset="Cora", epochs=3, eval_seeds=2, output_dir=str(tmp_path), log_with="none",
                            progress=False, loss="temperature_free")  # fmt: skip
    out = grace.run(cfg)
    assert set(out) >= {"random_micro_f1_mean", "public_macro_f1_std"}
    assert 0.14 < out["random_micro_f1_mean"] / 100 <= 1.0


def test_grace_pygcl_recipe_end_to_end(data_root, tmp_path):
    """PyGCL's examples/GRACE.py: a 32-wide GCN throughout, τ 0.2, one PyGCL split per training seed."""
    from cl_plugins.integrations.hosts.graph import grace

    cfg = grace.GraceConfig(dataset="CiteSeer", recipe="pygcl", epochs=3, output_dir=str(tmp_path), log_with="none",
                            progress=False, seeds=[0, 1])  # fmt: skip
    model = grace.build_model(cfg, num_features=3703)
    assert [tuple(c.lin.weight.shape) for c in model.encoder.convs] == [(32, 3703), (32, 32)]
    assert grace.settings(cfg)["tau"] == 0.2 and grace.settings(cfg)["weight_decay"] == 0.0
    out = grace.run(cfg)
    assert [len(r["eval"]["pygcl"]) for r in out["runs"]] == [1, 1]
    assert 0.0 < out["pygcl_micro_f1_mean"] <= 100.0
    with pytest.raises(ValueError, match="--recipe"):
        grace.settings(grace.GraceConfig(recipe="gcl"))


def test_graphcl_transfer_end_to_end(data_root, tmp_path):
    pytest.importorskip("rdkit")
    from cl_plugins.integrations.hosts.graph import graphcl_transfer

    cfg = graphcl_transfer.TransferConfig(
        loss="dual_temperature", pretrain_molecules=128, pretrain_epochs=1, pretrain_batch_size=64, num_layers=2,
        emb_dim=16, datasets=["bace"], runseeds=[0], finetune_epochs=1, output_dir=str(tmp_path), log_with="none",
        progress=False,
    )  # fmt: skip
    out = graphcl_transfer.run(cfg)
    entry = out["datasets"]["bace"]
    assert entry["molecules"] == 1513 and 0.0 < entry["test_auc_last_mean"] <= 100.0
    assert saved_model.is_saved_model(tmp_path / "model")


def test_evaluate_cli_checkpoint_equals_saved_embeddings(data_root, tmp_path, capsys):
    from cl_plugins.integrations.hosts.graph import evaluate, graphcl_tu

    cfg = graphcl_tu.TUConfig(dataset="MUTAG", seeds=[0], epochs=1, hidden=8, eval_folds=3, svm_search=False,
                              output_dir=str(tmp_path), log_with="none", progress=False)  # fmt: skip
    graphcl_tu.run(cfg)
    capsys.readouterr()
    results = []
    for source in (["--embeddings", str(tmp_path / "seed_0" / "embeddings.npz")],
                   ["--checkpoint", str(tmp_path / "seed_0" / "model")]):  # fmt: skip
        evaluate.main(["tu", *source, "--seeds", "0", "--folds", "3"])
        results.append(json.loads(capsys.readouterr().out))
    assert results[0] == results[1] and 50 < results[0]["accuracy_mean"] <= 100


@pytest.mark.parametrize("script", ["graphcl_tu.py", "graphcl_transfer.py", "grace_node.py"])
def test_example_help(script):
    import subprocess
    import sys

    root = ROOT
    out = subprocess.run([sys.executable, str(root / "examples" / script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--loss" in out.stdout and "--loss_arg" in out.stdout


@pytest.mark.distributed
def test_graphcl_tu_under_two_processes(data_root, tmp_path):
    import subprocess

    root = ROOT
    script = str(root / "examples" / "graphcl_tu.py")
    args = "--dataset MUTAG --seeds 0 --epochs 1 --hidden 8 --eval_folds 3 --no-svm_search --log_with none"
    cmd = [*torchrun(2), script, *args.split()]
    cmd += ["--no-progress", "--output_dir", str(tmp_path), "--loss", "macl"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=root)
    assert out.returncode == 0, failure_report(out)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert 50 < saved["accuracy_mean"] <= 100
    _two_process_checkpoint_knows_its_ranks(cmd, tmp_path)


def _two_process_checkpoint_knows_its_ranks(cmd: list[str], out: Path) -> None:
    """Each process's random states carry its rank; a forged checkpoint (a rank's file deleted, the marker rewritten)
    and a resume with another number of processes are refused in one line; the intact one resumes."""
    import shutil
    import subprocess
    import sys

    from tests.integrations.runs.test_checkpoint import rewrite_marker

    (step,) = (out / "seed_0" / "checkpoints").iterdir()
    assert {p.name for p in step.glob("random_states_*.json")} == {"random_states_0.json", "random_states_1.json"}
    forged = out.with_name(out.name + "_forged")
    shutil.copytree(out, forged)
    (forged / "seed_0" / "checkpoints" / step.name / "random_states_1.json").unlink()
    rewrite_marker(forged / "seed_0" / "checkpoints" / step.name)
    resume = ["--epochs", "2", "--resume"]
    single = [sys.executable, *cmd[cmd.index(str(ROOT / "examples" / "graphcl_tu.py")):]]
    for command, folder, says in ((cmd, forged, "random_states_1.json is missing"),
                                  (single, out, "written by 2 processes and this run has 1")):  # fmt: skip
        res = subprocess.run([*command, *resume, "--output_dir", str(folder)], capture_output=True, text=True,
                             timeout=300, cwd=ROOT)  # fmt: skip
        errors = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("error: ")]
        assert res.returncode != 0 and errors and all(says in e for e in errors), res.stderr[-3000:]
    res = subprocess.run([*cmd, *resume, "--output_dir", str(out)], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, failure_report(res)


def test_processed_graph_datasets_load_without_pickle(data_root):
    """PyG's processed files are read with weights_only=True (our data classes allowed), never its pickle fallback."""
    import warnings

    load_tu("MUTAG")  # processed (or already cached)
    load_planetoid("Cora")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Weights only load failed")
        assert len(load_tu("MUTAG")) == 188 and load_planetoid("Cora")[0].num_nodes == 2708


def _processed_dirs(cache_root, kind: str, name: str) -> list:
    return sorted((cache_root / kind).glob(f"*/{name}/processed"))


@pytest.mark.parametrize("planted", ["data.pt", "pre_transform.pt", "pre_filter.pt"])
@pytest.mark.parametrize(("kind", "name"), [("tu", "MUTAG"), ("planetoid", "Cora")])
def test_a_planted_processed_file_never_runs_and_the_cache_is_rebuilt(data_root, tmp_path, monkeypatch, kind, name,
                                                                     planted):  # fmt: skip
    """PyG falls back to full unpickling for data.pt and always unpickles pre_transform.pt, so a crafted
    file in our cache ran its code; garbage there gave a traceback. Both are now rebuilt from the raw files."""
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    load = (lambda: load_tu(name)) if kind == "tu" else (lambda: load_planetoid(name))
    expected = load()[0]
    (processed,) = _processed_dirs(tmp_path / "cache", kind, name)
    marker = tmp_path / "pwned"
    for content in (lambda p: torch.save(Planted(marker), p), lambda p: p.write_bytes(b"garbage"),
                    lambda p: torch.save(torch.zeros(3), p)):  # fmt: skip
        content(processed / planted)
        with pytest.warns(UserWarning, match="rebuilding the graph cache"):
            got = load()[0]
        assert not marker.exists()
        assert torch.equal(got.x, expected.x) and torch.equal(got.edge_index, expected.edge_index)


@pytest.mark.parametrize(("flag", "value"), [("--epochs", "0"), ("--epochs", "-2"), ("--tau", "0"), ("--tau", "nan"),
                                             ("--lr", "-2"), ("--lr", "nan")])  # fmt: skip
def test_grace_preset_overrides_are_positive_or_the_preset(flag, value, data_root, tmp_path, capsys):
    """-1 means the dataset's preset; 0 used to mean it too, so `--epochs 0` silently trained 200 epochs."""
    from cl_plugins.integrations.hosts.graph.grace import main

    with pytest.raises(SystemExit) as exit_info:
        main([flag, value, "--output_dir", str(tmp_path / "out"), "--log_with", "none"])
    assert exit_info.value.code == 2 and f"{flag} must be > 0 (or -1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
