"""``kernel="triton"``: the negatives' log-sum-exp as flash-style Triton kernels that never write a tile of logits.

The same quantity as :func:`cl_plugins.kernels.streaming.streaming_negative_lse`: per anchor i,
``LSE_{j in neg(i)} l_ij`` with ``l_ij = phi(a_i . c_j)`` (plus a hard negative's bias), and without gradient the
LSEs at ``r * l`` for dual temperature's ratios and a map's statistic over the negatives. Each program holds a block
of anchors in on-chip memory and walks blocks of candidates: ``tl.dot`` gives the block of products, the map, the
masks (each row's excluded columns, same labels, the bias) and the running maximum and sum of exponentials are
applied in registers (the flash-attention / Inf-CL recurrence), and only [A]-sized results reach global memory.

Backward recomputes each block twice, once in a kernel over anchor blocks (``dA = G c``) and once over candidate
blocks (``dC = G^T a``), with ``G_ij = exp(l_ij - LSE_i) g_i phi'(x_ij)``: no atomics, so the gradients are
deterministic. A block that is also its transpose's (CLIP's two directions, SimCLR's block against itself) adds the
columns' term to G and serves both from one backward (:mod:`~cl_plugins.kernels.triton_bonded`). A learned
temperature is in the anchors (pre-scaled by 1/tau), so autograd carries its gradient.

A per-pair map reaches the kernels as a :class:`~cl_plugins.kernels.contract.TritonMap` (``LogitMap.triton``): the
Triton form of the map the strategy states once in its own file (:mod:`cl_plugins.kernels.statement`), which the
kernels take as a compile-time argument and call per tile, as FlexAttention's ``score_mod``: no kernel names a
strategy. A map without a Triton form runs on the streaming kernel.

How the kernels run is a :class:`TritonConfig` (:data:`DEFAULTS` by D, or one set with :func:`using`): the
products' precision (by default bf16x3, three bf16 products of a hi/lo split on the tensor cores with float32
accumulation, within 3e-7 of float64 on the H200 sweep; IEEE float32 as an option; bf16 products, 2.5x faster and
1e-4 off in the gradients), the block shapes, warps and pipeline stages, and chunks of D for wide features.

On the CPU it runs only under Triton's interpreter (``TRITON_INTERPRET=1``), which the tests use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

import torch

from .contract import Request, TritonMap
from .streaming import BACKEND as STREAMING
from .streaming import refuse_second_derivative
from .triton_jit import available, refuse_unusable, tl, triton, usable_on

if TYPE_CHECKING:
    from ..labels import BlockLabels

__all__ = ["TritonConfig", "Triton", "available", "refuse_unusable", "usable_on", "using"]

BLOCK = 32


if triton is not None:

    @triton.jit
    def _scalar(x, params, constant):
        """The map of a scalar temperature, already in the anchors: the products themselves."""
        return x, x * 0.0 + 1.0, x * 0.0

    @triton.jit
    def _rows(ptr, idx, n, D, k0, BD: tl.constexpr):
        """Columns ``k0 .. k0 + BD`` of the rows ``idx`` of an [n, D] matrix, zeros past its last row and column."""
        d = k0 + tl.arange(0, BD)
        return tl.load(ptr + idx[:, None] * D + d[None, :], mask=(idx[:, None] < n) & (d[None, :] < D), other=0.0)

    @triton.jit
    def _products(a_first, a_ptr, c_ptr, rows, cols, A, M, D, DP: tl.constexpr, BD: tl.constexpr,
                  PREC: tl.constexpr):  # fmt: skip
        """The [rows, cols] block of ``a c^T`` in float32, BD features at a time (no spills at large D).
        ``a_first`` is the anchors' first chunk, loaded once by the caller outside its loop (all of them where D is
        one chunk)."""
        x = tl.dot(a_first, tl.trans(_rows(c_ptr, cols, M, D, 0, BD)), input_precision=PREC)
        for k0 in tl.static_range(BD, DP, BD):
            x = tl.dot(_rows(a_ptr, rows, A, D, k0, BD), tl.trans(_rows(c_ptr, cols, M, D, k0, BD)), x,
                       input_precision=PREC)  # fmt: skip
        return x

    @triton.jit
    def _by_anchor(v, T: tl.constexpr):
        """An anchor-indexed vector against a block: its rows, or its columns where the block is transposed."""
        if T:
            return v[None, :]
        else:
            return v[:, None]

    @triton.jit
    def _by_candidate(v, T: tl.constexpr):
        """A candidate-indexed vector against a block: its columns, or its rows where the block is transposed."""
        if T:
            return v[:, None]
        else:
            return v[None, :]

    @triton.jit
    def _tile(x, rows, cols, A, M, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr, bias_ptr, bias,
              BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, T: tl.constexpr):  # fmt: skip
        """(masked logits with -inf off the negatives, phi', statistic, negatives mask) of the products ``x``:
        [rows, cols], or [cols, rows] where ``T`` (the map is elementwise; only the masks see the orientation)."""
        logit, deriv, stat = MAP(x, P, MC)
        neg = (_by_anchor(rows, T) < A) & (_by_candidate(cols, T) < M)
        for k in tl.static_range(K):
            ex = tl.load(ex_ptr + rows * K + k, mask=rows < A, other=-1)
            neg = neg & (_by_candidate(cols, T) != _by_anchor(ex, T))
        if LABELS:
            la = tl.load(la_ptr + rows, mask=rows < A, other=0)
            lc = tl.load(lc_ptr + cols, mask=cols < M, other=0)
            neg = neg & (_by_anchor(la, T) != _by_candidate(lc, T))
        if BIAS:
            bc = tl.load(bias_ptr + rows, mask=rows < A, other=-1)
            logit = tl.where(_by_candidate(cols, T) == _by_anchor(bc, T), logit + bias, logit)
        return tl.where(neg, logit, float("-inf")), deriv, stat, neg

    @triton.jit
    def _online(m, s, logit):
        """The running (max, sum of exp) of each row after one more block of ``logit`` (-inf off the negatives)."""
        m_new = tl.maximum(m, tl.max(logit, axis=1))
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        return m_new, s * tl.exp(m - safe) + tl.sum(tl.exp(logit - safe[:, None]), axis=1)

    @triton.jit
    def _forward(a_ptr, c_ptr, A, M, D, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr, bias_ptr,
                 bias, BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, ratio, RATIO: tl.constexpr,
                 lse_ptr, extra_ptr, stat_ptr, STATS: tl.constexpr, DP: tl.constexpr, BD: tl.constexpr,
                 DO: tl.constexpr, PREC: tl.constexpr, BA: tl.constexpr, BM: tl.constexpr):  # fmt: skip
        rows = tl.program_id(0) * BA + tl.arange(0, BA)
        a_first = _rows(a_ptr, rows, A, D, 0, BD)
        m = tl.full([BA], float("-inf"), tl.float32)
        s = tl.zeros([BA], tl.float32)
        m2 = tl.full([BA], float("-inf"), tl.float32)
        s2 = tl.zeros([BA], tl.float32)
        total = tl.zeros([BA], tl.float32)
        low = tl.full([BA], float("inf"), tl.float32)
        high = tl.full([BA], float("-inf"), tl.float32)
        for j in range(0, M, BM):
            cols = j + tl.arange(0, BM)
            x = _products(a_first, a_ptr, c_ptr, rows, cols, A, M, D, DP, BD, PREC)
            logit, deriv, stat, neg = _tile(x, rows, cols, A, M, ex_ptr, K, la_ptr, lc_ptr, LABELS, bias_ptr, bias,
                                            BIAS, MAP, P, MC, False)  # fmt: skip
            m, s = _online(m, s, logit)
            if RATIO:
                m2, s2 = _online(m2, s2, logit * ratio)
            if STATS:
                total += tl.sum(tl.where(neg, stat, 0.0), axis=1)
                low = tl.minimum(low, tl.min(tl.where(neg, stat, float("inf")), axis=1))
                high = tl.maximum(high, tl.max(tl.where(neg, stat, float("-inf")), axis=1))
        keep = rows < A
        tl.store(lse_ptr + rows, m + tl.log(tl.where(keep, s, 1.0)), mask=keep)
        if RATIO:
            tl.store(extra_ptr + rows, m2 + tl.log(tl.where(keep, s2, 1.0)), mask=keep)
        if STATS:
            tl.store(stat_ptr + rows * 3, total, mask=keep)
            tl.store(stat_ptr + rows * 3 + 1, low, mask=keep)
            tl.store(stat_ptr + rows * 3 + 2, high, mask=keep)

    @triton.jit
    def _gradient(x, rows, cols, A, M, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr, bias_ptr, bias,
                  BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, lse_ptr, g_ptr, lse2_ptr, g2_ptr,
                  TWO: tl.constexpr, dtype: tl.constexpr, T: tl.constexpr):  # fmt: skip
        """G = dL/dx of the products ``x``: exp(l - LSE_i) g_i phi', 0 off the negatives, in ``dtype`` (the tensor
        cores' operand); G^T where ``x`` is the transposed block (``T``). With ``TWO`` the block is also its
        transpose's (a square block whose negatives are symmetric: CLIP's two directions), and the columns' term
        exp(l - LSE2_j) g2_j phi' is added: both directions' gradient from one recomputation."""
        logit, deriv, stat, neg = _tile(x, rows, cols, A, M, ex_ptr, K, la_ptr, lc_ptr, LABELS, bias_ptr, bias, BIAS,
                                        MAP, P, MC, T)  # fmt: skip
        lse = tl.load(lse_ptr + rows, mask=rows < A, other=0.0)
        lse = tl.where(lse == float("-inf"), 0.0, lse)  # a row with no negative: every entry is masked anyway
        g = tl.load(g_ptr + rows, mask=rows < A, other=0.0)
        p = tl.exp(logit - _by_anchor(lse, T)) * _by_anchor(g, T)
        if TWO:
            lse2 = tl.load(lse2_ptr + cols, mask=cols < M, other=0.0)
            lse2 = tl.where(lse2 == float("-inf"), 0.0, lse2)
            g2 = tl.load(g2_ptr + cols, mask=cols < M, other=0.0)
            p += tl.exp(logit - _by_candidate(lse2, T)) * _by_candidate(g2, T)
        return tl.where(neg, p * deriv, 0.0).to(dtype)

    @triton.jit
    def _backward_anchors(a_ptr, c_ptr, A, M, D, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr,
                          bias_ptr, bias, BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, lse_ptr, g_ptr,
                          lse2_ptr, g2_ptr, TWO: tl.constexpr, out_ptr, DP: tl.constexpr, BD: tl.constexpr,
                          DO: tl.constexpr, PREC: tl.constexpr, BA: tl.constexpr, BM: tl.constexpr):  # fmt: skip
        """dA = G c for a block of anchors and DO of the D columns (program axis 1): the logits are recomputed
        once per DO columns, so DO < D trades products for registers."""
        rows = tl.program_id(0) * BA + tl.arange(0, BA)
        d0 = tl.program_id(1) * DO
        a_first = _rows(a_ptr, rows, A, D, 0, BD)
        acc = tl.zeros([BA, DO], tl.float32)
        for j in range(0, M, BM):
            cols = j + tl.arange(0, BM)
            x = _products(a_first, a_ptr, c_ptr, rows, cols, A, M, D, DP, BD, PREC)
            c_blk = _rows(c_ptr, cols, M, D, d0, DO)
            grad = _gradient(x, rows, cols, A, M, ex_ptr, K, la_ptr, lc_ptr, LABELS, bias_ptr, bias, BIAS, MAP, P,
                             MC, lse_ptr, g_ptr, lse2_ptr, g2_ptr, TWO, a_ptr.dtype.element_ty, False)  # fmt: skip
            acc = tl.dot(grad, c_blk, acc, input_precision=PREC)
        d = d0 + tl.arange(0, DO)
        tl.store(out_ptr + rows[:, None] * D + d[None, :], acc, mask=(rows[:, None] < A) & (d[None, :] < D))

    @triton.jit
    def _backward_candidates(a_ptr, c_ptr, A, M, D, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr,
                             bias_ptr, bias, BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, lse_ptr, g_ptr,
                             lse2_ptr, g2_ptr, TWO: tl.constexpr, out_ptr, DP: tl.constexpr, BD: tl.constexpr,
                             DO: tl.constexpr, PREC: tl.constexpr, BA: tl.constexpr, BM: tl.constexpr):  # fmt: skip
        """dC = G^T a for a block of candidates and DO of the D columns, as :func:`_backward_anchors`."""
        cols = tl.program_id(0) * BM + tl.arange(0, BM)
        d0 = tl.program_id(1) * DO
        c_first = _rows(c_ptr, cols, M, D, 0, BD)  # the fixed side here: this program's candidates
        acc = tl.zeros([BM, DO], tl.float32)
        for i in range(0, A, BA):
            rows = i + tl.arange(0, BA)
            # the block as [cols, rows] from the start: G^T multiplies the anchors with no transpose in registers
            # (transposing the products and G cost this kernel twice the anchors' one on the H200)
            xt = _products(c_first, c_ptr, a_ptr, cols, rows, M, A, D, DP, BD, PREC)
            a_blk = _rows(a_ptr, rows, A, D, d0, DO)
            grad_t = _gradient(xt, rows, cols, A, M, ex_ptr, K, la_ptr, lc_ptr, LABELS, bias_ptr, bias, BIAS, MAP, P,
                               MC, lse_ptr, g_ptr, lse2_ptr, g2_ptr, TWO, a_ptr.dtype.element_ty, True)  # fmt: skip
            acc = tl.dot(grad_t, a_blk, acc, input_precision=PREC)
        d = d0 + tl.arange(0, DO)
        tl.store(out_ptr + cols[:, None] * D + d[None, :], acc, mask=(cols[:, None] < M) & (d[None, :] < D))


def _next_power_of_two(n: int) -> int:
    return 1 << max(4, (n - 1).bit_length())  # tl.dot takes 16 and up


PRECISIONS = ("ieee", "tf32x3", "bf16x3", "bf16x6", "tf32", "bf16", "fp16")
#: the operands' dtype on the tensor cores for the precisions that round the rows themselves
ROUNDED = MappingProxyType({"bf16": torch.bfloat16, "fp16": torch.float16})


@dataclass(frozen=True)
class TritonConfig:
    """How the Triton kernels run, never what they compute (up to the rounding of ``precision``).

    Args:
        precision: the products: ``"ieee"`` (float32, no tensor cores), ``"tf32x3"``, ``"bf16x3"``, ``"bf16x6"``
            (split products on the tensor cores, near float32), ``"tf32"`` (about 1e-3 per product), ``"bf16"``,
            ``"fp16"`` (rows and gradient blocks rounded to that dtype, float32 accumulation: the products of
            half-precision features) (default: ``"ieee"``)
        block_a, block_m: anchors and candidates per block (default: 32, 32)
        block_d: features per product chunk, 0 for all of D (default: 0)
        out_d: gradient columns per backward program, 0 for all of D (default: 0)
        warps, stages: Triton's ``num_warps`` and ``num_stages`` (default: 4, 3)
    """

    precision: str = "ieee"
    block_a: int = BLOCK
    block_m: int = BLOCK
    block_d: int = 0
    out_d: int = 0
    warps: int = 4
    stages: int = 3

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"TritonConfig: precision={self.precision!r} is not one of {', '.join(PRECISIONS)}")
        for name in ("block_a", "block_m", "block_d", "out_d", "warps"):
            value = getattr(self, name)
            if value != 0 and (value < (1 if name == "warps" else 16) or value & (value - 1)):
                raise ValueError(f"TritonConfig: {name}={value} must be a power of two (16 or more for a block)")

    def sizes(self, dim: int) -> tuple[int, int, int, str, int, int]:
        """The kernels' compile-time sizes for D = ``dim``: (DP, BD, DO, PREC, BA, BM)."""
        dp = _next_power_of_two(dim)
        bd, do = min(self.block_d or dp, dp), min(self.out_d or dp, dp)
        return dp, bd, do, "ieee" if self.precision in ROUNDED else self.precision, self.block_a, self.block_m

    def launch(self) -> dict[str, int]:
        return {"num_warps": self.warps, "num_stages": self.stages}


