"""The encoders of the graph papers, on current torch-geometric.

* :class:`GINEncoder`: GraphCL's unsupervised-TU GIN (``gin.py``): per layer GINConv(Linear-ReLU-
  Linear), ReLU, BatchNorm; the graph embedding concatenates the sum-pooled output of every layer.
* :class:`MoleculeGIN`: Hu et al.'s pre-training GIN (5 layers, 300 dims, atom type + chirality
  and bond type + direction embeddings, self-loops with bond type 4, JK "last").
* :class:`GCNEncoder`: GRACE's encoder (GCNConv(in, 2h) -> act -> ... -> GCNConv(2h, h) -> act).
* :func:`projection_head`: the two-layer MLP heads of GraphCL / GRACE.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# Hu et al.'s vocabulary sizes: 119 atomic numbers + the mask token 119; bond types SINGLE, DOUBLE,
# TRIPLE, AROMATIC, self-loop (4), mask (5); bond directions NONE, ENDUPRIGHT, ENDDOWNRIGHT
NUM_ATOM_TYPE = 120
NUM_CHIRALITY_TAG = 4  # Hu et al. use 3 rows while their feature table has 4 tags; CHI_OTHER gets its own
NUM_BOND_TYPE = 6
NUM_BOND_DIRECTION = 3
SELF_LOOP_BOND = 4
MASK_ATOM = 119


class GINEncoder(nn.Module):
    """GraphCL (unsupervised TU) GIN: ``num_layers`` x (GINConv, ReLU, BatchNorm), sum pooling.

    Shapes:
        x: [n, F]; edge_index: [2, m]; batch: [n]. Returns (graph [G, hidden * num_layers],
        node [n, hidden * num_layers]).
    """

    def __init__(self, num_features: int, hidden: int = 32, num_layers: int = 3) -> None:
        super().__init__()
        from torch_geometric.nn import GINConv

        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(num_layers):
            mlp = nn.Sequential(
                nn.Linear(num_features if i == 0 else hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden)
            )
            self.convs.append(GINConv(mlp))
            self.norms.append(nn.BatchNorm1d(hidden))
        self.embedding_dim = hidden * num_layers

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor, num_graphs: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from torch_geometric.nn import global_add_pool

        xs = []
        for conv, norm in zip(self.convs, self.norms):
            x = norm(F.relu(conv(x, edge_index)))
            xs.append(x)
        pooled = [global_add_pool(h, batch, size=num_graphs) for h in xs]
        return torch.cat(pooled, 1), torch.cat(xs, 1)

    def embed(self, data: Any) -> torch.Tensor:
        """Graph embeddings [G, hidden * num_layers] of a torch-geometric batch."""
        return self(data.x, data.edge_index, data.batch, data.num_graphs)[0]


class _BondGINConv(nn.Module):
    """Hu et al.'s GIN layer: messages x_j + bond embedding, sum aggregation, MLP(emb -> 2 emb -> emb)."""

    def __init__(self, emb_dim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(emb_dim, 2 * emb_dim), nn.ReLU(), nn.Linear(2 * emb_dim, emb_dim))
        self.bond_type = nn.Embedding(NUM_BOND_TYPE, emb_dim)
        self.bond_direction = nn.Embedding(NUM_BOND_DIRECTION, emb_dim)
        nn.init.xavier_uniform_(self.bond_type.weight)
        nn.init.xavier_uniform_(self.bond_direction.weight)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        n = x.size(0)
        loops = torch.arange(n, device=x.device)
        edge_index = torch.cat([edge_index, torch.stack([loops, loops])], 1)
        loop_attr = torch.zeros(n, 2, dtype=edge_attr.dtype, device=edge_attr.device)
        loop_attr[:, 0] = SELF_LOOP_BOND
        edge_attr = torch.cat([edge_attr, loop_attr], 0)
        # index_select, not x[...]: the backward of advanced indexing accumulates in a thread-dependent order on the
        # CPU (index_put_ with accumulate), so two runs of one seed would differ in the last bits and then drift
        bonds = self.bond_type(edge_attr[:, 0]) + self.bond_direction(edge_attr[:, 1])
        messages = x.index_select(0, edge_index[0]) + bonds
        aggregated = x.new_zeros(x.shape, dtype=messages.dtype).index_add_(0, edge_index[1], messages)  # x may be half
        return self.mlp(aggregated)


