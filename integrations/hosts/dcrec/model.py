"""DCRec (Yang et al., WWW'23) on current torch, with any cl-plugins strategy for its two CL terms.

Per training row (a history and its next item), as ``DCRec.calculate_loss_graphcl``:

1. Views of the history's last item ``v``: the transformer output at the last position
   (a second forward pass, so a second dropout draw) and the light-GCN outputs of the
   item-transition graph and of the item-similarity graph at ``v``
   (``layernorm(gcn(dropout(E)) + dropout(E))``).
2. Conformity ("mainstream") weights ``w`` [B]: the transition edges of the batch's users are
   removed; the agreement of ``v``'s embedding with its GCN embedding on that graph, with the
   mean of its kept neighbours, and of its removed with its kept neighbours (cosines, averaged),
   then sigmoid, min-max over the batch and rescaled to mean ``weight_mean``; rows with one
   item get 0.5. KL term ``kl_weight · KL(sorted N(weight_mean, 0.1) samples ‖ softmax(sorted w))``
   exactly as DCRec's ``cal_kl_1``. Personalisation weights ``max(w) − w``.
3. ``cl = cl_weight · mean(w · ℓ(seq, adj) + (max w − w) · ℓ(adj, sim))`` where ``ℓ`` is the
   cl-plugins strategy in the ``cross_view`` layout with ``reduction="none"`` (per row; DCRec's
   ``CLLayer.vanilla_loss`` is InfoNCE at τ = ``cl_temp`` with the positive in the denominator).
4. The three views are fused by attention and scored against every item embedding; the main
   loss is cross-entropy over all items. The trainer minimises ``ce + cl + kl``.

Deliberate differences from the released code (documented in ``docs/results/dcrec.md``): edge
dropout applies in training only (DCRec also drops edges while evaluating), a node with no kept
neighbour reads out a zero vector (DCRec: NaN), and a batch whose agreements are all equal gets
uniform weights (DCRec: 0/0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.hosts.dcrec.graphs import ItemGraph, UserEdges, light_gcn, neighbour_readout
from cl_plugins.integrations.hosts.dcrec.sequence_encoder import Dropout, SequenceEncoder


@dataclass
class DCRecGraphs:
    """The graphs of one phase: transition graph, similarity graph and (training) users' edges."""

    transition: ItemGraph
    similarity: ItemGraph
    user_edges: UserEdges | None = None


def build_dcrec_loss(name: str, cl_temp: float, hidden_size: int, **kwargs: Any) -> nn.Module:
    """The strategy for DCRec's CL terms: per-row losses, DCRec's temperature as the host τ.

    Each process contrasts its own batch (``gather_distributed=False``), as the original's
    single-process batches do; the feature width is ``hidden_size`` (AMCL's heads).
    """
    kwargs.setdefault("gather_distributed", False)
    return clp.build_host_loss(name, host_tau=cl_temp, layout="cross_view", reduction="none", feature_dim=hidden_size,
                               **kwargs)  # fmt: skip


