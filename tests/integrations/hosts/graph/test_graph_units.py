"""Graph adapter units on tiny synthetic graphs: augmentations, encoders, metrics, splits, featurisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Batch, Data  # noqa: E402
from torch_geometric.utils import to_undirected  # noqa: E402

from cl_plugins.integrations.evaluation.graph_svm import svm_cv_accuracy  # noqa: E402
from cl_plugins.integrations.evaluation.node_classification import (  # noqa: E402
    logreg_f1,
    node_classification,
    pygcl_logreg_f1,
    pygcl_split,
    random_split,
)
from cl_plugins.integrations.hosts.graph import augment  # noqa: E402
from cl_plugins.integrations.hosts.graph.encoders import GCNEncoder, GINEncoder, MoleculeGIN  # noqa: E402


def ring_batch(sizes=(10, 7, 20), feat: int = 3, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    graphs = []
    for n in sizes:
        ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
        chords = torch.randint(0, n, (2, n), generator=g)
        ei = to_undirected(torch.cat([ring, chords], 1))
        ei = ei[:, ei[0] != ei[1]]
        graphs.append(Data(x=torch.randn(n, feat, generator=g), edge_index=ei))
    return Batch.from_data_list(graphs)


def undirected_pairs(edge_index: torch.Tensor) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in edge_index.t().tolist()}


def test_rank_within_is_a_permutation_per_group():
    group = torch.tensor([0, 0, 1, 1, 1, 2, 0])
    rank = augment.rank_within(group, 3)
    for g in range(3):
        assert sorted(rank[group == g].tolist()) == list(range(int((group == g).sum())))


def test_drop_nodes_removes_floor_ratio_per_graph_and_their_edges():
    b = ring_batch()
    out = augment.drop_nodes(b, 0.2)
    assert torch.bincount(out.batch).tolist() == [10 - 2, 7 - 1, 20 - 4]
    assert out.edge_index.max() < out.num_nodes
    assert (out.batch[out.edge_index[0]] == out.batch[out.edge_index[1]]).all()
    kept_rows = {tuple(r) for r in out.x.tolist()}
    assert kept_rows <= {tuple(r) for r in b.x.tolist()}


def test_perturb_edges_drops_undirected_edges_together():
    b = ring_batch()
    out = augment.perturb_edges(b, 0.2)
    before, after = undirected_pairs(b.edge_index), undirected_pairs(out.edge_index)
    assert after <= before
    assert out.edge_index.size(1) == 2 * len(after)  # both directions of every kept edge
    per_graph = [sum(1 for a, _ in before if b.batch[a] == g) for g in range(3)]
    kept = [sum(1 for a, _ in after if b.batch[a] == g) for g in range(3)]
    assert kept == [m - int(m * 0.2) for m in per_graph]
    added = augment.perturb_edges(b, 0.2, add=True)
    assert added.edge_index.size(1) == b.edge_index.size(1)


def test_mask_attributes_gaussian_and_token():
    b = ring_batch()
    out = augment.mask_attributes(b, 0.2)
    changed = (out.x != b.x).any(1)
    assert torch.bincount(b.batch[changed], minlength=3).tolist() == [2, 1, 4]
    mol = Batch.from_data_list(
        [Data(x=torch.zeros(10, 2, dtype=torch.long), edge_index=torch.zeros(2, 0, dtype=torch.long))]
    )
    masked = augment.mask_attributes(mol, 0.3, torch.tensor([119, 0]))
    assert int((masked.x[:, 0] == 119).sum()) == 3
    with pytest.raises(ValueError, match="float node features"):
        augment.mask_attributes(mol, 0.3)


def test_subgraph_keeps_a_connected_piece_of_the_right_size():
    b = ring_batch()
    out = augment.subgraph(b, 0.2)
    assert torch.bincount(out.batch).tolist() == [8, 6, 16]  # rings are connected: quotas met
    for g in range(3):  # each kept piece is connected
        nodes = (out.batch == g).nonzero().squeeze(1).tolist()
        edges = [(a, c) for a, c in out.edge_index.t().tolist() if a in nodes]
        seen, stack = {nodes[0]}, [nodes[0]]
        while stack:
            u = stack.pop()
            for a, c in edges:
                if a == u and c not in seen:
                    seen.add(c)
                    stack.append(c)
        assert seen == set(nodes)


def test_augmentor_is_seeded_and_per_graph():
    b = ring_batch(sizes=(12,) * 40)
    aug = augment.GraphAugmentor("random4", 0.2)
    torch.manual_seed(1)
    one = aug(b)
    torch.manual_seed(1)
    two = aug(b)
    assert torch.equal(one.x, two.x) and torch.equal(one.edge_index, two.edge_index)
    sizes = torch.bincount(one.batch, minlength=40)
    assert {int(s) for s in sizes} >= {12, 10}  # some graphs untouched in size (pedges / mask), some shrunk
    with pytest.raises(ValueError, match="unknown augmentation"):
        augment.GraphAugmentor("rotate")
    with pytest.raises(ValueError, match="ratio"):
        augment.GraphAugmentor("dnodes", ratio=1.0)


def test_encoders_shapes():
    b = ring_batch()
    gin = GINEncoder(3, hidden=8, num_layers=3)
    graph, node = gin(b.x, b.edge_index, b.batch, b.num_graphs)
    assert graph.shape == (3, 24) and node.shape == (37, 24)
    mol = Data(
        x=torch.tensor([[5, 0], [5, 1], [7, 0]]),
        edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]),
        edge_attr=torch.tensor([[0, 0], [0, 0], [1, 0], [1, 0]]),
    )
    mb = Batch.from_data_list([mol, mol])
    assert MoleculeGIN(num_layers=2, emb_dim=16).embed(mb).shape == (2, 16)
    assert GCNEncoder(3, 8, "prelu")(b.x, b.edge_index).shape == (37, 8)


def test_svm_accuracy_separable_and_chance():
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1], 50)
    x = np.c_[y * 4.0 + rng.randn(100) * 0.1, rng.randn(100)]
    assert svm_cv_accuracy(x, y, seed=0) == 1.0
    noise = svm_cv_accuracy(rng.randn(100, 4), y, seed=0, search=False)
    assert 0.2 < noise < 0.8
    with pytest.raises(ValueError, match="NaN"):
        svm_cv_accuracy(np.full((100, 2), np.nan), y)


def test_node_eval_splits_and_f1():
    train, val, test = random_split(100, seed=3)
    assert (len(train), len(val), len(test)) == (10, 10, 80)
    assert len(set(train) | set(val) | set(test)) == 100
    y = np.arange(100) % 4
    x = np.eye(4)[y] + 0.01 * np.random.RandomState(0).randn(100, 4)
    res = logreg_f1(x, y, train, val, test)
    assert res["micro_f1"] == 1.0 and res["macro_f1"] == 1.0
    rows = node_classification(x, y, split="random", seeds=range(3))
    assert [r["seed"] for r in rows] == [0, 1, 2]
    with pytest.raises(ValueError, match="masks"):
        node_classification(x, y, split="public")


def test_macro_f1_hand_computed():
    # classes 0/1/2 on 6 test nodes; prediction by a fixed classifier = nearest one-hot
    y = np.array([0, 0, 1, 1, 2, 2] * 3)
    x = np.eye(3)[[0, 0, 1, 1, 2, 2] * 2 + [0, 1, 1, 1, 2, 0]]
    train, val, test = np.arange(6), np.arange(6, 12), np.arange(12, 18)
    res = logreg_f1(x, y, train, val, test, c_grid=(100.0,))
    # test predictions 0,1,1,1,2,0 vs truth 0,0,1,1,2,2: micro 4/6;
    # class 0: P 1/2, R 1/2 -> F1 1/2; class 1: P 2/3, R 1 -> 4/5; class 2: P 1, R 1/2 -> 2/3
    assert res["micro_f1"] == pytest.approx(4 / 6)
    assert res["macro_f1"] == pytest.approx((1 / 2 + 4 / 5 + 2 / 3) / 3)


def test_pygcl_split_puts_80_percent_in_validation():
    """PyGCL's get_split(n, 0.1, 0.8) as it runs: 10% train, 80% 'valid', the remaining 10% 'test'."""
    train, val, test = pygcl_split(3327, seed=0)
    assert (len(train), len(val), len(test)) == (332, 2661, 334)
    assert len(set(train) | set(val) | set(test)) == 3327
    assert (pygcl_split(3327, seed=0)[0] == train).all() and not (pygcl_split(3327, seed=1)[0] == train).all()


def test_pygcl_logreg_reports_test_f1_at_the_best_validation_check():
    y = np.arange(200) % 4
    x = np.eye(4)[y] * 3 + 0.01 * np.random.RandomState(0).randn(200, 4)
    train, val, test = pygcl_split(200, seed=0)
    res = pygcl_logreg_f1(x, y, train, val, test, epochs=200)
    assert res["micro_f1"] == 1.0 and res["macro_f1"] == 1.0 and res["val_micro_f1"] == 1.0
    # the first check reaching the best is kept: the check before it was worse, later ties do not replace it
    first = int(res["epoch"]) + 1
    assert first % 20 == 0 and first < 200
    assert pygcl_logreg_f1(x, y, train, val, test, epochs=first) == res
    assert pygcl_logreg_f1(x, y, train, val, test, epochs=first - 20)["val_micro_f1"] < 1.0
    # labels the classifier cannot learn: the validation best stays below 1 and the test F1 is that check's
    noise = pygcl_logreg_f1(np.random.RandomState(1).randn(200, 4), y, train, val, test, epochs=100)
    assert 0.0 < noise["val_micro_f1"] < 0.6
