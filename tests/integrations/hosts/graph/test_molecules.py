"""Molecule featurisation, the scaffold split and the multi-task ROC-AUC, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("rdkit")
pytest.importorskip("torch_geometric")

from cl_plugins.integrations.hosts.graph.molecules import (  # noqa: E402
    multitask_roc_auc,
    read_moleculenet_csv,
    scaffold_split,
    smiles_to_graph,
)


def test_featurisation_follows_hu_et_al():
    g = smiles_to_graph("CCO")
    assert g.x.tolist() == [[5, 0], [5, 0], [7, 0]]  # atomic number - 1, no chirality
    assert g.edge_index.shape == (2, 4) and g.edge_attr.tolist() == [[0, 0]] * 4
    benzene = smiles_to_graph("c1ccccc1")
    assert set(benzene.edge_attr[:, 0].tolist()) == {3}  # aromatic
    cw, ccw = smiles_to_graph("N[C@@H](C)O"), smiles_to_graph("N[C@H](C)O")
    assert {cw.x[1, 1].item(), ccw.x[1, 1].item()} == {1, 2}
    assert smiles_to_graph("not a molecule") is None
    assert smiles_to_graph("[Na+].[Cl-]").edge_index.shape == (2, 0)


def test_roc_auc_hand_computed_with_missing_labels():
    labels = np.array([[1, 1], [-1, 0], [1, -1], [-1, 1], [0, -1]])
    scores = np.array([[0.9, 0.3], [0.1, 5.0], [0.4, 0.2], [0.5, 0.8], [9.0, 0.1]])
    # task 0 (rows 0-3): positives {0.9, 0.4}, negatives {0.1, 0.5}: 3 of 4 pairs ordered -> 0.75
    # task 1 (rows 0, 2, 3, 4): positives {0.3, 0.8}, negatives {0.2, 0.1}: 4 of 4 -> 1.0
    assert multitask_roc_auc(labels, scores) == pytest.approx((0.75 + 1.0) / 2)
    one_class = np.array([[1, 1], [1, -1], [1, 1]])
    assert multitask_roc_auc(one_class, np.zeros((3, 2)) + [[0, 1], [0, 0], [0, 2]]) == pytest.approx(1.0)


def test_scaffold_split_groups_by_scaffold_largest_first():
    benzenes = [
        "c1ccccc1C",
        "c1ccccc1CC",
        "c1ccccc1O",
        "c1ccccc1N",
        "c1ccccc1F",
        "c1ccccc1Cl",
        "c1ccccc1Br",
        "c1ccccc1I",
    ]
    pyridines = ["c1ccncc1C"]
    acyclic = ["CCO"]
    smiles = benzenes + pyridines + acyclic
    train, valid, test = scaffold_split(smiles)
    assert train == list(range(8))  # the largest scaffold fills train (8 <= 0.8 * 10)
    # the two singletons sorted by (size, first index) descending: the acyclic one (index 9) first
    assert valid == [9] and test == [8]


def test_moleculenet_csv_reader(tmp_path):
    path = tmp_path / "toy.csv"
    path.write_text("smiles,task_a,task_b\nCCO,1,\nCCN,0,1.0\n")
    smiles, labels, tasks = read_moleculenet_csv(path)
    assert smiles == ["CCO", "CCN"] and tasks == ["task_a", "task_b"]
    assert labels.tolist() == [[1, 0], [-1, 1]]
    original_bace = tmp_path / "bace.csv"
    original_bace.write_text("mol,CID,Class,Model,pIC50,MolWt,numRings\nCCO,BACE_1,1,Train,9.1,46.0,0\n")
    assert read_moleculenet_csv(original_bace)[2] == ["Class"]
    bad = tmp_path / "bad.csv"
    bad.write_text("foo,bar\n1,2\n")
    with pytest.raises(ValueError, match="SMILES column"):
        read_moleculenet_csv(bad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_molecule_gin_runs_under_autocast(dtype):
    """A layer's half-precision output meets the float32 bond embeddings (the GPU check's bf16 run of GraphCL
    transfer failed here: index_add_ into a buffer of the atoms' dtype)."""
    from cl_plugins.integrations.hosts.graph.encoders import MoleculeGIN

    torch.manual_seed(0)
    g = smiles_to_graph("c1ccccc1CCO")
    model = MoleculeGIN(num_layers=3, emb_dim=16)
    with torch.autocast("cpu", dtype=dtype):
        h = model(g.x, g.edge_index, g.edge_attr)
    h.float().sum().backward()
    assert h.shape == (9, 16) and torch.isfinite(h.float()).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