def dcrec_kl(expected: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """DCRec's ``cal_kl_1(target, input)``: ``kl_div(log_softmax(input + 1e-8), log(max(target, 1e-8) + 1e-8))``.

    The target is the (unnormalised) sorted Gaussian sample and the input the sorted weights;
    ``batchmean`` divides by B.
    """
    target = torch.log(expected.clamp_min(1e-8) + 1e-8)
    return F.kl_div(torch.log_softmax(weights + 1e-8, dim=0), target, reduction="batchmean", log_target=True)


@strict_flags
class DCRec(nn.Module):
    """DCRec's model; ``forward(batch)`` returns ``ce + cl + kl`` (terms in :attr:`last_terms`).

    Shapes:
        batch: (item_seq [B, L] right-padded, seq_len [B], target [B], user [B]);
        :meth:`represent` returns [B, H]; :meth:`score_all` [B, num_items].
    """

    def __init__(
        self,
        num_items: int,
        graphs: DCRecGraphs,
        loss_fn: nn.Module,
        *,
        hidden_size: int = 64,
        n_layers: int = 2,
        n_heads: int = 2,
        inner_size: int = 256,
        max_length: int = 50,
        hidden_dropout: float = 0.5,
        attn_dropout: float = 0.5,
        graph_dropout: float = 0.5,
        weight_mean: float = 0.5,
        kl_weight: float = 1e-2,
        cl_weight: float = 0.1,
        fusion: bool = True,
        layer_norm_eps: float = 1e-12,
        initializer_range: float = 0.02,
    ) -> None:
        super().__init__()
        if graphs.user_edges is None:
            raise ValueError("the training graphs need user_edges (from transition_graph) for the conformity weights")
        self.num_items, self.max_length = num_items, max_length
        self.graph_dropout, self.weight_mean = graph_dropout, weight_mean
        self.kl_weight, self.cl_weight, self.fusion = kl_weight, cl_weight, fusion
        self.initializer_range = initializer_range
        self.item_embedding = nn.Embedding(num_items, hidden_size, padding_idx=0)
        self.encoder = SequenceEncoder(
            hidden_size, max_length, n_layers, n_heads, inner_size, hidden_dropout, attn_dropout, layer_norm_eps
        )
        self.dropout = Dropout(hidden_dropout)
        self.graph_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.attn_weights = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.attn = nn.Parameter(torch.empty(1, hidden_size))
        self.apply(self._init_weights)
        nn.init.normal_(self.attn, std=0.02)
        nn.init.normal_(self.attn_weights, std=0.02)
        self.loss_fn = loss_fn  # after apply(): a strategy's own parameters keep their initial values
        self.train_graphs = graphs
        self.eval_graphs: DCRecGraphs | None = None
        self.last_terms: dict[str, float] = {}

    def _init_weights(self, module: nn.Module) -> None:
        # RecBole's init, which also overwrites the padding row of the item embedding
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, self.initializer_range)
        if isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    # ------------------------------------------------------------------ views
    def graph_view(self, graph: ItemGraph) -> torch.Tensor:
        """DCRec's ``gcn_forward``: [num_items, H]."""
        emb = self.dropout(self.item_embedding.weight)
        out = light_gcn(graph.to(emb.device), emb, dropout=self.graph_dropout if self.training else 0.0)
        return self.graph_norm(out + emb)

    def sequence_view(self, item_seq: torch.Tensor, seq_len: torch.Tensor) -> torch.Tensor:
        """Transformer output at each history's last position: [B, H]."""
        out = self.encoder(item_seq, self.item_embedding)
        return out[torch.arange(len(seq_len), device=out.device), seq_len - 1]

    def fuse(self, seq: torch.Tensor, adj: torch.Tensor, sim: torch.Tensor) -> torch.Tensor:
        if not self.fusion:
            return seq
        mixed = torch.stack([seq, adj, sim])  # [3, B, H]
        logits = ((mixed @ self.attn_weights) * self.attn).sum(-1)
        return (mixed * torch.softmax(logits, dim=0).unsqueeze(-1)).sum(0)

    # ------------------------------------------------------------------ training loss
    def conformity_weights(
        self, users: torch.Tensor, last_items: torch.Tensor, adj_all: torch.Tensor, adj_last: torch.Tensor
    ) -> torch.Tensor:
        """DCRec's ``_subgraph_agreement``: mainstream weights [B]."""
        graph = self.train_graphs.transition
        removed = self.train_graphs.user_edges.mask(users, graph.num_edges)  # type: ignore[union-attr]
        augmented = self.graph_view(graph.without(removed))[last_items]
        civil, foreign = neighbour_readout(graph, removed, last_items, adj_all)
        agreement = (
            F.cosine_similarity(adj_last, augmented, eps=1e-12)
            + F.cosine_similarity(adj_last, foreign, eps=1e-12)
            + F.cosine_similarity(civil, foreign, eps=1e-12)
        ) / 3
        agreement = torch.sigmoid(agreement)
        spread = agreement.max() - agreement.min()
        if float(spread.detach()) > 0:
            agreement = (agreement - agreement.min()) / spread
        else:
            agreement = torch.ones_like(agreement)
        return (self.weight_mean / agreement.mean()) * agreement

    def forward(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        item_seq, seq_len, target, users = batch
        if bool((seq_len < 1).any()) or bool((seq_len > item_seq.shape[1]).any()):
            raise ValueError("seq_len must lie in [1, L]: every training row needs a non-empty history")
        last_items = item_seq[torch.arange(len(seq_len), device=item_seq.device), seq_len - 1]
        adj_all = self.graph_view(self.train_graphs.transition)
        sim_all = self.graph_view(self.train_graphs.similarity)
        adj_last, sim_last = adj_all[last_items], sim_all[last_items]
        seq_out = self.sequence_view(item_seq, seq_len)
        seq_aug = self.sequence_view(item_seq, seq_len)

        mainstream = self.conformity_weights(users, last_items, adj_all, adj_last)
        mainstream = torch.where(seq_len == 1, torch.full_like(mainstream, 0.5), mainstream)
        expected = torch.normal(self.weight_mean, 0.1, size=mainstream.shape, device=mainstream.device)
        kl = self.kl_weight * dcrec_kl(expected.sort().values, mainstream.sort().values)
        personal = mainstream.max() - mainstream

        loss_seq_adj = self.loss_fn(seq_aug, adj_last)
        loss_adj_sim = self.loss_fn(adj_last, sim_last)
        cl = self.cl_weight * (mainstream * loss_seq_adj + personal * loss_adj_sim).mean()

        logits = self.fuse(seq_out, adj_last, sim_last) @ self.item_embedding.weight.T
        ce = F.cross_entropy(logits + 1e-8, target)
        self.last_terms = {"ce": float(ce.detach()), "cl": float(cl.detach()), "kl": float(kl.detach())}
        return ce + cl + kl

    # ------------------------------------------------------------------ evaluation
    def set_eval_graphs(self, graphs: DCRecGraphs) -> None:
        """Graphs built from the evaluation histories (DCRec's ``adj_graph_test`` / ``sim_graph_test``)."""
        self.eval_graphs = graphs

    @torch.no_grad()
    def graph_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GCN outputs on the evaluation graphs, computed once per evaluation: two [num_items, H]."""
        if self.eval_graphs is None:
            raise RuntimeError("call set_eval_graphs() with the evaluation histories' graphs first")
        return self.graph_view(self.eval_graphs.transition), self.graph_view(self.eval_graphs.similarity)

    @torch.no_grad()
    def represent(
        self, item_seq: torch.Tensor, seq_len: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """Fused user representation of each history: [B, H]."""
        last = item_seq[torch.arange(len(seq_len), device=item_seq.device), seq_len - 1]
        return self.fuse(self.sequence_view(item_seq, seq_len), tables[0][last], tables[1][last])

    @torch.no_grad()
    def score_all(self, rep: torch.Tensor) -> torch.Tensor:
        return rep @ self.item_embedding.weight.T

    @torch.no_grad()
    def score_candidates(self, rep: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Scores of candidate items (DCRec's ``fast_predict``). Shapes: candidates [B, C] -> [B, C]."""
        return (self.item_embedding(candidates) * rep[:, None]).sum(-1)
