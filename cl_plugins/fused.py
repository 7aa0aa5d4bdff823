"""Fast path for scalar temperatures: logits that are never materialised twice.

For a scalar temperature the logits of a block are ``(a / tau) @ c.T`` with L2-normalised
anchors ``a`` and candidates ``c``. :class:`LazyLogits` represents them without computing
them; ``sim / tau`` on it only rescales. :func:`negative_lse` then computes the log-sum-exp
over each anchor's negatives in one [A, M] buffer: matmul, mask, row max, ``exp`` in place,
row sum. The buffer holds the softmax numerators that backward needs and is overwritten in
place there, so the whole loss stores one [A, M] tensor (F.cross_entropy keeps several) and
makes three passes over it forward and one backward.

Extra no-grad log-sum-exps at other scales (dual temperature's tau_beta) reuse the same
buffer before it is overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .streaming import LogitMap, NegativeStats, streaming_negative_lse

NEG_INF = float("-inf")
# elements of one row chunk (1 MiB of float32): small enough to stay in a core's cache
CHUNK_ELEMENTS = 1 << 18


class _NegativeLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, exclude_cols, ratios, logit_map=None, bias_cols=None, bias=0.0):  # type: ignore[override]
        with torch.autocast(device_type=a.device.type, enabled=False):
            return _NegativeLSE._forward(ctx, a, c, exclude_cols, ratios, logit_map, bias_cols, bias)

    @staticmethod
    def _forward(ctx, a, c, exclude_cols, ratios, logit_map, bias_cols, bias):  # type: ignore[no-untyped-def]
        x = a @ c.T
        if exclude_cols is not None and logit_map is None:
            x.scatter_(1, exclude_cols, NEG_INF)
        n_rows = x.shape[0]
        m = x.new_empty(n_rows, 1)
        s = x.new_empty(n_rows, 1)
        extras = [x.new_empty(n_rows) for _ in ratios]
        stats = NegativeStats(x) if logit_map is not None and logit_map.with_stat is not None else None
        # row chunks that stay in cache: max, exp and sums then cost about one pass over x
        step = max(1, CHUNK_ELEMENTS // max(1, x.shape[1]))
        for start in range(0, n_rows, step):
            rows = slice(start, start + step)
            xc, derivative = _chunk_logits(x[rows], rows, exclude_cols, logit_map, bias_cols, bias, stats)
            mc = xc.amax(dim=1, keepdim=True)  # finite: every row keeps at least one negative
            for out, r in zip(extras, ratios):
                out[rows] = r * mc.squeeze(1) + torch.sub(xc, mc).mul_(r).exp_().sum(dim=1).log_()
            xc.sub_(mc).exp_()
            m[rows] = mc
            s[rows] = xc.sum(dim=1, keepdim=True)
            if derivative is not None:  # the buffer keeps exp(l - m) * phi'(x), all that backward needs
                torch.mul(xc, derivative, out=x[rows])
        if stats is not None:
            logit_map.on_stats(*stats.values)
        ctx.save_for_backward(a, c, x, s)
        ctx.consumed = False
        ctx.mark_non_differentiable(*extras)
        return (m + s.log()).squeeze(1), *extras

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        if torch.is_grad_enabled():  # backward with create_graph=True: this backward is not differentiable
            raise RuntimeError(
                "the fused loss path has no second derivative (create_graph=True, e.g. a gradient penalty); "
                "build the loss with fused=False for that"
            )
        if ctx.consumed:
            raise RuntimeError(
                "the fused loss path frees its buffer in backward and cannot be differentiated twice "
                "(retain_graph=True); build the loss with fused=False for that"
            )
        ctx.consumed = True
        a, c, x, s = ctx.saved_tensors
        with torch.autocast(device_type=a.device.type, enabled=False):  # also when backward runs under autocast
            g = x.mul_(grad[:, None] / s)  # softmax over the negatives, times the incoming gradient
            grad_a = g @ c if ctx.needs_input_grad[0] else None
            grad_c = g.T @ a if ctx.needs_input_grad[1] else None
        return grad_a, grad_c, None, None, None, None, None


def _chunk_logits(x, rows, exclude_cols, logit_map, bias_cols, bias, stats):  # type: ignore[no-untyped-def]
    """(logits of the chunk ``x`` with -inf at its non-negatives, the map's derivative or None); without a map
    the logits are ``x`` itself (already masked)."""
    if logit_map is None:
        if bias_cols is not None:
            x.scatter_add_(1, bias_cols[rows, None], x.new_full((x.shape[0], 1), bias))
        return x, None
    logits, derivative, stat = logit_map.evaluate_all(x)
    exclude = None if exclude_cols is None else exclude_cols[rows]
    if stats is not None:
        excluded = (x.new_empty(0, dtype=torch.long),) * 2
        if exclude is not None:
            excluded = (torch.arange(x.shape[0], device=x.device)[:, None].expand_as(exclude).reshape(-1),
                        exclude.reshape(-1))  # fmt: skip
        stats.add(stat, excluded)
    if bias_cols is not None:
        logits.scatter_add_(1, bias_cols[rows, None], logits.new_full((x.shape[0], 1), bias))
    if exclude is not None:
        logits.scatter_(1, exclude, NEG_INF)
    return logits, derivative


@dataclass(frozen=True)
class LazyLogits:
    """``scale * (anchors @ candidates.T)`` (or ``logit_map`` of the cosines), plus a separate positive column
    for queues, plus ``bias`` on one column per row; computed only inside the loss kernels.

    ``stream=True`` uses :mod:`cl_plugins.streaming` (tiles, no [A, M] buffer); so does a logit map without an
    explicit derivative, which the one-buffer kernel of this module cannot apply.

    Shapes:
        anchors: [A, D] and candidates: [M, D], both L2-normalised; positives: [A, D] or None;
        bias_cols: [A] or None.
    """

    anchors: torch.Tensor
    candidates: torch.Tensor
    positives: torch.Tensor | None = None
    scale: float | torch.Tensor = 1.0
    stream: bool = False
    logit_map: LogitMap | None = None
    bias_cols: torch.Tensor | None = None
    bias: float = 0.0
    # cosines of the positive pairs, shared by every rescaled copy (computed once per block)
    _positive_cache: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @property
    def dtype(self) -> torch.dtype:
        return self.anchors.dtype

    def __truediv__(self, tau: float | torch.Tensor) -> LazyLogits:
        if self.logit_map is not None:
            raise TypeError("mapped logits cannot be rescaled: put the temperature into the logit map")
        return replace(self, scale=self.scale / tau)

    def mapped(self, logit_map: LogitMap) -> LazyLogits:
        """Logits ``logit_map.value(cosine)`` (per-pair strategies)."""
        if not (isinstance(self.scale, float) and self.scale == 1.0):
            raise TypeError("a logit map applies to the cosines themselves, not to rescaled logits")
        return replace(self, logit_map=logit_map)

    def with_bias(self, cols: torch.Tensor, value: float) -> LazyLogits:
        """``value`` added to the logit at column ``cols[a]`` of every row a (a hard negative's bias)."""
        return replace(self, bias_cols=cols, bias=float(value))

    def scaled_anchors(self) -> torch.Tensor:
        if isinstance(self.scale, float) and self.scale == 1.0:
            return self.anchors
        return self.anchors * self.scale

    def positive(self, cols: torch.Tensor) -> torch.Tensor:
        """Logits of the positive pairs [A]."""
        cos = self._positive_cache.get("cos")
        if cos is None:
            p = self.positives if self.positives is not None else self.candidates.index_select(0, cols)
            cos = (self.anchors * p).sum(dim=1)
            if torch.is_grad_enabled():  # a no-grad result must not stand in for the graph later
                self._positive_cache["cos"] = cos
        if self.logit_map is not None:
            return self.logit_map.value(cos)
        if isinstance(self.scale, float) and self.scale == 1.0:
            return cos
        return cos * self.scale

    def negative_lse(self, exclude_cols: torch.Tensor | None, ratios: tuple[float, ...] = ()) -> list[torch.Tensor]:
        """LSE over negatives [A] at this scale, then (no grad) at ``scale * r`` for each r."""
        # with separate positives (queue) every candidate is a negative
        exclude = None if self.positives is not None else exclude_cols
        fusable = self.logit_map is None or self.logit_map.with_derivative is not None
        if self.stream or not fusable:
            options = {"logit_map": self.logit_map, "bias_cols": self.bias_cols, "bias": self.bias}
            anchors = self.scaled_anchors()
            return streaming_negative_lse(anchors, self.candidates, exclude, ratios=tuple(ratios), **options)
        return list(_NegativeLSE.apply(self.scaled_anchors(), self.candidates, exclude, tuple(ratios),
                                       self.logit_map, self.bias_cols, self.bias))  # fmt: skip
