"""GraphCL's four augmentations, vectorised over a mini-batch of graphs.

Each augmentation acts on a torch-geometric ``Batch`` (or a single ``Data``) and takes a ratio
per graph, so every graph of a batch can get a different augmentation (GraphCL's ``random2`` /
``random3`` / ``random4`` draw one per graph) without a Python loop over graphs:

* ``drop_nodes``: remove ``int(n * ratio)`` random nodes of each graph and their edges;
* ``perturb_edges``: remove ``int(m * ratio)`` random undirected edges of each graph (both
  directions together); ``add=True`` also inserts as many random edges (the paper's "adding or
  dropping"; GraphCL's released code only drops);
* ``mask_attributes``: replace the features of ``int(n * ratio)`` random nodes, by Gaussian
  noise N(0.5, 0.5) for continuous features (GraphCL TU) or by a mask token for categorical
  features (Hu et al.'s molecules);
* ``subgraph``: keep ``n - int(n * ratio)`` nodes grown from a random seed node by random
  neighbourhood expansion, and the induced edges.

Randomness comes from ``torch``'s global generator, so a seeded (or checkpoint-restored) run
draws the same views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

NAMES = ("none", "dnodes", "pedges", "mask_nodes", "subgraph")
ALIASES = {
    # GraphCL transfer-learning spellings
    "dropN": "dnodes",
    "permE": "pedges",
    "maskN": "mask_nodes",
    "identity": "none",
}
RANDOM = {
    "random2": ("dnodes", "subgraph"),
    "random3": ("dnodes", "pedges", "subgraph"),
    "random4": ("dnodes", "pedges", "subgraph", "mask_nodes"),
    "random": ("dnodes", "pedges", "subgraph", "mask_nodes"),
}


def _graph_index(data: Any) -> tuple[torch.Tensor, int]:
    batch = getattr(data, "batch", None)
    if batch is None:
        return torch.zeros(data.num_nodes, dtype=torch.long, device=data.edge_index.device), 1
    return batch, int(data.num_graphs)


def rank_within(group: torch.Tensor, num_groups: int, scores: torch.Tensor | None = None) -> torch.Tensor:
    """Random rank (0, 1, ...) of every element inside its group.

    Shapes:
        group: [E] group ids in ``[0, num_groups)``; scores: [E] (default uniform random).
        Returns [E] long.
    """
    scores = torch.rand(group.numel(), device=group.device) if scores is None else scores
    order = torch.argsort(scores)
    order = order[torch.argsort(group[order], stable=True)]
    counts = torch.bincount(group, minlength=num_groups)
    start = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(order)
    rank[order] = torch.arange(group.numel(), device=group.device) - start[group[order]]
    return rank


def _per_graph_ratio(ratio: float | torch.Tensor, num_graphs: int, device: torch.device) -> torch.Tensor:
    r = torch.as_tensor(ratio, dtype=torch.float32, device=device).expand(num_graphs)
    if ((r < 0) | (r >= 1)).any():
        raise ValueError(f"augmentation ratio must be in [0, 1), got {ratio}")
    return r


def _count(sizes: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    return torch.floor(sizes.float() * ratio + 1e-6).long()


def _keep_nodes(data: Any, keep: torch.Tensor) -> Any:
    from torch_geometric.utils import subgraph as pyg_subgraph

    out = data.clone()
    edge_index, edge_attr = pyg_subgraph(
        keep, data.edge_index, getattr(data, "edge_attr", None), relabel_nodes=True, num_nodes=data.num_nodes
    )
    out.edge_index = edge_index
    if getattr(data, "edge_attr", None) is not None:
        out.edge_attr = edge_attr
    out.x = data.x[keep]
    if getattr(data, "batch", None) is not None:
        out.batch = data.batch[keep]
        counts = torch.bincount(out.batch, minlength=data.num_graphs)
        out.ptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
        # a Batch remembers per-graph slices for unbatching; the augmented view is only encoded
        out._slice_dict = None
    else:
        out.num_nodes = int(keep.sum())
    return out


def drop_nodes(data: Any, ratio: float | torch.Tensor = 0.2) -> Any:
    """Remove ``int(n * ratio)`` random nodes per graph (and their edges)."""
    batch, num_graphs = _graph_index(data)
    r = _per_graph_ratio(ratio, num_graphs, batch.device)
    sizes = torch.bincount(batch, minlength=num_graphs)
    drop = rank_within(batch, num_graphs) < _count(sizes, r)[batch]
    return _keep_nodes(data, ~drop)


def perturb_edges(data: Any, ratio: float | torch.Tensor = 0.2, add: bool = False) -> Any:
    """Remove ``int(m * ratio)`` random undirected edges per graph (``add``: and add as many)."""
    batch, num_graphs = _graph_index(data)
    r = _per_graph_ratio(ratio, num_graphs, batch.device)
    row, col = data.edge_index
    n = data.num_nodes
    key = torch.minimum(row, col) * n + torch.maximum(row, col)
    pairs, inverse = torch.unique(key, return_inverse=True)
    pair_graph = batch[pairs // n]
    pair_counts = torch.bincount(pair_graph, minlength=num_graphs)
    n_drop = _count(pair_counts, r)
    keep_pair = rank_within(pair_graph, num_graphs) >= n_drop[pair_graph]
    keep = keep_pair[inverse]
    out = data.clone()
    out.edge_index = data.edge_index[:, keep]
    if getattr(data, "edge_attr", None) is not None:
        if add:
            raise ValueError("perturb_edges(add=True) cannot invent edge attributes; use add=False for molecules")
        out.edge_attr = data.edge_attr[keep]
    if add and int(n_drop.sum()):
        sizes = torch.bincount(batch, minlength=num_graphs)
        start = torch.cumsum(sizes, 0) - sizes
        g = torch.repeat_interleave(torch.arange(num_graphs, device=batch.device), n_drop)
        u = start[g] + (torch.rand(g.numel(), device=g.device) * sizes[g]).long()
        v = start[g] + (torch.rand(g.numel(), device=g.device) * sizes[g]).long()
        new = torch.stack([torch.cat([u, v]), torch.cat([v, u])])
        out.edge_index = torch.cat([out.edge_index, new], dim=1)
    return out


def mask_attributes(data: Any, ratio: float | torch.Tensor = 0.2, mask_value: Any = "gaussian") -> Any:
    """Replace the features of ``int(n * ratio)`` random nodes per graph.

    ``mask_value``: ``"gaussian"`` draws N(0.5, 0.5) per entry (GraphCL TU); a number or a
    [F] tensor sets the row to it (e.g. Hu et al.'s mask token ``[119, 0]`` for molecules).
    """
    batch, num_graphs = _graph_index(data)
    r = _per_graph_ratio(ratio, num_graphs, batch.device)
    sizes = torch.bincount(batch, minlength=num_graphs)
    masked = rank_within(batch, num_graphs) < _count(sizes, r)[batch]
    out = data.clone()
    x = data.x.clone()
    k = int(masked.sum())
    if k:
        if isinstance(mask_value, str):
            if mask_value != "gaussian":
                raise ValueError(f"mask_value must be 'gaussian', a number or a tensor, got {mask_value!r}")
            if not x.is_floating_point():
                raise ValueError("mask_value='gaussian' needs float node features; pass a mask token instead")
            x[masked] = torch.randn(k, x.size(1), device=x.device, dtype=x.dtype) * 0.5 + 0.5
        else:
            x[masked] = torch.as_tensor(mask_value, dtype=x.dtype, device=x.device)
    out.x = x
    return out


def subgraph(data: Any, ratio: float | torch.Tensor = 0.2) -> Any:
    """Keep ``n - int(n * ratio)`` nodes per graph, grown from a random node by random expansion.

    Each round adds random frontier nodes (neighbours of the kept set) until the graph's quota
    is met; a graph whose component is exhausted keeps what it has (as GraphCL's code does).
    """
    batch, num_graphs = _graph_index(data)
    r = _per_graph_ratio(ratio, num_graphs, batch.device)
    sizes = torch.bincount(batch, minlength=num_graphs)
    target = (sizes - _count(sizes, r)).clamp(min=1)
    untouched = r == 0
    keep = untouched[batch] | (rank_within(batch, num_graphs) == 0)
    need = target - torch.bincount(batch[keep], minlength=num_graphs)
    row, col = data.edge_index
    while bool((need > 0).any()):
        reached = torch.zeros_like(keep)
        reached[col[keep[row]]] = True
        frontier = reached & ~keep & (need[batch] > 0)
        if not bool(frontier.any()):
            break
        idx = frontier.nonzero().squeeze(1)
        take = rank_within(batch[idx], num_graphs) < need[batch[idx]]
        keep[idx[take]] = True
        need = need - torch.bincount(batch[idx[take]], minlength=num_graphs)
    return _keep_nodes(data, keep)


def _resolve(name: str) -> tuple[str, ...]:
    name = ALIASES.get(name, name)
    if name in RANDOM:
        return RANDOM[name]
    if name in NAMES:
        return (name,)
    raise ValueError(f"unknown augmentation {name!r}; choose from {sorted([*NAMES, *RANDOM, *ALIASES])}")


class GraphAugmentor:
    """One of several augmentations per graph, GraphCL style.

    ``GraphAugmentor("random4")`` draws, for every graph of a batch, one of node dropping, edge
    perturbation, subgraph and attribute masking; ``GraphAugmentor(["dnodes", "subgraph"])``
    draws among those; ``GraphAugmentor("dnodes")`` always applies node dropping.
    """

    def __init__(
        self, names: str | Sequence[str] = "random4", ratio: float = 0.2, mask_value: Any = "gaussian"
    ) -> None:
        names = [names] if isinstance(names, str) else list(names)
        self.choices = tuple(dict.fromkeys(c for n in names for c in _resolve(n)))
        if not 0 <= ratio < 1:
            raise ValueError(f"ratio must be in [0, 1), got {ratio}")
        self.ratio = ratio
        self.mask_value = mask_value

    def __call__(self, data: Any) -> Any:
        batch, num_graphs = _graph_index(data)
        pick = torch.randint(len(self.choices), (num_graphs,), device=batch.device)
        ratio = {name: torch.where(pick == i, self.ratio, 0.0).to(torch.float32) for i, name in enumerate(self.choices)}
        zero = torch.zeros(num_graphs, device=batch.device)
        out = data
        if "mask_nodes" in ratio:
            out = mask_attributes(out, ratio["mask_nodes"], self.mask_value)
        if "pedges" in ratio:
            out = perturb_edges(out, ratio["pedges"])
        if "subgraph" in ratio and bool((ratio["subgraph"] > 0).any()):
            out = subgraph(out, ratio["subgraph"])
        if "dnodes" in ratio:
            out = drop_nodes(out, ratio.get("dnodes", zero))
        return out

    def __repr__(self) -> str:
        return f"GraphAugmentor({list(self.choices)}, ratio={self.ratio})"