#: the configuration by D (padded to a power of two) where none is set: the fastest exact one of the H200 sweeps
#: (docs/gpu.md, 2026-11-27 and -28): bf16x3 products, 128 x 64 blocks, 8 warps, 2 stages: 9.7 ms at N = 16,384,
#: D = 128, both directions (IEEE 32 x 32: 47.6; 64 x 64: 10.8; the streaming kernel 23.9), loss and gradients within
#: 3.1e-7 of float64. Above D = 128 the only one of twelve that fits the 227 KiB of shared memory in bf16x3: 64 x 64
#: blocks, chunks of 128 features, 256 gradient columns a program, 1 stage (47 ms at N = 16,384, D = 512, where the
#: streaming kernel takes 57; with bf16 products, half-precision features, 14.8 against ``F.cross_entropy``'s 26.0)
DEFAULTS = MappingProxyType({128: TritonConfig(precision="bf16x3", block_a=128, block_m=64, warps=8, stages=2),
            0: TritonConfig(precision="bf16x3", block_a=64, block_m=64, block_d=128, out_d=256, stages=1)})  # fmt: skip
#: the configuration :func:`using` set in this context (None: :data:`DEFAULTS`)
_config: ContextVar[TritonConfig | None] = ContextVar("cl_plugins_triton_config", default=None)


