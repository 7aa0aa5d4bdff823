"""The Triton kernels of ``kernel="triton"`` (jitted functions only; :mod:`.triton_lse` launches them as
operators): the negatives' log-sum-exp of a block of anchors against candidates in one forward kernel, and its
gradients from two backward kernels (over anchor blocks, ``dA = G c``; over candidate blocks, ``dC = G^T a``), each
recomputing the products block by block. The map reaches them as a compile-time function (``MAP``), the excluded
columns, labels and bias as masks: no kernel names a strategy. Empty where Triton is not installed."""

from __future__ import annotations

from .triton_jit import tl, triton, triton_map

if triton is not None:

    @triton_map
    def scalar_map(x, params, constant):
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
    def forward_kernel(a_ptr, c_ptr, A, M, D, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr, bias_ptr,
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
    def backward_anchors_kernel(
            a_ptr, c_ptr, A, M, D, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr, bias_ptr, bias,
            BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, lse_ptr, g_ptr, lse2_ptr, g2_ptr,
            TWO: tl.constexpr, out_ptr, DP: tl.constexpr, BD: tl.constexpr, DO: tl.constexpr, PREC: tl.constexpr,
            BA: tl.constexpr, BM: tl.constexpr):  # fmt: skip
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
    def backward_candidates_kernel(
            a_ptr, c_ptr, A, M, D, ex_ptr, K: tl.constexpr, la_ptr, lc_ptr, LABELS: tl.constexpr, bias_ptr, bias,
            BIAS: tl.constexpr, MAP: tl.constexpr, P, MC: tl.constexpr, lse_ptr, g_ptr, lse2_ptr, g2_ptr,
            TWO: tl.constexpr, out_ptr, DP: tl.constexpr, BD: tl.constexpr, DO: tl.constexpr, PREC: tl.constexpr,
            BA: tl.constexpr, BM: tl.constexpr):  # fmt: skip
        """dC = G^T a for a block of candidates and DO of the D columns, as :func:`backward_anchors_kernel`."""
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