class MoleculeGIN(nn.Module):
    """Hu et al. (2020) GIN for molecules; GraphCL's transfer-learning backbone.

    Shapes:
        x: [n, 2] long (atom type, chirality); edge_index: [2, m]; edge_attr: [m, 2] long
        (bond type, bond direction). Returns node representations [n, emb_dim] (JK "last").
    """

    def __init__(self, num_layers: int = 5, emb_dim: int = 300, dropout: float = 0.0) -> None:
        super().__init__()
        if num_layers < 2:
            raise ValueError(f"num_layers must be at least 2, got {num_layers}")
        self.atom_type = nn.Embedding(NUM_ATOM_TYPE, emb_dim)
        self.chirality = nn.Embedding(NUM_CHIRALITY_TAG, emb_dim)
        nn.init.xavier_uniform_(self.atom_type.weight)
        nn.init.xavier_uniform_(self.chirality.weight)
        self.convs = nn.ModuleList([_BondGINConv(emb_dim) for _ in range(num_layers)])
        self.norms = nn.ModuleList([nn.BatchNorm1d(emb_dim) for _ in range(num_layers)])
        self.dropout = dropout
        self.emb_dim = emb_dim

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        h = self.atom_type(x[:, 0]) + self.chirality(x[:, 1])
        last = len(self.convs) - 1
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            h = norm(conv(h, edge_index, edge_attr))
            h = F.dropout(h if i == last else F.relu(h), self.dropout, training=self.training)
        return h

    def embed(self, data: Any) -> torch.Tensor:
        """Mean-pooled graph embeddings [G, emb_dim] (GraphCL transfer / Hu et al. ``pool="mean"``)."""
        from torch_geometric.nn import global_mean_pool

        return global_mean_pool(self(data.x, data.edge_index, data.edge_attr), data.batch, size=data.num_graphs)


class GCNEncoder(nn.Module):
    """GRACE's encoder: ``num_layers`` GCNConv layers (widths 2h, ..., 2h, h), activation after each.

    Args:
        inner: width of the layers before the last (default: None, GRACE's 2·hidden; PyGCL's ``GConv``: hidden).

    Shapes: x: [n, F]; edge_index: [2, m]. Returns [n, hidden].
    """

    def __init__(self, in_channels: int, hidden: int, activation: str = "relu", num_layers: int = 2,
                 inner: int | None = None) -> None:  # fmt: skip
        super().__init__()
        from torch_geometric.nn import GCNConv

        if num_layers < 2:
            raise ValueError(f"num_layers must be at least 2 (GRACE's k), got {num_layers}")
        widths = [in_channels] + [inner or 2 * hidden] * (num_layers - 1) + [hidden]
        self.convs = nn.ModuleList([GCNConv(a, b) for a, b in zip(widths[:-1], widths[1:])])
        acts = {"relu": nn.ReLU, "prelu": nn.PReLU, "elu": nn.ELU, "rrelu": nn.RReLU}
        if activation not in acts:
            raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
        # one activation module shared by all layers, as GRACE's train.py passes one nn.PReLU() (one slope)
        self.activation = acts[activation]()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = self.activation(conv(x, edge_index))
        return x


def projection_head(dim: int, hidden: int | None = None, activation: str = "relu") -> nn.Sequential:
    """Linear(dim, hidden) -> ReLU / ELU -> Linear(hidden, dim): GraphCL's (ReLU) and GRACE's (ELU) heads."""
    hidden = dim if hidden is None else hidden
    act = {"relu": nn.ReLU(), "elu": nn.ELU()}[activation]
    return nn.Sequential(nn.Linear(dim, hidden), act, nn.Linear(hidden, dim))