#: the products of half-precision features: their own dtype on the tensor cores, float32 accumulation. The product
#: of two such numbers is exact in float32, so the forward loses nothing against splitting them as float32 rows
#: (bf16x3 of a bf16 row is the row and two zero terms), at a third of the products (bf16 against bf16x3 measured
#: 2.5x faster on the H200, docs/gpu.md); the gradient's block is rounded to the features' dtype, as they are
HALF_PRECISIONS = MappingProxyType({torch.bfloat16: "bf16", torch.float16: "fp16"})


def config_for(dim: int, device: torch.device, dtype: torch.dtype = torch.float32) -> TritonConfig:
    """The configuration the kernels run with at D = ``dim`` for features of ``dtype``: the one set by
    :func:`using`, else the default, with products in the features' own dtype where it is a half one
    (:data:`HALF_PRECISIONS`). Triton's interpreter lacks the split products and multiplies bf16 blocks wrongly
    (Triton 3.9): on the CPU every precision multiplies in float32."""
    if _config.get() is not None:
        return _config.get()  # type: ignore[return-value]
    config = DEFAULTS[128] if _next_power_of_two(dim) <= 128 else DEFAULTS[0]
    if device.type != "cuda":
        return replace(config, precision="ieee")
    return replace(config, precision=HALF_PRECISIONS[dtype]) if dtype in HALF_PRECISIONS else config


