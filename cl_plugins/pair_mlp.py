"""A two-layer MLP evaluated on every (anchor, candidate) pair without an [A, M, H] tensor.

For ``MLP([x_i; y_j]) = w2 . relu(W [x_i; y_j] + b1) + b2`` the first layer splits as
``W [x_i; y_j] = Wa x_i + Wb y_j``, so with ``a = x Wa^T + b1`` [A, H] and ``b = y Wb^T`` [M, H]
the pre-activation of pair (i, j) is ``a_i + b_j``. :func:`pair_scores` computes
``u_ij = w2 . relu(a_i + b_j)`` in row chunks of at most ``chunk_elements`` hidden values and
recomputes each chunk in backward instead of storing it, so memory stays O(A*M + (A+M)*H).
"""

from __future__ import annotations

import torch


def _chunk_rows(n_cols: int, hidden: int, chunk_elements: int) -> int:
    return max(1, chunk_elements // max(1, n_cols * hidden))


class _PairScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor, chunk_elements: int) -> torch.Tensor:  # type: ignore[override]
        rows = _chunk_rows(b.shape[0], b.shape[1], chunk_elements)
        out = a.new_empty(a.shape[0], b.shape[0])
        for start in range(0, a.shape[0], rows):
            hidden = (a[start : start + rows, None, :] + b[None]).relu_()
            out[start : start + rows] = hidden @ w
        ctx.save_for_backward(a, b, w)
        ctx.rows = rows
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        a, b, w = ctx.saved_tensors
        grad_a = torch.empty_like(a)
        grad_b = torch.zeros_like(b)
        grad_w = torch.zeros_like(w)
        for start in range(0, a.shape[0], ctx.rows):
            stop = start + ctx.rows
            pre = a[start:stop, None, :] + b[None]  # [c, M, H]
            g = grad[start:stop]  # [c, M]
            active = pre > 0
            grad_w += torch.einsum("cmh,cm->h", pre.relu_(), g)
            grad_pre = active * (g[..., None] * w)  # [c, M, H]
            grad_a[start:stop] = grad_pre.sum(dim=1)
            grad_b += grad_pre.sum(dim=0)
        return grad_a, grad_b, grad_w, None


def pair_scores(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor, chunk_elements: int = 1 << 21) -> torch.Tensor:
    """``u[i, j] = w . relu(a[i] + b[j])``.

    Shapes:
        a: [A, H]; b: [M, H]; w: [H] -> [A, M].
    """
    return _PairScores.apply(a, b, w, chunk_elements)


def rowwise_scores(a: torch.Tensor, b_rows: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``u[i] = w . relu(a[i] + b_rows[i])`` for one candidate per anchor; [A, H] x2 -> [A]."""
    return (a + b_rows).relu() @ w
