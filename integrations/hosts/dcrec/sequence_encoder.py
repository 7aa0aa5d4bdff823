"""SASRec's transformer sequence encoder as RecBole 1.0 builds it (post-LayerNorm BERT blocks).

Each block: multi-head self-attention (softmax(QKᵀ/√d + mask), attention dropout, output
projection, hidden dropout, ``LayerNorm(h + x)``) then a feed-forward (dense, GELU, dense,
hidden dropout, ``LayerNorm(h + x)``). DCRec masks padding only (its attention is
bidirectional over the history, which holds no future items).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout with a ``rand`` mask: the same law as ``F.dropout``, several times faster on CPU."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must lie in [0, 1), got {p}")
    return x * (torch.rand_like(x) >= p).to(x.dtype) / (1.0 - p)


class Dropout(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


class SelfAttentionBlock(nn.Module):
    def __init__(
        self, hidden: int, heads: int, inner: int, hidden_dropout: float, attn_dropout: float, eps: float
    ) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden_size={hidden} must be divisible by n_heads={heads}")
        self.heads = heads
        self.query, self.key, self.value = (
            nn.Linear(hidden, hidden),
            nn.Linear(hidden, hidden),
            nn.Linear(hidden, hidden),
        )
        self.attn_dropout = attn_dropout
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=eps)
        self.ff1, self.ff2 = nn.Linear(hidden, inner), nn.Linear(inner, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=eps)
        self.dropout = Dropout(hidden_dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, length, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, length, self.heads, h // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask, dim=-1)
        context = dropout(probs, self.attn_dropout, self.training) @ v
        context = context.transpose(1, 2).reshape(b, length, h)
        x = self.norm1(self.dropout(self.out(context)) + x)
        return self.norm2(self.dropout(self.ff2(F.gelu(self.ff1(x)))) + x)


class SequenceEncoder(nn.Module):
    """Item + position embeddings -> LayerNorm -> dropout -> ``n_layers`` blocks.

    The item embedding table belongs to the caller (DCRec shares it with its graphs and its
    output layer) and is passed to :meth:`forward`.

    Shapes: item_seq [B, L] right-padded with 0 -> [B, L, H].
    """

    def __init__(
        self,
        hidden: int,
        max_length: int,
        n_layers: int = 2,
        n_heads: int = 2,
        inner_size: int = 256,
        hidden_dropout: float = 0.5,
        attn_dropout: float = 0.5,
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.position_embedding = nn.Embedding(max_length + 1, hidden)
        self.norm = nn.LayerNorm(hidden, eps=layer_norm_eps)
        self.dropout = Dropout(hidden_dropout)
        self.blocks = nn.ModuleList(
            SelfAttentionBlock(hidden, n_heads, inner_size, hidden_dropout, attn_dropout, layer_norm_eps)
            for _ in range(n_layers)
        )

    def forward(self, item_seq: torch.Tensor, item_embedding: nn.Embedding) -> torch.Tensor:
        positions = torch.arange(item_seq.shape[1], device=item_seq.device)
        x = item_embedding(item_seq) + self.position_embedding(positions)[None]
        x = self.dropout(self.norm(x))
        # RecBole adds -10000 at padded keys; a large finite bias keeps an all-padding row finite too
        mask = ((item_seq == 0).to(x.dtype) * -10000.0)[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask)
        return x