def features_dtype(a: torch.Tensor, c: torch.Tensor, features: torch.dtype = torch.float32) -> torch.dtype:
    """The dtype whose products the kernels take for rows ``a``, ``c``: theirs where both are one half dtype, else
    that of the ``features`` they came from (the loss's inputs: float32 unit rows of half-precision features take
    half products, as the features' own matrix product would)."""
    if a.dtype == c.dtype and a.dtype in HALF_PRECISIONS:
        return a.dtype
    return features


@contextmanager
def using(config: TritonConfig | None) -> Iterator[None]:
    """Run the Triton kernels with ``config`` inside the block (benchmarks and tests compare configurations)."""
    token = _config.set(config)
    try:
        yield
    finally:
        _config.reset(token)


def _operands(a: torch.Tensor, c: torch.Tensor, config: TritonConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows the kernels read: float32, or rounded to the half dtype of a ``"bf16"``/``"fp16"`` precision."""
    dtype = ROUNDED.get(config.precision, torch.float32)
    return a.to(dtype).contiguous(), c.to(dtype).contiguous()


class _Spec:
    """Everything the three kernels take besides the embeddings, in their order, for ``request``'s block (its
    excluded columns, labels, bias and map) under ``config``."""

    def __init__(self, a: torch.Tensor, c: torch.Tensor, request: Request, config: TritonConfig) -> None:
        dummy = a.new_zeros(1, dtype=torch.long)
        exclude, labels, bias_cols = request.exclude, request.labels, request.bias_cols
        ex = dummy if exclude is None else exclude.long().contiguous()
        la, lc = (dummy, dummy) if labels is None else (labels.anchor.long().contiguous(),
                                                        labels.candidate.long().contiguous())
        logit_map = request.logit_map
        form = TritonMap(_scalar) if logit_map is None else logit_map.triton
        assert form is not None  # supports() declined maps without one
        params = tuple(float(v) for v in form.params) or (0.0,)  # a tuple argument is never empty
        k = 0 if exclude is None else exclude.shape[1]
        bias_t = dummy if bias_cols is None else bias_cols.long().contiguous()
        self.common = (a.shape[0], c.shape[0], a.shape[1], ex, k, la, lc, labels is not None, bias_t,
                       float(request.bias), bias_cols is not None, form.function, params, form.constant)  # fmt: skip
        self.config, self.logit_map = config, logit_map
        self.sizes = config.sizes(a.shape[1])

    def grid(self, n: int, block: int, out_columns: bool) -> tuple[int, int]:
        dp, _, do = self.sizes[:3]
        return triton.cdiv(n, block), (triton.cdiv(dp, do) if out_columns else 1)


def supports(request: Request, dtype: torch.dtype) -> bool:
    """Whether the Triton kernels take this request's map (one with a Triton form), extra scales (at most one, dual
    temperature's) and rows of ``dtype`` (float64 keeps its precision on the streaming kernel), on its device."""
    mapped = request.logit_map is None or request.logit_map.triton is not None
    return len(request.ratios) <= 1 and mapped and dtype != torch.float64 and usable_on(request.anchors.device)


