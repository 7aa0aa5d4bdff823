"""The kernels' contract, which imports no backend: a per-pair map (:class:`LogitMap`, its Triton form
:class:`TritonMap`), the one request every backend serves (:class:`Request`), the choice a loss made for a block
(:class:`KernelChoice`), a loss's record of backends that failed on it (:class:`KernelHealth`), the bond of two
blocks that are each other's transpose (:class:`Bond`) and what a backend is (:class:`Backend`).

Every backend module (:mod:`.fused`, :mod:`.streaming`, :mod:`.halves`, :mod:`.triton_lse`,
:mod:`.triton_bonded`) imports this one and exports a :class:`Backend`; :mod:`.dispatch` orders them for a request and
runs the first that accepts it; :class:`~cl_plugins.kernels.lazy.LazyLogits` builds the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import torch

from .compiled import maybe_compiled, resolve
from .health import KernelHealth
from .statement import LogitStatement, statement_closed, statement_terms
from .tiles import exp_of_closed_form, exp_of_terms
from .triton_jit import map_key

if TYPE_CHECKING:
    from ..labels import BlockLabels

__all__ = ["Backend", "Bond", "KernelChoice", "KernelHealth", "LogitMap", "PairNetwork", "Request", "Terms",
           "TritonMap"]

Pair = tuple[torch.Tensor, torch.Tensor]
Terms = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]


@dataclass(frozen=True)
class TritonMap:
    """A per-pair map's form for ``kernel="triton"``: ``function`` (a ``triton.jit`` function from
    :func:`cl_plugins.extension.triton_map`, in the strategy's file) called per tile as ``function(x, params,
    constant)``.

    Args:
        function: the jitted map, returning (logit, d logit / dx, statistic) of the cosines (the statistic is summed,
            minimised and maximised over the negatives only where the :class:`LogitMap` has ``on_stats``)
        params: the map's runtime parameters, floats (default: ``()``)
        constant: a compile-time value the function may branch on, e.g. a profile's number (default: 0)
    """

    function: Any
    params: tuple[float, ...] = ()
    constant: int = 0

    @property
    def key(self) -> str:
        """The key the kernels' operators take the function by (:func:`~.triton_jit.map_key`)."""
        return map_key(self.function)

    @classmethod
    def of(cls, function: Any, params: tuple[float, ...] = (), constant: int = 0) -> TritonMap | None:
        """The form, or None where ``function`` is (Triton absent: ``triton_map`` gave None)."""
        return None if function is None else cls(function, params, constant)


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
    #: the map's form for ``kernel="triton"``, a jitted function from the strategy's own file (None: that kernel
    #: streams this map instead)
    triton: TritonMap | None = None
    #: the statement every form above came from (:meth:`of_statement`), where one did
    statement: LogitStatement | None = field(default=None, compare=False)

    @classmethod
    def of_terms(cls, terms: Callable[..., Terms], params: tuple[Any, ...] = (), *, derivative: bool = True,
                 statistic: bool = False, on_stats: Callable[..., None] | None = None, bound: float | None = None,
                 closed: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] | None = None,
                 compile_maps: bool | None = None, triton: TritonMap | None = None,
                 health: KernelHealth | None = None) -> LogitMap:  # fmt: skip
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
            health: the loss's :class:`KernelHealth` (a failed compilation turns compiling off for that loss only;
                default: None, a record of this map's own)
        """
        health = KernelHealth() if health is None else health
        compile_maps = resolve(compile_maps) and health.usable("compiled map")
        run = maybe_compiled(terms, compile_maps, health)
        run_closed = None if closed is None else maybe_compiled(closed, compile_maps, health)

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
        if compile_maps and derivative:
            form = (exp_of_terms, (terms, *params, statistic))
            tiles = form if closed is None else (exp_of_closed_form, (closed, *params))
        # the positives' logits, through autograd: eager, as the map is written
        return cls(lambda s: terms(s, *params, False, False)[0], with_derivative if derivative else None,
                   with_stat if statistic else None, on_stats, full if derivative else None,  # type: ignore[arg-type]
                   None if closed is None else exp_form, bound, tiles, triton)  # fmt: skip

    @classmethod
    def of_statement(cls, statement: LogitStatement, params: tuple[float, ...] = (), constant: int = 0, *,
                     derivative: bool = True, statistic: bool = False, closed: bool = False,
                     on_stats: Callable[..., None] | None = None, bound: float | None = None,
                     compile_maps: bool | None = None, health: KernelHealth | None = None) -> LogitMap:  # fmt: skip
        """Every form of a map stated once (:func:`cl_plugins.kernels.statement.logit_statement`): its torch form
        through :meth:`of_terms`, its Triton form as given.

        Args:
            statement: the map, ``(x, params, constant[, closed]) -> (phi, phi', statistic)``
            params: its runtime parameters, floats (default: ``()``)
            constant: the int it may branch on (default: 0)
            derivative: the kernels take the derivative the statement returns (default: True); False: autograd
                through the whole statement (its ``stop_gradient`` passing the gradient), and no Triton form
            statistic: the statement's statistic is reported to ``on_stats`` (default: False)
            closed: the statement gives the exponential in closed form with ``closed=True`` (default: False)
            on_stats, bound, compile_maps, health: as :meth:`of_terms`
        """
        form = statement.torch if derivative else statement.through
        triton = TritonMap.of(statement.triton, params, constant) if derivative else None
        made = cls.of_terms(statement_terms, (form, params, constant), derivative=derivative, statistic=statistic,
                            on_stats=on_stats, bound=bound, closed=statement_closed if closed else None,
                            compile_maps=compile_maps, triton=triton, health=health)  # fmt: skip
        return replace(made, statement=statement)

    @property
    def reports(self) -> bool:
        """The kernels return this map's statistic over the negatives, (sum, min, max), for ``on_stats``."""
        return self.with_stat is not None and self.on_stats is not None

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


@dataclass(eq=False)
class Bond:
    """Two blocks of one loss call that are each other's transpose (CLIP's two directions in one process), as the
    layout made them; ``slot`` is the backends' to use (a kernel that serves both directions at once leaves the
    second's result there until it asks)."""

    slot: dict[str, Any] = field(default_factory=dict)

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()`` once for both blocks (what the two directions have in common: their positives' cosines, a
        temperature adapted to them), kept under ``key``; a plain dict, which ``torch.compile`` traces."""
        if key not in self.slot:
            self.slot[key] = make()
        return self.slot[key]


@dataclass(frozen=True)
class PairNetwork:
    """A per-pair temperature from a network of both rows (AMCL's per-pair forms): ``tau_ij = floor + span *
    sigmoid(w . relu(pa_i + pb_j) + w0)`` and the logit ``s_ij / tau_ij - beta ((proj_dim / 2) log tau_ij + 1 /
    tau_ij)``; under labels, a candidate of its anchor's label is no term except the column ``kept[i]`` of row i
    (None: none kept). ``on_stats(sum, min, max)`` of the terms' tau; ``chunk_elements``: hidden values at once.

    Shapes:
        pa: [A, H]; pb: [M, H]; w: [H]; w0: []; kept: [A] or None.
    """

    pa: torch.Tensor
    pb: torch.Tensor
    w: torch.Tensor
    w0: torch.Tensor
    floor: float
    span: float
    beta: float
    proj_dim: int
    chunk_elements: int
    kept: torch.Tensor | None = None
    on_stats: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None


@dataclass(frozen=True)
class KernelChoice:
    """What a loss chose for a block (:func:`cl_plugins.kernels.dispatch.choose`): ``name`` is ``"dense"``
    (autograd on the [A, M] matrix), ``"fused"`` (one buffer), ``"stream"`` (tiles) or ``"triton"``; ``halves``:
    a fused block of anchors against themselves streams by halves where that applies; ``features``: the dtype of
    the features the unit rows came from (a half one takes half products on Triton); ``health``: the loss's record
    of failed backends."""

    name: str
    halves: bool = False
    features: torch.dtype = torch.float32
    health: KernelHealth = field(default_factory=lambda: KernelHealth(), compare=False, repr=False)


#: on the CPU, eagerly, a block's bound is read from the values where its scale is a tensor or its rows are not unit
#: (the host is the device: the read waits for nothing, and a learned temperature keeps the kernels' bounded plans,
#: the halves kernel among them: 1.5-1.8 times faster at N 2,048-4,096 than the running maximum a static bound of
#: 1 / min_tau = 100 gives). On a GPU and under ``torch.compile``, never (tests/test_host_syncs.py turns it off to
#: count the GPU's path on the CPU)
BOUND_FROM_VALUES_ON_CPU = True


def _host_is_device(anchors: torch.Tensor, scale: float | torch.Tensor, largest: float | None) -> bool:
    """A bound may be read from the values: CPU tensors, eager, and something the host does not know already (a
    tensor scale, or rows that are not unit: a declared ``largest``)."""
    known = isinstance(scale, float) and largest is None
    return BOUND_FROM_VALUES_ON_CPU and anchors.device.type == "cpu" and not torch.compiler.is_compiling() and not known


#: how far above 1 a unit row's norm may be after rounding (float32 normalisation: a few ulps), in :attr:`Request.bound`
UNIT_NORM_SLACK = 1 + 1e-5


@dataclass(frozen=True)
class Request:
    """One block's negatives' log-sum-exp, as every backend takes it: per anchor i, ``LSE_{j in neg(i)} l_ij`` with
    ``l_ij = phi(scale * a_i . c_j)`` (``phi`` the identity without a map) plus ``bias`` at column ``bias_cols[i]``,
    then (no grad) the LSE of ``r * l`` for each of ``ratios``.

    Shapes:
        anchors: [A, D], candidates: [M, D] (unit rows; ``candidates is anchors`` for a block against itself);
        exclude: [A, k] columns that are no negatives, or None; bias_cols: [A] or None; labels: the block's
        (:class:`~cl_plugins.labels.BlockLabels`) or None.
    """

    anchors: torch.Tensor
    candidates: torch.Tensor
    exclude: torch.Tensor | None = None
    scale: float | torch.Tensor = 1.0
    ratios: tuple[float, ...] = ()
    logit_map: LogitMap | None = None
    bias_cols: torch.Tensor | None = None
    bias: float = 0.0
    labels: BlockLabels | None = None
    bond: Bond | None = None
    choice: KernelChoice = field(default_factory=lambda: KernelChoice("fused"))
    #: the logits' per-pair temperature network, where they have one (then ``scale`` is 1 and there is no map)
    network: PairNetwork | None = None
    #: the largest |logit| before a bias, as the strategy declares it where neither a float scale nor a map says
    #: (a temperature tensor with a floor, anchors divided by their own temperatures); None: only those say
    largest: float | None = None
    #: a block of anchors against themselves whose non-negatives its layout built symmetric (SimCLR's, one process)
    mirrored: bool = False
    #: (float scale, temperature tensor) where ``scale`` is the one divided by the other (:meth:`LazyLogits.divided`)
    divided_by: tuple[float, torch.Tensor] | None = None

    @property
    def health(self) -> KernelHealth:
        return self.choice.health

    @property
    def fusable(self) -> bool:
        """The map (if any) has an explicit derivative: the one-buffer kernel applies."""
        return self.logit_map is None or self.logit_map.with_derivative is not None

    @property
    def own(self) -> bool:
        """A block of anchors against themselves with nothing besides (SimCLR's, one process)."""
        return self.anchors is self.candidates and self.bias_cols is None

    @property
    def reports(self) -> bool:
        """Its kernel's outputs end with the map's statistic, (sum, min, max) [3] (:meth:`reported`)."""
        return self.logit_map is not None and self.logit_map.reports

    def reported(self, outs: torch.Tensor | tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
        """A kernel's outputs ``[LSE, *LSE at each ratio, (statistic [3])]`` without the statistic, which goes to
        the map's ``on_stats`` here: outside the kernel's autograd function, where a side effect would stop
        ``torch.compile`` from tracing it."""
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        if self.reports:
            self.logit_map.on_stats(*outs.pop().unbind(0))  # type: ignore[union-attr]
        return outs

    def transposed_by(self, other: Request) -> bool:
        """``other``'s block is this one's transposed at the same scale (the scales one float, one tensor, or one
        float divided by one temperature tensor: comparing two tensors' values would wait for the device)."""
        if not (other.anchors is self.candidates and other.candidates is self.anchors):
            return False
        a, b = self.scale, other.scale
        if a is b or (not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) and a == b):
            return True
        x, y = self.divided_by, other.divided_by
        return x is not None and y is not None and x[1] is y[1] and x[0] == y[0]

    def scaled_anchors(self) -> torch.Tensor:
        if isinstance(self.scale, float) and self.scale == 1.0:
            return self.anchors
        return self.anchors * self.scale

    def scale_tensor(self) -> torch.Tensor:
        """``scale`` as a 0-d tensor of the rows' dtype, for a kernel that takes a learned one's gradient: a float made
        on the device (a copy from the host would wait)."""
        if isinstance(self.scale, torch.Tensor):
            return self.scale
        return torch.full((), float(self.scale), dtype=self.candidates.dtype, device=self.candidates.device)

    def candidates_beside(self, anchors: torch.Tensor) -> torch.Tensor:
        """The candidates as a kernel's autograd function takes them beside ``anchors``: a view where both are one
        tensor (a block against itself at scale 1), since ``torch.compile`` traces no function given a tensor
        twice."""
        c = self.candidates
        return c.view_as(c) if c is anchors else c

    @property
    def bound(self) -> float | None:
        """The largest |logit| before a bias: the map's (of unit cosines); else, where the host is the device (CPU
        tensors, eager: :data:`BOUND_FROM_VALUES_ON_CPU`), |scale| times the largest anchor and candidate norms,
        read from the values; else from what the host knows without reading the device: the strategy's declared
        ``largest``, or |scale| for a float scale of unit rows; None (the kernels then keep a running maximum) for a
        tensor scale without a declared bound."""
        if self.logit_map is not None:
            return self.logit_map.bound
        if _host_is_device(self.anchors, self.scale, self.largest):
            return self._bound_from_values()
        if self.largest is not None:
            return self.largest
        return abs(self.scale) * UNIT_NORM_SLACK if isinstance(self.scale, float) else None

    def _bound_from_values(self) -> float | None:
        """Read once per request: a backend that declines it and the next share it (kept by hand: a
        ``functools.cached_property`` takes a lock, which ``torch.compile`` cannot trace even where unused)."""
        if "_read_bound" not in self.__dict__:
            self.__dict__["_read_bound"] = self._read_bound()
        return self.__dict__["_read_bound"]

    def _read_bound(self) -> float | None:
        with torch.no_grad():
            norms = [x.detach().norm(dim=1).amax() for x in (self.anchors, self.candidates) if x.shape[0]]
            if len(norms) < 2:  # an empty side: nothing to sum, the kernels' own checks speak
                return None
            scale = self.scale.detach().abs().max() if isinstance(self.scale, torch.Tensor) else abs(self.scale)
            return float(scale * torch.stack(norms).prod())


class Backend(Protocol):
    """A kernel: ``name`` (what a failure warning and :class:`KernelHealth` call it), ``may_fail`` (its compile or
    launch may fail here, and the next backend then takes the request), ``accepts(request)`` and ``run(request) ->
    [LSE, *LSE at each ratio]`` (forward and backward: the tensors carry autograd), or None where it declines the
    request only once it has looked at the data (the next backend then takes it)."""

    name: str
    may_fail: bool

    def accepts(self, request: Request) -> bool: ...

    def run(self, request: Request) -> list[torch.Tensor] | None: ...
