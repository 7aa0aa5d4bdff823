"""The kernels' executor: :class:`LazyLogits`, a block's logits computed only inside the kernel that
:mod:`cl_plugins.kernels.dispatch` runs for it. Strategy authors reach it through :mod:`cl_plugins.extension`; the
contract it hands the kernels (:class:`~cl_plugins.kernels.contract.Request`) lives in
:mod:`cl_plugins.kernels.contract`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import torch

from . import dispatch
from .contract import UNIT_NORM_SLACK, Bond, KernelChoice, LogitMap, PairNetwork, Request
from .listed_cosines import pair_cosines

if TYPE_CHECKING:
    from ..labels import BlockLabels


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
    kernel: KernelChoice = field(default_factory=lambda: KernelChoice("fused"))
    logit_map: LogitMap | None = None
    bias_cols: torch.Tensor | None = None
    bias: float = 0.0
    #: the block's labels (:class:`~cl_plugins.labels.BlockLabels`): a candidate sharing its anchor's label is no
    #: negative
    labels: BlockLabels | None = None
    #: the bond with the block that is this one's transpose (:class:`~cl_plugins.kernels.contract.Bond`), where
    #: the layout made one: a kernel may then serve both directions from one backward
    bond: Bond | None = field(default=None, compare=False, repr=False)
    #: a per-pair temperature network of the anchors and candidates (:class:`~.contract.PairNetwork`), whose logits
    #: only its own kernel computes
    network: PairNetwork | None = field(default=None, compare=False, repr=False)
    #: the largest |logit| where the strategy declares it (:attr:`~.contract.Request.largest`): a temperature tensor
    #: with a floor (:meth:`divided`), anchors divided by their own bounded temperatures
    largest: float | None = None
    #: anchors against themselves with non-negatives the layout built symmetric (:attr:`~.contract.Request.mirrored`)
    mirrored: bool = False
    #: (the float scale, the temperature tensor) it was divided by (:meth:`divided`): two blocks divided by one
    #: tensor share a scale, which a kernel serving both directions can tell without reading the device
    divided_by: tuple[float, torch.Tensor] | None = field(default=None, compare=False, repr=False)
    # cosines of the positive pairs, shared by every rescaled copy (computed once per block)
    _positive_cache: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @property
    def dtype(self) -> torch.dtype:
        return self.anchors.dtype

    def __truediv__(self, tau: float | torch.Tensor) -> LazyLogits:
        return self._rescaled(tau)

    def divided(self, tau: torch.Tensor, at_least: float) -> LazyLogits:
        """The logits divided by a temperature tensor ``tau`` that is never below ``at_least`` (> 0): the kernels
        then know the largest |logit| without reading ``tau`` (:attr:`~.contract.Request.bound`)."""
        if not isinstance(self.scale, float):
            raise TypeError("divided() takes unscaled logits: divide once, by the whole temperature")
        # a method, not ``self / tau``: torch.compile reads the division of an object by a tensor as a tensor's
        return self._rescaled(tau, abs(self.scale) / at_least * UNIT_NORM_SLACK, (self.scale, tau))

    def _rescaled(self, tau: float | torch.Tensor, largest: float | None = None,
                  divided_by: tuple[float, torch.Tensor] | None = None) -> LazyLogits:  # fmt: skip
        if self.logit_map is not None:
            raise TypeError("mapped logits cannot be rescaled: put the temperature into the logit map")
        return self._with(scale=self.scale / tau, largest=largest, divided_by=divided_by)

    def mapped(self, logit_map: LogitMap) -> LazyLogits:
        """Logits ``logit_map.value(cosine)`` (per-pair strategies)."""
        if not (isinstance(self.scale, float) and self.scale == 1.0):
            raise TypeError("a logit map applies to the cosines themselves, not to rescaled logits")
        return self._with(logit_map=logit_map)

    def with_network(self, network: PairNetwork) -> LazyLogits:
        """Logits with ``network``'s per-pair temperature (AMCL's per-pair forms) instead of a scale or map."""
        return self._with(network=network)

    def with_bias(self, cols: torch.Tensor, value: float) -> LazyLogits:
        """``value`` added to the logit at column ``cols[a]`` of every row a (a hard negative's bias)."""
        return self._with(bias_cols=cols, bias=float(value))

    def _with(self, **changes: object) -> LazyLogits:
        """A copy with ``changes`` (the positives' cache shared), built directly: ``dataclasses.replace`` costs
        microseconds per call eagerly and a guard per field under ``torch.compile``."""
        return LazyLogits(**{name: changes.get(name, getattr(self, name)) for name in _FIELDS})  # type: ignore[arg-type]

    def scaled_anchors(self) -> torch.Tensor:
        if isinstance(self.scale, float) and self.scale == 1.0:
            return self.anchors
        return self.anchors * self.scale

    def positive(self, cols: torch.Tensor) -> torch.Tensor:
        """Logits of the positive pairs [A]."""
        cos = self._positive_cache.get("cos")
        if cos is None:
            cos = self._positive_cosines(cols)
            if torch.is_grad_enabled():  # a no-grad result must not stand in for the graph later
                self._positive_cache["cos"] = cos
        return self._logits_of(cos)

    def _positive_cosines(self, cols: torch.Tensor) -> torch.Tensor:
        if self.positives is not None:
            return (self.anchors * self.positives).sum(dim=1)
        if self.bond is None:
            return (self.anchors * self.candidates.index_select(0, cols)).sum(dim=1)

        def diagonal() -> torch.Tensor:  # a bonded block's positives: the same cosines in both directions
            return (self.anchors * self.candidates).sum(dim=1)

        # computed once for both, where autograd records it (a no-grad result must not stand in for the graph later)
        return self.bond.shared("positive cosines", diagonal) if torch.is_grad_enabled() else diagonal()

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
        """LSE over negatives [A] at this scale, then (no grad) at ``scale * r`` for each r, from the kernel that
        :func:`cl_plugins.kernels.dispatch.run` picks for the block."""
        # with separate positives (queue) every candidate is a negative
        exclude = None if self.positives is not None else exclude_cols
        return dispatch.run(Request(self.anchors, self.candidates, exclude, self.scale, tuple(ratios), self.logit_map,
                                    self.bias_cols, self.bias, self.labels, self.bond, self.kernel,
                                    self.network, self.largest, self.mirrored, self.divided_by))  # fmt: skip


#: the fields of :class:`LazyLogits`, in their order
_FIELDS = tuple(f.name for f in fields(LazyLogits))


def divide(sim: torch.Tensor | LazyLogits, tau: torch.Tensor, at_least: float) -> torch.Tensor | LazyLogits:
    """``sim / tau`` for a temperature tensor never below ``at_least``: dense logits as they are, lazy ones with
    the bound their kernels read (:meth:`LazyLogits.divided`) instead of a read of ``tau``."""
    if isinstance(sim, LazyLogits):
        return sim.divided(tau, at_least)
    return sim / tau.to(sim.dtype)