def prepare(a: torch.Tensor, c: torch.Tensor, request: Request) -> tuple[torch.Tensor, torch.Tensor, _Spec]:
    """(the rows the kernels read, everything else they take) for ``a`` against ``c`` in ``request``'s block,
    under the configuration of their width and features' dtype (:func:`config_for`)."""
    config = config_for(a.shape[1], a.device, features_dtype(a, c, request.choice.features))
    a_in, c_in = _operands(a, c, config)
    return a_in, c_in, _Spec(a_in, c_in, request, config)


def streamed_gradients(a_in: torch.Tensor, c_in: torch.Tensor, g: torch.Tensor, request: Request,
                       transposed: tuple[BlockLabels | None, torch.Tensor] | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """dL/da, dL/dc of ``sum_i g_i LSE_i`` from the streaming kernel (exact) for ``request``'s block with rows
    ``a_in`` (pre-scaled) and ``c_in``, for a backward whose Triton kernels failed; with ``transposed`` = (the
    transpose's labels, g2), plus ``sum_j g2_j LSE'_j`` of ``c`` against ``a`` (the same excluded columns)."""
    with torch.enable_grad():
        a, c = a_in.detach().float().requires_grad_(), c_in.detach().float().requires_grad_()
        rows = replace(request, anchors=a, candidates=c, scale=1.0, ratios=(), bond=None)
        total = (STREAMING.run(rows)[0] * g).sum()
        if transposed is not None:
            back = replace(rows, anchors=c, candidates=a, labels=transposed[0], bias_cols=None, bias=0.0)
            total = total + (STREAMING.run(back)[0] * transposed[1]).sum()
        grad_a, grad_c = torch.autograd.grad(total, (a, c))
    return grad_a, grad_c


def forward_lse(a_in: torch.Tensor, c_in: torch.Tensor, spec: _Spec,
                ratios: tuple[float, ...] = ()) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """One forward launch: the LSE [A], the LSE at ``ratios[0]`` times the logits (where given) and the map's
    statistic over the negatives (sum, min, max) where the map has one and wants it."""
    n, logit_map = a_in.shape[0], spec.logit_map
    lse, extra, stats = (a_in.new_empty(n, dtype=torch.float32), a_in.new_empty(n, dtype=torch.float32),
                         a_in.new_empty(n, 3, dtype=torch.float32))  # fmt: skip
    stat = logit_map is not None and logit_map.reports
    ratio = float(ratios[0]) if ratios else 1.0
    _forward[spec.grid(n, spec.config.block_a, False)](a_in, c_in, *spec.common, ratio, bool(ratios), lse, extra,
                                                       stats, stat, *spec.sizes, **spec.config.launch())  # fmt: skip
    return lse, extra, ((stats[:, 0].sum(), stats[:, 1].amin(), stats[:, 2].amax()) if stat else None)


def backward_launch(a_in: torch.Tensor, c_in: torch.Tensor, spec: _Spec, rows: tuple[torch.Tensor, torch.Tensor],
                    columns: tuple[torch.Tensor, torch.Tensor] | None = None,
                    candidates: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """dL/da, dL/dc (float32) from the two backward kernels, given the rows' (LSE, upstream gradient) and, for a
    block that is also its transpose's, the columns' (:func:`_gradient`'s ``TWO``); ``candidates=False``: the
    anchors' kernel alone (dL/dc None)."""
    config = spec.config
    two = columns is not None
    lse2, g2 = columns if two else rows
    grad_a = torch.empty(a_in.shape, dtype=torch.float32, device=a_in.device)
    _backward_anchors[spec.grid(a_in.shape[0], config.block_a, True)](
        a_in, c_in, *spec.common, *rows, lse2, g2, two, grad_a, *spec.sizes, **config.launch())  # fmt: skip
    if not candidates:
        return grad_a, None
    grad_c = torch.empty(c_in.shape, dtype=torch.float32, device=c_in.device)
    _backward_candidates[spec.grid(c_in.shape[0], config.block_m, True)](
        a_in, c_in, *spec.common, *rows, lse2, g2, two, grad_c, *spec.sizes, **config.launch())  # fmt: skip
    return grad_a, grad_c


class _TritonNegativeLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, request):  # type: ignore[override]
        with torch.autocast(device_type=a.device.type, enabled=False), torch.no_grad():
            a_in, c_in, spec = prepare(a, c, request)
            lse, extra, stats = forward_lse(a_in, c_in, spec, request.ratios)
        ctx.save_for_backward(a_in, c_in, lse)
        ctx.spec, ctx.dtypes, ctx.request = spec, (a.dtype, c.dtype), request
        outs = [lse.to(a.dtype)] + ([extra.to(a.dtype)] if request.ratios else [])
        outs += [] if stats is None else [torch.stack(stats)]  # for Request.reported, outside this function
        ctx.mark_non_differentiable(*outs[1:])
        return tuple(outs)

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        refuse_second_derivative("Triton")
        a_in, c_in, lse = ctx.saved_tensors
        g = grad.float().contiguous()
        try:
            grad_a, grad_c = backward_launch(a_in, c_in, ctx.spec, (lse, g))
        except Exception as error:  # noqa: BLE001 - a backward kernel that cannot compile here: streamed, exact
            ctx.request.health.fail(Triton.name, error)
            grad_a, grad_c = streamed_gradients(a_in, c_in, g, ctx.request)
        return grad_a.to(ctx.dtypes[0]), grad_c.to(ctx.dtypes[1]), None


class Triton:
    """The Triton backend for one direction: any block whose map has a Triton form, on CUDA tensors (or under
    Triton's interpreter), with at most one extra scale; its LSE from one forward launch, its gradients from two
    backward kernels (streamed, exact, where they fail to compile).

    Shapes:
        anchors: [A, D] (scaled by ``scale`` here); candidates: [M, D]; exclude: [A, k]; bias_cols: [A]. Returns
        ``1 + len(ratios)`` tensors [A].
    """

    name = "triton"
    may_fail = True

    def accepts(self, request: Request) -> bool:
        return supports(request, request.anchors.dtype)

    def run(self, request: Request) -> list[torch.Tensor]:
        anchors = request.scaled_anchors()
        return request.reported(_TritonNegativeLSE.apply(anchors, request.candidates_beside(anchors), request))


BACKEND = Triton()
