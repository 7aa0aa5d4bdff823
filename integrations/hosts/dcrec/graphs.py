"""DCRec's two item graphs and its light GCN, in plain torch sparse ops (no DGL).

* :func:`transition_graph`: the item-transition graph. Consecutive items of every sequence are
  linked both ways, each occurrence counting 2 (DCRec adds every pair from both of its items);
  the diagonal is set to 1; weights are ``D^-1/2 (A + I) D^-1/2``
  (row sums as degrees), as DCRec's ``build_adj_graph``. Also returns each user's directed
  transition edges (:class:`UserEdges`), which DCRec removes for its subgraph agreement.
* :func:`similarity_graph`: the item co-interaction graph. Cosine similarity of the items'
  user-count columns; each item links to its ``k + 1`` most similar items (itself included)
  with weights normalised to sum to 1 per item (all-zero rows get weight 0), as
  ``build_sim_graph``.
* :func:`light_gcn`: DGL's ``GraphConv(norm="both", weight=False, bias=False)`` applied twice
  on the graph with one extra self-loop of weight 1 per node (``dgl.add_self_loop``), random
  edge weights zeroed in training (``graph_dropout``), and the mean of the input and both
  propagation steps. As in DGL, the symmetric normalisation uses edge *counts* (zeroed edges
  still count) and the edge weights multiply the messages.

Edges are directed ``src -> dst``; a node aggregates over its in-edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class ItemGraph:
    """A weighted directed graph on ``num_nodes`` items. Shapes: src, dst, weight: [E]."""

    src: torch.Tensor
    dst: torch.Tensor
    weight: torch.Tensor
    num_nodes: int

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    def to(self, device: torch.device | str) -> ItemGraph:
        return ItemGraph(self.src.to(device), self.dst.to(device), self.weight.to(device), self.num_nodes)

    def keys(self) -> torch.Tensor:
        """``src * num_nodes + dst`` of every edge (sorted for graphs built here)."""
        return self.src * self.num_nodes + self.dst

    def without(self, edge_mask: torch.Tensor) -> ItemGraph:
        """The graph with the edges where ``edge_mask`` is true removed."""
        keep = ~edge_mask
        return ItemGraph(self.src[keep], self.dst[keep], self.weight[keep], self.num_nodes)

    def with_self_loops(self) -> ItemGraph:
        """One more self-loop of weight 1 on every node (also where one exists: ``dgl.add_self_loop``)."""
        nodes = torch.arange(self.num_nodes, device=self.src.device)
        return ItemGraph(
            torch.cat([self.src, nodes]),
            torch.cat([self.dst, nodes]),
            torch.cat([self.weight, self.weight.new_ones(self.num_nodes)]),
            self.num_nodes,
        )


@dataclass
class UserEdges:
    """Each user's directed transition edges as indices into a graph's edge list (CSR-style).

    Shapes: edge_ids [sum of counts]; offsets [num_users + 1]. User ``u`` owns
    ``edge_ids[offsets[u]:offsets[u + 1]]``.
    """

    edge_ids: torch.Tensor
    offsets: torch.Tensor

    def mask(self, users: torch.Tensor, num_edges: int) -> torch.Tensor:
        """Bool [num_edges]: the edges of any user in ``users`` (DCRec's ``graph_augment``)."""
        users = torch.unique(users.cpu())
        starts, ends = self.offsets[users], self.offsets[users + 1]
        lengths = ends - starts
        mask = torch.zeros(num_edges, dtype=torch.bool)
        if int(lengths.sum()) == 0:
            return mask
        base = torch.repeat_interleave(starts - torch.cumsum(lengths, 0) + lengths, lengths)
        positions = base + torch.arange(int(lengths.sum()))
        mask[self.edge_ids[positions]] = True
        return mask


def _transitions(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, user) for every consecutive pair in both directions."""
    a, b, users = [], [], []
    for user, seq in enumerate(sequences):
        seq = np.asarray(seq, dtype=np.int64)
        if len(seq) < 2:
            continue
        left, right = seq[:-1], seq[1:]
        a.extend((left, right))
        b.extend((right, left))
        users.append(np.full(2 * len(left), user, dtype=np.int64))
    if not a:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(a), np.concatenate(b), np.concatenate(users)


def transition_graph(sequences: Sequence[Sequence[int]], num_items: int) -> tuple[ItemGraph, UserEdges]:
    """The item-transition graph of ``sequences`` (item ids < ``num_items``) and each user's edges.

    ``sequences[u]`` is user ``u``'s item sequence (DCRec uses each training row's history).
    """
    a, b, users = _transitions(sequences)
    if len(a) and (max(a.max(), b.max()) >= num_items or min(a.min(), b.min()) < 0):
        raise ValueError(f"item ids must lie in [0, {num_items}) (num_items counts the padding item 0)")
    n = num_items
    pair_keys = a * n + b
    diag = np.arange(n, dtype=np.int64) * (n + 1)
    keys, counts = np.unique(pair_keys, return_counts=True)
    # DCRec's loop visits every consecutive pair from both of its items: each direction counts twice
    counts = 2.0 * counts
    # setdiag(1): the diagonal is 1 whatever the transition counts (a repeated item a -> a)
    on_diag = keys // n == keys % n
    keys, counts = keys[~on_diag], counts[~on_diag]
    keys = np.concatenate([keys, diag])
    counts = np.concatenate([counts, np.ones(n)])
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    src, dst = keys // n, keys % n
    rowsum = np.bincount(src, weights=counts, minlength=n)
    d_inv = rowsum**-0.5
    weight = d_inv[src] * counts * d_inv[dst]
    graph = ItemGraph(torch.from_numpy(src), torch.from_numpy(dst), torch.from_numpy(weight).float(), num_nodes=n)
    # each user's (a, b) pairs as edge ids; a repeated item's pair (a, a) is the diagonal edge
    edge_of_pair = np.searchsorted(keys, pair_keys)
    order = np.argsort(users, kind="stable")
    per_user = np.bincount(users, minlength=len(sequences))
    offsets = np.concatenate([[0], np.cumsum(per_user)])
    user_edges = UserEdges(torch.from_numpy(edge_of_pair[order]), torch.from_numpy(offsets))
    return graph, user_edges


def similarity_graph(sequences: Sequence[Sequence[int]], num_items: int, k: int = 4, *, chunk: int = 2048) -> ItemGraph:
    """Each item -> its ``k + 1`` most cosine-similar items over the user-item count matrix.

    Ties are broken by ``torch.topk`` (DCRec's ``argpartition`` breaks them arbitrarily); rows
    are processed ``chunk`` items at a time so the item-item matrix is never dense in full.
    """
    from scipy.sparse import csr_matrix

    if k + 1 > num_items:
        raise ValueError(f"k={k} needs at least k + 1 = {k + 1} items, the graph has {num_items}")
    rows = np.concatenate([np.full(len(s), u, dtype=np.int64) for u, s in enumerate(sequences)] or [np.zeros(0)])
    cols = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences] or [np.zeros(0)])
    counts = csr_matrix(
        (np.ones(len(rows), dtype=np.float64), (rows.astype(np.int64), cols.astype(np.int64))),
        shape=(len(sequences), num_items),
    )
    items = counts.T.tocsr()  # duplicates summed: repeated interactions count, as in scipy there
    norms = np.sqrt(np.asarray(items.multiply(items).sum(axis=1)).ravel())
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    items = csr_matrix(items.multiply(inv[:, None]))
    items_t = items.T.tocsr()
    src_parts, dst_parts, w_parts = [], [], []
    for start in range(0, num_items, chunk):
        block = torch.from_numpy((items[start : start + chunk] @ items_t).toarray())
        top_w, top_i = torch.topk(block, k + 1, dim=1)
        total = top_w.sum(dim=1, keepdim=True)
        top_w = torch.where(total > 0, top_w / total.clamp_min(1e-300), torch.zeros_like(top_w))
        src_parts.append(torch.arange(start, start + block.shape[0]).repeat_interleave(k + 1))
        dst_parts.append(top_i.reshape(-1))
        w_parts.append(top_w.reshape(-1))
    return ItemGraph(torch.cat(src_parts), torch.cat(dst_parts), torch.cat(w_parts).float(), num_nodes=num_items)


def propagation_matrix(graph: ItemGraph, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Sparse [N, N] ``P`` with ``(P x)[dst] = in_deg(dst)^-1/2 sum_e w_e keep_e out_deg(src)^-1/2 x[src]``.

    Degrees count edges (clamped at 1), as DGL's ``GraphConv(norm="both")``.
    """
    n = graph.num_nodes
    out_deg = torch.bincount(graph.src, minlength=n).clamp_min(1).float()
    in_deg = torch.bincount(graph.dst, minlength=n).clamp_min(1).float()
    values = graph.weight * out_deg[graph.src].rsqrt() * in_deg[graph.dst].rsqrt()
    if keep is not None:
        values = values * keep
    indices = torch.stack([graph.dst, graph.src])
    return torch.sparse_coo_tensor(indices, values, (n, n), check_invariants=False).coalesce()


def edge_keep_mask(num_edges: int, dropout: float, device: torch.device | str) -> torch.Tensor:
    """DCRec's ``graph_dropout``: ``int(dropout * E)`` edge indices drawn with replacement are zeroed."""
    keep = torch.ones(num_edges, device=device)
    drop = int(dropout * num_edges)
    if drop > 0:
        keep[torch.randint(0, num_edges, (drop,), device=device)] = 0.0
    return keep


def light_gcn(graph: ItemGraph, features: torch.Tensor, *, dropout: float = 0.0, steps: int = 2) -> torch.Tensor:
    """Mean of ``[x, P x, P^2 x]`` on ``graph`` plus self-loops, with edge dropout ``dropout``.

    Shapes: features [N, H] -> [N, H].
    """
    looped = graph.with_self_loops()
    keep = edge_keep_mask(looped.num_edges, dropout, features.device) if dropout > 0 else None
    # in float32 at least, outside autocast: autocast runs sparse.mm in half precision, whose backward then
    # meets the float32 propagation matrix and fails (found by the GPU check's bf16 run)
    with torch.autocast(features.device.type, enabled=False):
        x = features if features.dtype == torch.float64 else features.float()
        prop = propagation_matrix(looped, keep).to(x.dtype)
        outputs = [x]
        for _ in range(steps):
            x = torch.sparse.mm(prop, x)
            outputs.append(x)
        return torch.stack(outputs, dim=1).mean(dim=1).to(features.dtype)


def neighbour_readout(
    graph: ItemGraph,
    removed: torch.Tensor,
    nodes: torch.Tensor,
    features: torch.Tensor,
    *,
    max_neighbours: int = 10,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DCRec's ``graph_dual_neighbor_readout``: mean features of a node's removed and kept neighbours.

    For each node, its out-neighbours in ``graph`` split into those whose edge is ``removed``
    (DCRec's "civil" neighbours, linked through the batch's own sequences) and those kept
    ("foreign"); at most ``max_neighbours`` of each are sampled uniformly, and each group's
    features are averaged (a zero vector for an empty group; DCRec would give NaN there for
    the kept group).

    Shapes: removed [E] bool; nodes [B]; features [N, H] -> two [B, H] (removed, kept).
    """
    n = graph.num_nodes
    src = graph.src.to(features.device)
    counts = torch.bincount(src, minlength=n)
    starts = torch.cumsum(counts, 0) - counts
    if bool((src[1:] < src[:-1]).any()):
        raise ValueError("neighbour_readout needs the edges sorted by src (graphs from transition_graph are)")
    lengths = counts[nodes]
    row = torch.repeat_interleave(torch.arange(len(nodes), device=features.device), lengths)
    offset = torch.arange(int(lengths.sum()), device=features.device) - torch.repeat_interleave(
        torch.cumsum(lengths, 0) - lengths, lengths
    )
    edges = starts[nodes][row] + offset
    neighbours = graph.dst.to(features.device)[edges]
    group = row * 2 + (~removed.to(features.device)[edges]).long()  # 2b: removed, 2b + 1: kept
    noise = torch.rand(len(group), generator=generator, device="cpu").to(features.device)
    order = torch.argsort(group.double() + noise.double())
    group_sorted = group[order]
    sizes = torch.bincount(group_sorted, minlength=2 * len(nodes))
    first = torch.cumsum(sizes, 0) - sizes
    rank = torch.arange(len(order), device=features.device) - first[group_sorted]
    chosen = order[rank < max_neighbours]
    g = group[chosen]
    sums = features.new_zeros(2 * len(nodes), features.shape[1]).index_add(0, g, features[neighbours[chosen]])
    taken = torch.bincount(g, minlength=2 * len(nodes)).clamp_min(1).to(features.dtype)
    means = (sums / taken[:, None]).view(len(nodes), 2, -1)
    return means[:, 0], means[:, 1]
