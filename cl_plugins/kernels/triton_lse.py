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

The kernels themselves are in :mod:`.triton_kernels`; here their launches are two ``torch.library`` operators
(``cl_plugins::triton_lse``, ``cl_plugins::triton_lse_backward``), which ``torch.compile`` takes as one node each (no
graph break; CUDA graphs capture them), called from the autograd functions of the three Triton backends.

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

from . import triton_kernels as kernels
from .autocast import autocast_off
from .contract import Request, TritonMap
from .streaming import BACKEND as STREAMING
from .streaming import refuse_second_derivative
from .triton_jit import available, refuse_unusable, registered_map, triton, usable_on

if TYPE_CHECKING:
    from ..labels import BlockLabels

__all__ = ["TritonConfig", "Triton", "available", "refuse_unusable", "usable_on", "using"]

BLOCK = 32
#: the map of a scalar temperature, already in the anchors (None without Triton)
SCALAR = TritonMap.of(getattr(kernels, "scalar_map", None))


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


@dataclass(frozen=True)
class Launch:
    """A block's kernel arguments besides its rows, as the operators take them: the tensors (its excluded columns
    [A, k], the anchors' and candidates' labels, the biased column [A]; None where absent) and the plain values (the
    bias, the map's key in :func:`~.triton_jit.registered_map` and its parameters and constant, the features'
    dtype)."""

    tensors: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]
    values: tuple[float, str, list[float], int, torch.dtype]

    @classmethod
    def of(cls, request: Request) -> Launch:
        labels = request.labels
        la, lc = (None, None) if labels is None else (labels.anchor, labels.candidate)
        form = SCALAR if request.logit_map is None else request.logit_map.triton
        assert form is not None  # supports() declined maps without one
        params = [float(v) for v in form.params] or [0.0]  # a tuple argument of the kernels is never empty
        tensors = (request.exclude, la, lc, request.bias_cols)
        return cls(tensors, (float(request.bias), form.key, params, int(form.constant), request.choice.features))

    def transposed(self) -> Launch:
        """The launch of the transposed block (the same excluded columns, the labels' sides swapped; no bias)."""
        exclude, la, lc, _ = self.tensors
        return Launch((exclude, lc, la, None), self.values)


class _Spec:
    """Everything the three kernels take besides the rows, in their order, for rows ``a`` against ``c`` and a
    :class:`Launch`'s tensors and values, under ``config``."""

    def __init__(self, a: torch.Tensor, c: torch.Tensor, tensors: tuple, values: tuple, config: TritonConfig) -> None:
        exclude, la, lc, bias_cols = tensors
        bias, key, params, constant, _ = values
        dummy = a.new_zeros(1, dtype=torch.long)
        ex, la_t, lc_t, bias_t = (dummy if t is None else t.long().contiguous() for t in tensors)
        k = 0 if exclude is None else exclude.shape[1]
        self.common = (a.shape[0], c.shape[0], a.shape[1], ex, k, la_t, lc_t, la is not None, bias_t, bias,
                       bias_cols is not None, registered_map(key), tuple(params), constant)  # fmt: skip
        self.config = config
        self.sizes = config.sizes(a.shape[1])

    def grid(self, n: int, block: int, out_columns: bool) -> tuple[int, int]:
        dp, _, do = self.sizes[:3]
        return triton.cdiv(n, block), (triton.cdiv(dp, do) if out_columns else 1)


def supports(request: Request, dtype: torch.dtype) -> bool:
    """Whether the Triton kernels take this request's map (one with a Triton form), extra scales (at most one, dual
    temperature's) and rows of ``dtype`` (float64 keeps its precision on the streaming kernel), on its device."""
    mapped = request.logit_map is None or request.logit_map.triton is not None
    return len(request.ratios) <= 1 and mapped and dtype != torch.float64 and usable_on(request.anchors.device)


def prepare(a: torch.Tensor, c: torch.Tensor, tensors: tuple,
            values: tuple) -> tuple[torch.Tensor, torch.Tensor, _Spec]:  # fmt: skip
    """(the rows the kernels read, everything else they take) for ``a`` against ``c`` with a :class:`Launch`'s
    tensors and values, under the configuration of their width and features' dtype (:func:`config_for`)."""
    config = config_for(a.shape[1], a.device, features_dtype(a, c, values[-1]))
    a_in, c_in = _operands(a, c, config)
    return a_in, c_in, _Spec(a_in, c_in, tensors, values, config)


