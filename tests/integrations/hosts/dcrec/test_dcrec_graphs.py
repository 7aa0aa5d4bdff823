"""DCRec's graphs and light GCN against dense float64 references written from the released code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cl_plugins.integrations.hosts.dcrec.graphs import (
    ItemGraph,
    light_gcn,
    neighbour_readout,
    propagation_matrix,
    similarity_graph,
    transition_graph,
)


def dense(graph: ItemGraph) -> np.ndarray:
    out = np.zeros((graph.num_nodes, graph.num_nodes))
    np.add.at(out, (graph.src.numpy(), graph.dst.numpy()), graph.weight.double().numpy())
    return out


def test_transition_graph_matches_build_adj_graph():
    # items 1..4; user 0: 1 2 3 2, user 1: 3 4, user 2: 4 4 (a repeated item)
    sequences = [[1, 2, 3, 2], [3, 4], [4, 4]]
    graph, user_edges = transition_graph(sequences, 5)
    counts = np.zeros((5, 5))
    for seq in sequences:  # build_adj_graph's loop: every pair added from both of its items
        for i in range(len(seq)):
            if i > 0:
                counts[seq[i], seq[i - 1]] += 1
                counts[seq[i - 1], seq[i]] += 1
            if i + 1 < len(seq):
                counts[seq[i], seq[i + 1]] += 1
                counts[seq[i + 1], seq[i]] += 1
    np.fill_diagonal(counts, 1.0)
    d = counts.sum(1) ** -0.5
    expected = d[:, None] * counts * d[None, :]
    np.testing.assert_allclose(dense(graph), expected, rtol=1e-6)
    assert counts[2, 3] == 4  # 2 -> 3 and 3 -> 2 each occur once, counted twice
    # user 0's directed edges (1,2),(2,1),(2,3),(3,2) (the pair 3-2 repeats); user 2's only pair is the diagonal
    mask = user_edges.mask(torch.tensor([0, 0]), graph.num_edges)
    removed = {(int(s), int(t)) for s, t in zip(graph.src[mask], graph.dst[mask], strict=True)}
    assert removed == {(1, 2), (2, 1), (2, 3), (3, 2)}
    mask = user_edges.mask(torch.tensor([2]), graph.num_edges)
    assert {(int(s), int(t)) for s, t in zip(graph.src[mask], graph.dst[mask], strict=True)} == {(4, 4)}
    with pytest.raises(ValueError, match="item ids"):
        transition_graph([[1, 7]], 5)


def test_similarity_graph_matches_build_sim_graph():
    rng = np.random.default_rng(0)
    sequences = [list(rng.integers(1, 9, size=rng.integers(2, 7))) for _ in range(12)]
    k = 2
    graph = similarity_graph(sequences, 10, k, chunk=3)
    counts = np.zeros((12, 10))
    for u, seq in enumerate(sequences):
        for item in seq:
            counts[u, item] += 1
    norms = np.linalg.norm(counts, axis=0)
    unit = counts / np.where(norms > 0, norms, 1)
    sim = unit.T @ unit
    for item in range(10):
        row = graph.dst[graph.src == item].numpy()
        weights = graph.weight[graph.src == item].double().numpy()
        assert len(row) == k + 1
        top = np.sort(sim[item])[::-1][: k + 1]
        np.testing.assert_allclose(np.sort(sim[item, row])[::-1], top, atol=1e-6)  # the k + 1 largest
        total = sim[item, row].sum()
        np.testing.assert_allclose(weights, sim[item, row] / total if total > 0 else 0.0, atol=1e-6)
    assert float(graph.weight[graph.src == 0].sum()) == 0.0  # the padding item has no users: weight 0, no NaN


def test_light_gcn_is_dgl_graphconv_both_norm():
    torch.manual_seed(0)
    graph, _ = transition_graph([[1, 2, 3], [3, 1, 4], [2, 4]], 5)
    x = torch.randn(5, 3, dtype=torch.float64)
    looped = graph.with_self_loops()
    w = dense(looped)  # [src, dst]
    n_edges = np.zeros((5, 5))
    np.add.at(n_edges, (looped.src.numpy(), looped.dst.numpy()), 1)
    out_deg, in_deg = n_edges.sum(1), n_edges.sum(0)
    prop = (w * out_deg[:, None] ** -0.5 * in_deg[None, :] ** -0.5).T  # [dst, src]
    h1 = prop @ x.numpy()
    h2 = prop @ h1
    expected = (x.numpy() + h1 + h2) / 3
    np.testing.assert_allclose(light_gcn(graph, x).numpy(), expected, rtol=1e-6)
    assert looped.num_edges == graph.num_edges + 5  # a second self-loop beside the diagonal edge
    # under autocast (the GPU check's bf16 run): float32 inside, so the backward works and the value holds
    weights = x.float().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = light_gcn(graph, weights)
        (out @ torch.ones(3, 2)).sum().backward()
    assert out.dtype == torch.float32 and torch.isfinite(weights.grad).all()
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-5)


def test_edge_dropout_zeroes_weights_but_keeps_degrees():
    graph, _ = transition_graph([[1, 2, 3, 4]], 5)
    keep = torch.ones(graph.num_edges)
    keep[0] = 0.0
    full, dropped = propagation_matrix(graph).to_dense(), propagation_matrix(graph, keep).to_dense()
    diff = (full - dropped).abs() > 0
    assert int(diff.sum()) == 1 and float(dropped[graph.dst[0], graph.src[0]]) == 0.0
    torch.manual_seed(0)
    x = torch.randn(5, 4)
    assert not torch.allclose(light_gcn(graph, x, dropout=0.5), light_gcn(graph, x))


def test_neighbour_readout_splits_removed_and_kept():
    # star: item 1 linked to 2, 3, 4 (and itself); the batch user's sequence 2 1 removes 1<->2
    graph, user_edges = transition_graph([[2, 1], [1, 3], [4, 1]], 5)
    removed = user_edges.mask(torch.tensor([0]), graph.num_edges)
    feats = torch.arange(5, dtype=torch.float64)[:, None] * torch.tensor([[1.0, 10.0]], dtype=torch.float64)
    civil, foreign = neighbour_readout(graph, removed, torch.tensor([1, 3]), feats)
    torch.testing.assert_close(civil[0], feats[2])  # the removed neighbour of item 1
    torch.testing.assert_close(foreign[0], feats[[1, 3, 4]].mean(0))  # kept: itself, 3, 4
    torch.testing.assert_close(civil[1], torch.zeros(2, dtype=torch.float64))  # item 3 lost nothing
    torch.testing.assert_close(foreign[1], feats[[1, 3]].mean(0))


def test_neighbour_readout_samples_at_most_ten():
    graph, _ = transition_graph([[1, i] for i in range(2, 40)], 41)  # item 1 linked to 38 items and itself
    removed = torch.zeros(graph.num_edges, dtype=torch.bool)
    feats = torch.eye(41, dtype=torch.float64)  # one-hot: a readout shows which neighbours it averaged
    picks = set()
    for seed in range(3):
        _, kept = neighbour_readout(
            graph, removed, torch.tensor([1]), feats, generator=torch.Generator().manual_seed(seed)
        )
        chosen = (kept[0] * 10).round()
        assert set(chosen.unique().tolist()) == {0.0, 1.0} and int(chosen.sum()) == 10  # 10 distinct, equal weights
        assert set(torch.nonzero(chosen).view(-1).tolist()) <= set(range(1, 40))
        picks.add(tuple(torch.nonzero(chosen).view(-1).tolist()))
    assert len(picks) > 1  # a random subset, not a fixed one
