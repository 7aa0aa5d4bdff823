"""Cosines of a list of (anchor, candidate) pairs, in chunks: never a [P, D] tensor of gathered rows.

Supervised contrastive learning (``label_policy="positives_*"``) has one positive pair per (anchor, same-label
candidate): P = sum over labels of (anchors of the label) x (candidates of the label), far fewer than the [A, M]
matrix's entries when there are many labels, but too many to gather their rows at once (P x D floats). The forward pass
takes the pairs in chunks of :data:`CHUNK_PAIRS`; backward scatters ``grad * candidate`` into the anchors'
gradient (and the other way round) chunk by chunk.
"""

from __future__ import annotations

import torch

#: pairs per chunk: two [CHUNK_PAIRS, D] gathers (4 MiB of float32 at D = 128, within a core's cache; 32,768 pairs a
#: chunk took 3 times as long at N = 4,096, docs/benchmarks.md)
CHUNK_PAIRS = 1 << 13


class _PairCosines(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, rows, cols):  # type: ignore[override]
        out = a.new_empty(rows.shape[0])
        for start in range(0, rows.shape[0], CHUNK_PAIRS):
            part = slice(start, start + CHUNK_PAIRS)
            out[part] = (a.index_select(0, rows[part]) * c.index_select(0, cols[part])).sum(dim=1)
        ctx.save_for_backward(a, c, rows, cols)
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        a, c, rows, cols = ctx.saved_tensors
        grad_a = torch.zeros_like(a) if ctx.needs_input_grad[0] else None
        grad_c = torch.zeros_like(c) if ctx.needs_input_grad[1] else None
        for start in range(0, rows.shape[0], CHUNK_PAIRS):
            part = slice(start, start + CHUNK_PAIRS)
            g = grad[part, None]
            if grad_a is not None:
                grad_a.index_add_(0, rows[part], g * c.index_select(0, cols[part]))
            if grad_c is not None:
                grad_c.index_add_(0, cols[part], g * a.index_select(0, rows[part]))
        return grad_a, grad_c, None, None


def pair_cosines(anchors: torch.Tensor, candidates: torch.Tensor, rows: torch.Tensor,
                 cols: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """``(anchors[rows] * candidates[cols]).sum(1)`` [P] for unit rows, in chunks (its gradient too).

    Shapes:
        anchors: [A, D]; candidates: [M, D]; rows, cols: [P] int64. Returns [P].
    """
    if torch.compiler.is_compiling():  # the compiler fuses the gathers into the sum: no [P, D] tensor either
        return (anchors.index_select(0, rows) * candidates.index_select(0, cols)).sum(dim=1)
    return _PairCosines.apply(anchors, candidates, rows, cols)