def streamed_gradients(a: torch.Tensor, c: torch.Tensor, g: torch.Tensor, request: Request,
                       transposed: tuple[BlockLabels | None, torch.Tensor] | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """dL/da, dL/dc of ``sum_i g_i LSE_i`` from the streaming kernel (exact) for ``request``'s block with rows
    ``a`` (pre-scaled) and ``c``, for a backward whose Triton kernels failed; with ``transposed`` = (the
    transpose's labels, g2), plus ``sum_j g2_j LSE'_j`` of ``c`` against ``a`` (the same excluded columns)."""
    with torch.enable_grad():
        a, c = a.detach().float().requires_grad_(), c.detach().float().requires_grad_()
        rows = replace(request, anchors=a, candidates=c, scale=1.0, ratios=(), bond=None)
        total = (STREAMING.run(rows)[0] * g).sum()
        if transposed is not None:
            back = replace(rows, anchors=c, candidates=a, labels=transposed[0], bias_cols=None, bias=0.0)
            total = total + (STREAMING.run(back)[0] * transposed[1]).sum()
        grad_a, grad_c = torch.autograd.grad(total, (a, c))
    return grad_a, grad_c


# The launches as operators (torch.library): torch.compile sees each as one node of known output shapes (their fake
# forms below) and traces the loss around it whole; CUDA graphs capture the launches. The schemas name the plain
# values the kernels take, a map by its key
_LAUNCH = "Tensor? exclude, Tensor? label_a, Tensor? label_c, Tensor? bias_cols, float bias, str map_key, " \
          "float[] params, int constant, ScalarType features"  # fmt: skip


@torch.library.custom_op("cl_plugins::triton_lse", mutates_args=(), schema=f"(Tensor a, Tensor c, {_LAUNCH}, "
                         "float ratio, bool with_ratio, bool stat) -> (Tensor, Tensor, Tensor)")  # fmt: skip
def _lse_op(a: torch.Tensor, c: torch.Tensor, exclude: torch.Tensor | None, label_a: torch.Tensor | None,
            label_c: torch.Tensor | None, bias_cols: torch.Tensor | None, bias: float, map_key: str,
            params: list[float], constant: int, features: torch.dtype, ratio: float, with_ratio: bool,
            stat: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """The forward launch: the LSE [A], the LSE at ``ratio`` times the logits [A] (``with_ratio``; else unset) and
    the map's statistic over the negatives (sum, min, max) [3] (``stat``; else zeros), all float32."""
    a_in, c_in, spec = prepare(a, c, (exclude, label_a, label_c, bias_cols), (bias, map_key, params, constant,
                                                                              features))  # fmt: skip
    n = a_in.shape[0]
    lse, extra, stats = (a_in.new_empty(n, dtype=torch.float32), a_in.new_empty(n, dtype=torch.float32),
                         a_in.new_empty(n, 3, dtype=torch.float32))  # fmt: skip
    kernels.forward_kernel[spec.grid(n, spec.config.block_a, False)](
        a_in, c_in, *spec.common, ratio, with_ratio, lse, extra, stats, stat, *spec.sizes, **spec.config.launch())
    summary = torch.stack([stats[:, 0].sum(), stats[:, 1].amin(), stats[:, 2].amax()]) if stat and n else \
        a.new_zeros(3, dtype=torch.float32)  # fmt: skip
    return lse, extra, summary


@_lse_op.register_fake
def _(a, c, *args):  # type: ignore[no-untyped-def]
    n = a.shape[0]
    return a.new_empty(n, dtype=torch.float32), a.new_empty(n, dtype=torch.float32), a.new_empty(3, dtype=torch.float32)


@torch.library.custom_op("cl_plugins::triton_lse_backward", mutates_args=(), schema=f"(Tensor a, Tensor c, "
                         f"{_LAUNCH}, Tensor lse, Tensor g, Tensor? lse2, Tensor? g2, bool candidates) "
                         "-> (Tensor, Tensor)")  # fmt: skip
def _lse_backward_op(a: torch.Tensor, c: torch.Tensor, exclude: torch.Tensor | None, label_a: torch.Tensor | None,
                     label_c: torch.Tensor | None, bias_cols: torch.Tensor | None, bias: float, map_key: str,
                     params: list[float], constant: int, features: torch.dtype, lse: torch.Tensor, g: torch.Tensor,
                     lse2: torch.Tensor | None, g2: torch.Tensor | None,
                     candidates: bool) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The backward launches: dL/da [A, D] and dL/dc [M, D] (float32) of ``sum_i g_i LSE_i``, plus, where ``lse2``
    and ``g2`` are given, ``sum_j g2_j LSE'_j`` of the transposed block (a block that is its transpose's: the
    kernels' ``TWO``); ``candidates=False``: the anchors' kernel alone, and in place of dL/dc the rows of dL/da
    dotted with the candidates' rows as the kernels read them [A] (a block against itself: its scale's gradient)."""
    a_in, c_in, spec = prepare(a, c, (exclude, label_a, label_c, bias_cols), (bias, map_key, params, constant,
                                                                              features))  # fmt: skip
    config, two = spec.config, lse2 is not None
    columns = (lse2, g2) if two else (lse, g)
    grad_a = torch.empty(a_in.shape, dtype=torch.float32, device=a_in.device)
    kernels.backward_anchors_kernel[spec.grid(a_in.shape[0], config.block_a, True)](
        a_in, c_in, *spec.common, lse, g, *columns, two, grad_a, *spec.sizes, **config.launch())  # fmt: skip
    if not candidates:
        return grad_a, (grad_a * c_in.float()).sum(dim=1)
    grad_c = torch.empty(c_in.shape, dtype=torch.float32, device=c_in.device)
    kernels.backward_candidates_kernel[spec.grid(c_in.shape[0], config.block_m, True)](
        a_in, c_in, *spec.common, lse, g, *columns, two, grad_c, *spec.sizes, **config.launch())  # fmt: skip
    return grad_a, grad_c


@_lse_backward_op.register_fake
def _(a, c, *args):  # type: ignore[no-untyped-def]
    grad_a = a.new_empty(a.shape, dtype=torch.float32)
    return grad_a, (c.new_empty(c.shape, dtype=torch.float32) if args[-1] else a.new_empty(a.shape[0],
                                                                                          dtype=torch.float32))


def forward_lse(a: torch.Tensor, c: torch.Tensor, launch: Launch, ratio: float | None = None,
                stat: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """The forward operator (:func:`_lse_op`) for rows ``a`` (pre-scaled) against ``c`` under ``launch``."""
    return torch.ops.cl_plugins.triton_lse(a, c, *launch.tensors, *launch.values, 1.0 if ratio is None else ratio,
                                           ratio is not None, stat)  # fmt: skip


def backward_launch(a: torch.Tensor, c: torch.Tensor, launch: Launch, rows: tuple[torch.Tensor, torch.Tensor],
                    columns: tuple[torch.Tensor, torch.Tensor] | None = None,
                    candidates: bool = True) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The backward operator (:func:`_lse_backward_op`) given the rows' (LSE, upstream gradient) and, for a block
    that is also its transpose's, the columns'."""
    lse2, g2 = (None, None) if columns is None else columns
    return torch.ops.cl_plugins.triton_lse_backward(a, c, *launch.tensors, *launch.values, *rows, lse2, g2,
                                                    candidates)  # fmt: skip


class _TritonNegativeLSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, request):  # type: ignore[override]
        launch = Launch.of(request)
        with autocast_off(a.device.type), torch.no_grad():
            ratio = float(request.ratios[0]) if request.ratios else None
            lse, extra, stats = forward_lse(a, c, launch, ratio, request.reports)
        ctx.save_for_backward(a, c, lse, *launch.tensors)
        ctx.values, ctx.request = launch.values, request
        outs = [lse.to(a.dtype)] + ([extra.to(a.dtype)] if request.ratios else [])
        outs += [stats] if request.reports else []  # for Request.reported, outside this function
        ctx.mark_non_differentiable(*outs[1:])
        return tuple(outs)

    @staticmethod
    def backward(ctx, grad, *unused):  # type: ignore[override]
        refuse_second_derivative("Triton")
        a, c, lse, *tensors = ctx.saved_tensors
        g = grad.float().contiguous()
        try:
            grad_a, grad_c = backward_launch(a, c, Launch(tuple(tensors), ctx.values), (lse, g))
        except Exception as error:  # noqa: BLE001 - a backward kernel that cannot compile here: streamed, exact
            ctx.request.health.fail(Triton.name, error)
            grad_a, grad_c = streamed_gradients(a, c, g, ctx.request)
        return grad_a.to(a.dtype), grad_c.to(c.dtype), None


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
