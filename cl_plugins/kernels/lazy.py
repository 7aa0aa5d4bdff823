"""The kernels' contract: :class:`LogitMap` (a per-pair strategy's logit as a function of the cosine) and
:class:`LazyLogits` (a block's logits, computed only inside the kernel that :mod:`cl_plugins.kernels.dispatch`
chose). Strategy authors reach both through :mod:`cl_plugins.extension`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from .compiled import maybe_compiled, resolve
from .dispatch import KernelChoice
from .fused import NegativeLSE
from .pairs import pair_cosines
from .streaming import streaming_negative_lse
from .symmetric import symmetric_negative_lse, symmetric_plan
from .tiles import exp_of_closed_form, exp_of_terms
from .triton_lse import TritonMap, triton_negative_lse
from .triton_pair import triton_self_negative_lse

if TYPE_CHECKING:
    from ..labels import BlockLabels
    from .triton_pair import Mirror

Pair = tuple[torch.Tensor, torch.Tensor]
Terms = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]


@dataclass(frozen=True)
class LogitMap:
    """An elementwise logit ``phi(x)`` of the cosine ``x``, with its derivative: the forms the kernels take, which a
    strategy makes from its map stated once (:meth:`of_terms`).

    ``with_derivative(x) -> (phi(x), phi'(x))``; without it the kernels differentiate ``value`` with autograd
    inside each tile (exact, slower) and the one-buffer kernel of :mod:`cl_plugins.kernels.fused` does not apply.
    ``with_stat(x) -> (phi(x), stat(x))`` (optional): a per-pair quantity whose sum, min and max over the
    negatives are passed to ``on_stats(sum, min, max)`` after the forward pass. ``full(x) -> (phi(x), phi'(x),
    stat(x))`` computes all three at once where they share work (default: ``with_derivative`` and ``with_stat``).
    ``exp_form(x, grad) -> (exp(phi(x)), exp(phi(x)) phi'(x) or None)`` (optional): the exponential (and, with
    ``grad``, the softmax numerator's derivative factor) in closed form, for a map bounded enough that the
    kernels may sum ``exp(phi)`` without a running maximum (temperature-free: with r = 1 / (1 - s),
    ``exp(2 atanh s) = 2 r - 1`` and ``exp(phi) phi' = 2 r^2``: one reciprocal per pair, no transcendental
    function). ``exp_form`` needs ``bound``.
    """

    value: Callable[[torch.Tensor], torch.Tensor]
    with_derivative: Callable[[torch.Tensor], Pair] | None = None
    with_stat: Callable[[torch.Tensor], Pair] | None = None
    on_stats: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None
    full: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None
    exp_form: Callable[[torch.Tensor, bool], tuple[torch.Tensor, torch.Tensor | None]] | None = None
    #: the largest |phi(x)| over x in [-1, 1] (None: unknown); small enough, the kernels sum exp(phi) without a
    #: running maximum (:func:`cl_plugins.kernels.streaming.sums_fit`)
    bound: float | None = None
    #: ``(form, args)``: the whole-tile form of :mod:`cl_plugins.kernels.tiles`, ``form(x, *args, grad) ->
    #: (exp(phi), exp(phi) phi' or None, stat or None)``; set when the map is compiled, and then the streaming kernels
    #: compile each whole tile
    tile_form: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
    #: the map's form for ``kernel="triton"``, a jitted function from the strategy's own file
    #: (:class:`~cl_plugins.kernels.triton_lse.TritonMap`; None: that kernel streams this map instead)
    triton: TritonMap | None = None

    @classmethod
    def of_terms(cls, terms: Callable[..., Terms], params: tuple[Any, ...] = (), *, derivative: bool = True,
                 statistic: bool = False, on_stats: Callable[..., None] | None = None, bound: float | None = None,
                 closed: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] | None = None,
                 compile_maps: bool | None = None, triton: TritonMap | None = None) -> LogitMap:  # fmt: skip
        """A map stated once: ``terms(x, *params, derivative, statistic) -> (phi(x), phi'(x) or None, stat(x) or
        None)``, a module-level torch function of the cosines that computes phi' and the statistic only where the two
        flags ask for them (differentiable by autograd in ``phi`` where it is called on the positives; compiled once,
        not per tile, with ``compile_maps``); every form the kernels take comes from it.

        Args:
            terms: the map; its derivative is used where ``derivative`` (default: True; else autograd per tile),
                its statistic where ``statistic`` (default: False), reported to ``on_stats`` (default: None)
            params: ``terms``' parameters after the cosines (default: ``()``)
            bound: the largest |phi| over the cosines (default: None, unknown)
            closed: ``closed(x, *params, grad) -> (exp(phi), exp(phi) phi' or None)``, the exponential in closed
                form where it is cheaper than ``exp(phi)`` (default: None)
            compile_maps: compile the terms and whole tiles (a loss's ``compile_maps``; default: None, the
                process's setting, :mod:`cl_plugins.kernels.compiled`)
            triton: the map's form for ``kernel="triton"`` (default: None)
        """
        run = maybe_compiled(terms, compile_maps)
        run_closed = None if closed is None else maybe_compiled(closed, compile_maps)

        def full(s: torch.Tensor) -> Terms:
            return run(s, *params, True, statistic)

        def with_derivative(s: torch.Tensor) -> Pair:
            phi, slope, _ = run(s, *params, True, False)
            return phi, slope  # type: ignore[return-value]

        def with_stat(s: torch.Tensor) -> Pair:
            phi, _, stat = run(s, *params, False, True)
            return phi, stat  # type: ignore[return-value]

        def exp_form(s: torch.Tensor, grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
            return run_closed(s, *params, grad)  # type: ignore[misc]

        tiles = None
        if resolve(compile_maps) and derivative:
            form = (exp_of_terms, (terms, *params, statistic))
            tiles = form if closed is None else (exp_of_closed_form, (closed, *params))
        # the positives' logits, through autograd: eager, as the map is written
        return cls(lambda s: terms(s, *params, False, False)[0], with_derivative if derivative else None,
                   with_stat if statistic else None, on_stats, full if derivative else None,  # type: ignore[arg-type]
                   None if closed is None else exp_form, bound, tiles, triton)  # fmt: skip

    def evaluate(self, x: torch.Tensor, want: str | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(phi(x), the ``want``-ed companion: ``"stat"``, ``"derivative"`` or None)."""
        if want == "stat" and self.with_stat is not None:
            return self.with_stat(x)
        if want == "derivative" and self.with_derivative is not None:
            return self.with_derivative(x)
        return self.value(x), None

    def evaluate_all(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(phi(x), phi'(x), stat(x) or None): what the one-buffer kernel needs (``with_derivative`` required)."""
        if self.full is not None:
            return self.full(x)
        assert self.with_derivative is not None
        value, derivative = self.with_derivative(x)
        return value, derivative, None if self.with_stat is None else self.with_stat(x)[1]


@dataclass(frozen=True)
class LazyLogits:
    """``scale * (anchors @ candidates.T)`` (or ``logit_map`` of the cosines), plus a separate positive column
    for queues, plus ``bias`` on one column per row; computed only inside the loss kernels.

    ``kernel`` is the block's :class:`~cl_plugins.kernels.dispatch.KernelChoice`: the one-buffer kernel
    (:mod:`cl_plugins.kernels.fused`), the tiles of :mod:`cl_plugins.kernels.streaming` (also for a logit map without
    an explicit derivative, which the one-buffer kernel cannot apply), or Triton's (streaming where they decline).

    Shapes:
        anchors: [A, D] and candidates: [M, D], both L2-normalised; positives: [A, D] or None;
        bias_cols: [A] or None.
    """

    anchors: torch.Tensor
    candidates: torch.Tensor
    positives: torch.Tensor | None = None
    scale: float | torch.Tensor = 1.0
    kernel: KernelChoice = KernelChoice("fused")
    logit_map: LogitMap | None = None
    bias_cols: torch.Tensor | None = None
    bias: float = 0.0
    #: the block's labels (:class:`~cl_plugins.labels.BlockLabels`): a candidate sharing its anchor's label is no
    #: negative
    labels: BlockLabels | None = None
    #: the bond with the block that is this one's transpose (:class:`~cl_plugins.kernels.triton_pair.Mirror`), where
    #: the layout made one: on the Triton kernels both directions' gradients then come from one backward
    mirror: Mirror | None = field(default=None, compare=False, repr=False)
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
        return self._logits_of(cos)

    def pair_logits(self, rows: torch.Tensor, cand: torch.Tensor) -> torch.Tensor:
        """Logits of the listed (anchor ``rows``, candidate ``cand``) pairs [P] (``cand`` indexes the candidates,
        not the columns: a queue's separate positive column is not among them); a block has one such list, whose
        cosines are computed once."""
        cos = self._positive_cache.get("pairs")
        if cos is None:
            cos = pair_cosines(self.anchors, self.candidates, rows, cand)
            if torch.is_grad_enabled():
                self._positive_cache["pairs"] = cos
        return self._logits_of(cos)

    def _logits_of(self, cos: torch.Tensor) -> torch.Tensor:
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
        kernel = self.kernel.name
        if kernel == "triton":  # None where it declines this map or dtype, or after a failed launch: streamed
            # first as a block that is its own or its bonded block's transpose, else one direction
            out = None if ratios else self._triton_symmetric(exclude)
            if out is None:
                out = triton_negative_lse(self.scaled_anchors(), self.candidates, exclude, ratios=tuple(ratios),
                                          logit_map=self.logit_map, bias_cols=self.bias_cols, bias=self.bias,
                                          labels=self.labels)  # fmt: skip
            if out is not None:
                return out
        options = {"ratios": tuple(ratios), "logit_map": self.logit_map, "labels": self.labels, "bound": self.bound()}
        if kernel == "stream" or self.kernel.symmetric or not fusable:  # by halves where that applies
            own = self.positives is None and self.anchors is self.candidates and self.bias_cols is None
            plan = symmetric_plan(self.candidates, exclude, **options) if own else None
            if plan is not None:
                return symmetric_negative_lse(self.candidates, self.scale, plan)
        if kernel in ("stream", "triton") or not fusable:
            anchors = self.scaled_anchors()
            return streaming_negative_lse(anchors, self.candidates, exclude, bias_cols=self.bias_cols, bias=self.bias,
                                          **options)  # fmt: skip
        return list(NegativeLSE.apply(self.scaled_anchors(), self.candidates, exclude, tuple(ratios), self.logit_map,
                                      self.bias_cols, self.bias, self.labels, options["bound"]))  # fmt: skip

    def _triton_symmetric(self, exclude: torch.Tensor | None) -> list[torch.Tensor] | None:
        """The Triton kernels' LSE of a block whose transpose is itself (SimCLR's) or its bonded partner (CLIP's
        other direction): fewer products (:mod:`~cl_plugins.kernels.triton_pair`); None where that does not apply."""
        if self.bias_cols is not None or self.positives is not None:
            return None
        if self.anchors is self.candidates:
            own = triton_self_negative_lse(self.candidates, self.scale, exclude, logit_map=self.logit_map,
                                           labels=self.labels)  # fmt: skip
            return None if own is None else [own]
        return None if self.mirror is None else self.mirror.negative_lse(self, exclude)

    def bound(self) -> float | None:
        """The largest |logit| before a bias: the map's (of unit cosines), else |scale| times the largest anchor and
        candidate norms (1 for unit rows; AMCL's anchors come divided by their own temperatures)."""
        if self.logit_map is not None:
            return self.logit_map.bound
        with torch.no_grad():
            norms = [x.detach().norm(dim=1).amax() for x in (self.anchors, self.candidates) if x.shape[0]]
            if len(norms) < 2:  # an empty side: nothing to sum, the kernels' own checks speak
                return None
            scale = self.scale.detach().abs().max() if isinstance(self.scale, torch.Tensor) else abs(self.scale)
            return float(scale * torch.stack(norms).prod())
