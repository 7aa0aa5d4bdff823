"""Data that is cut, inconsistent or changed is refused or rebuilt, never used silently."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("torch_geometric")

from cl_plugins.integrations.hosts.graph.datasets import check_tu_raw, load_tu  # noqa: E402
from cl_plugins.integrations.hosts.graph.molecules import multitask_roc_auc, roc_auc_tasks  # noqa: E402


@pytest.fixture()
def mutag(data_root, tmp_path):
    raw = tmp_path / "MUTAG" / "raw"
    shutil.copytree(data_root / "graphs" / "tu" / "MUTAG" / "raw", raw)
    return raw


def _cut(path, keep: float, at_line_end: bool) -> None:
    text = path.read_text()
    cut = int(len(text) * keep)
    if at_line_end:
        cut = text.rindex("\n", 0, cut) + 1
    path.write_text(text[:cut])


@pytest.mark.parametrize(
    "file,at_line_end,match",
    [
        ("MUTAG_A.txt", False, "no newline"),  # cut mid-line
        ("MUTAG_graph_indicator.txt", True, "lines for"),  # fewer nodes and graphs than the other files describe
        ("MUTAG_graph_labels.txt", True, "lines for 188 graphs"),
        ("MUTAG_node_labels.txt", True, "lines for 3371 nodes"),
    ],
)
def test_a_cut_tu_file_is_refused_with_its_name(mutag, file, at_line_end, match):
    _cut(mutag / file, 0.4, at_line_end)
    with pytest.raises(ValueError, match=match) as info:
        check_tu_raw(mutag, "MUTAG")
    assert file in str(info.value) or "MUTAG_" in str(info.value)


def test_a_bad_line_and_an_out_of_range_node_are_named(mutag):
    lines = (mutag / "MUTAG_A.txt").read_text().splitlines()
    lines[9] = "3, x"
    (mutag / "MUTAG_A.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"MUTAG_A.txt:10: expected 2 integer"):
        check_tu_raw(mutag, "MUTAG")
    lines[9] = "3, 99999"
    (mutag / "MUTAG_A.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"MUTAG_A.txt:10: node id out of 1..3371"):
        check_tu_raw(mutag, "MUTAG")


def test_the_tu_cache_follows_the_raw_files(mutag):
    before = load_tu("MUTAG", root=mutag.parents[1])
    assert len(before) == 188
    lines = (mutag / "MUTAG_graph_labels.txt").read_text().splitlines()
    flipped = ["1" if v.strip() == "-1" else "-1" for v in lines]  # a corrected label file, same size
    (mutag / "MUTAG_graph_labels.txt").write_text("\n".join(flipped) + "\n")
    after = load_tu("MUTAG", root=mutag.parents[1])
    assert not np.array_equal(before.y.numpy(), after.y.numpy())  # reprocessed, not the stale cache


def test_roc_auc_says_which_tasks_it_averaged():
    labels = np.array([[1, 1, 0], [-1, 1, 1], [1, 1, -1], [-1, 1, 0]])  # task 1 has one class only
    scores = np.array([[0.9, 0.5, 0.1], [0.1, 0.5, 0.8], [0.8, 0.5, 0.3], [0.2, 0.5, 0.5]])
    assert roc_auc_tasks(labels) == ([0, 2], [1])
    assert multitask_roc_auc(labels, scores) == pytest.approx((1.0 + 1.0) / 2)


def test_moleculenet_labels_and_dropped_molecules(tmp_path, capsys):
    pytest.importorskip("rdkit")
    from cl_plugins.integrations.hosts.graph.molecules import MoleculeNetData, read_moleculenet_csv

    raw = tmp_path / "toy" / "raw"
    raw.mkdir(parents=True)
    good = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCC", "CCOC", "CNC", "CCCl", "CCBr", "OCCO"] * 3
    rows = [f"{s},{i % 2}" for i, s in enumerate(good)] + ["not_a_smiles,1"]  # 1 of 31: dropped, printed
    (raw / "toy.csv").write_text("smiles,active\n" + "\n".join(rows) + "\n")
    data = MoleculeNetData("toy", root=tmp_path)
    assert data.dropped == 1 and len(data) == 30 and "1 of 31 molecules dropped" in capsys.readouterr().out
    (raw / "toy.csv").write_text("smiles,active\n" + "\n".join(rows[:10] + ["xx,1"] * 5) + "\n")
    with pytest.raises(ValueError, match="rejected 5 of 15 SMILES"):
        MoleculeNetData("toy", root=tmp_path)
    (raw / "toy.csv").write_text("smiles,active\nCCO,1\nCCN,yes\n")
    with pytest.raises(ValueError, match=r"toy.csv:3: task 'active' has the label 'yes'"):
        read_moleculenet_csv(raw / "toy.csv")


def test_a_garbled_tu_file_is_named_in_one_line(mutag):
    (mutag / "MUTAG_graph_labels.txt").write_bytes(b"1\n\xff\xfe\n" * 94)
    with pytest.raises(ValueError, match=r"MUTAG_graph_labels.txt: not a text file \(byte 2 is not UTF-8\)"):
        check_tu_raw(mutag, "MUTAG")
    (mutag / "MUTAG_graph_labels.txt").write_text("1\nseven\n" * 94)
    with pytest.raises(ValueError, match=r"MUTAG_graph_labels.txt:2: expected 1 integer"):
        check_tu_raw(mutag, "MUTAG")


def test_a_replaced_registered_raw_file_is_refused_before_pyg_unpickles_it(data_root, tmp_path, monkeypatch):
    """Planetoid's raw ind.* files are pickles that PyG unpickles: under the data root, the registry's hashes are
    checked first (a truncated ind.cora.graph gave "Ran out of input"; a crafted one would have run)."""
    from cl_plugins.integrations.hosts.graph.datasets import load_planetoid

    root = tmp_path / "root"
    shutil.copytree(data_root / "graphs" / "planetoid" / "Cora", root / "graphs" / "planetoid" / "Cora")
    graph = root / "graphs" / "planetoid" / "Cora" / "raw" / "ind.cora.graph"
    graph.write_bytes(graph.read_bytes()[:100])
    monkeypatch.setenv("CL_PLUGINS_DATA", str(root))
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"ind.cora.graph: size 100 bytes, expected .*cl-plugins data download "
                                         r"planetoid-cora --force") as info:  # fmt: skip
        load_planetoid("Cora")
    assert "\n" not in str(info.value) and not list((tmp_path / "cache").rglob("ind.cora.graph"))
