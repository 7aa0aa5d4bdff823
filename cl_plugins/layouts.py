"""Pair layouts: who is an anchor, which candidate is its positive, which are negatives.

A layout turns two views ``z1``, ``z2`` [N, D] into one or two :class:`PairBlock` s. A block
holds local anchors, the (possibly globally gathered) candidates, the column of each anchor's
positive and the columns that are *not* negatives (the positive itself, the anchor's own
row). Every other column is a negative.

========== ========================= ======================= ===============================
layout     anchors                   positive                negatives per anchor
========== ========================= ======================= ===============================
simclr     2N (both views)           same index, other view  2N-2 (both views, self removed)
grace      alias of ``simclr`` (GRACE's inter-view + intra-view negatives are exactly these)
cross_view N rows of z1              row i of z2             N-1 rows of z2 (+ hard negatives)
queue      N rows of z1 (queries)    row i of z2 (key)       the K rows of ``queue``
========== ========================= ======================= ===============================

``symmetric=True`` adds the reverse direction (z2 anchors) for ``cross_view`` and ``queue``;
the loss then averages both directions. Under ``torch.distributed`` the candidates of
``simclr`` and ``cross_view`` are gathered from all ranks with gradient, so negatives are
global and the positive column is offset by this rank's position.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from .deferred import DeferredChecks
from .distributed import check_agreement, gather_with_grad, is_distributed
from .kernels.autocast import autocast_off
from .kernels.contract import Bond, KernelChoice
from .kernels.lazy import LazyLogits
from .labels import BlockLabels, Labels
from .validation import check_embeddings, check_feature_dim, check_integer_labels, check_same, passing_rows


class NoNegatives(ValueError):
    """No anchor of the batch has a negative (a batch of one; every label the same under a label policy,
    :mod:`cl_plugins.labels`). The standard forms' loss is then defined: each anchor's log-sum-exp runs over its
    positive alone and equals the positive's logit, so every term is 0 with zero gradient; the decoupled forms'
    denominator is empty. :class:`cl_plugins.ContrastiveLoss` returns that 0, or raises this with ``strict=True``
    and for the decoupled forms."""


LAYOUTS = ("simclr", "grace", "cross_view", "queue")
#: :func:`unit_views` checks and normalises two views of at most this many entries each in one pass over their
#: stacked rows, 25 operations fewer a call; larger views one by one, as the stacked copy is kept for backward. On
#: the CPU at D 128 one pass was 5-9 % faster at N 64 (8,192 entries a view), 1-4 % at 256, level from 1,024
#: (benchmarks/views_pass.py, docs/benchmarks.md)
JOIN_VIEWS_MAX = 1 << 16


@dataclass
class PairBlock:
    """Anchors against candidates, with one positive column per anchor.

    Shapes:
        anchors: [A, D]; candidates: [M, D]; pos_cols: [A]; exclude_cols: [A, k];
        positives: [A, D] or None (then column 0 is the row-wise cosine with them and the
        candidates start at column 1); hard_cols: [A] or None (column of each anchor's own
        hard negative, which receives ``hard_negative_weight`` as a logit bias); labels: the anchors' [A] and
        candidates' [M] labels with the loss's label policy, or None (:class:`~cl_plugins.labels.BlockLabels`).
    """

    anchors: torch.Tensor
    candidates: torch.Tensor
    pos_cols: torch.Tensor
    exclude_cols: torch.Tensor
    positives: torch.Tensor | None = None
    hard_cols: torch.Tensor | None = None
    candidates_are_anchors: bool = False
    #: every row is already of unit norm (the loss normalised its inputs before building the block)
    normalized: bool = False
    labels: BlockLabels | None = None
    #: the bond with this block's transpose where the layout made both (:class:`~.kernels.contract.Bond`)
    bond: Bond | None = None

    @property
    def anchor_rows(self) -> torch.Tensor:
        """The anchors' indices 0 .. A-1, built once per size and device."""
        n, device = self.anchors.shape[0], self.anchors.device
        return _built_once(("rows", n, device), lambda: torch.arange(n, device=device))

    def label_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(anchor rows, candidate indices) [Q] of every candidate of its anchor's label other than the anchor's
        own positive and itself (its excluded columns): the other positives when labels make positives, by row.
        From the sorted candidate labels, never an [A, M] mask. Q depends on the labels: it is read from the device
        once (the one host read of a call with labels as positives; CLIP's two directions share their list)."""
        assert self.labels is not None
        if self.bond is None or not self.labels.mirrored:
            return self._listed_label_pairs()
        # CLIP's two directions list the same pairs, where they exclude the same columns
        excluded, pairs = self.bond.shared("label_pairs", lambda: (self.exclude_cols, self._listed_label_pairs()))
        return pairs if excluded is self.exclude_cols else self._listed_label_pairs()

    def _listed_label_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.labels is not None
        anchor, cand = self.labels.anchor.long(), self.labels.candidate.long()
        order = torch.argsort(cand, stable=True)
        ordered = cand[order]
        start = torch.searchsorted(ordered, anchor)
        counts = torch.searchsorted(ordered, anchor, right=True) - start
        offset = 0 if self.positives is None else 1  # a queue's separate positive column comes first
        excluded = self.exclude_cols - offset
        inside = (excluded >= 0) & (excluded < cand.shape[0])
        shared = inside & (cand[excluded.clamp(0, cand.shape[0] - 1)] == anchor[:, None])
        total = counts.sum()
        listed, kept_pairs = torch.stack([total, total - shared.sum()]).tolist()
        torch._check(0 <= kept_pairs)  # what torch.compile with capture_scalar_outputs must know of the two
        torch._check(kept_pairs <= listed)
        rows = torch.repeat_interleave(_arange(anchor.shape[0], anchor), counts, output_size=listed)
        first = torch.repeat_interleave(start - (torch.cumsum(counts, 0) - counts), counts, output_size=listed)
        cols = order[first + _arange(listed, anchor)]
        kept = torch.ones_like(rows, dtype=torch.bool)
        for column in self.exclude_cols.unbind(dim=1):  # one [Q] comparison at a time: no [Q, k] temporary
            kept &= cols + offset != column[rows]
        keep = torch.argsort((~kept).to(torch.uint8), stable=True)[:kept_pairs]  # the kept, in their order
        return rows[keep], cols[keep]

    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.normalized else unit_rows(x)

    def lazy(self, kernel: KernelChoice | None = None) -> LazyLogits:
        """The cosine matrix as :class:`~cl_plugins.extension.LazyLogits` for ``kernel`` (default: the one-buffer
        kernel), as :func:`cl_plugins.kernels.dispatch.choose` picked it."""
        with autocast_off(self.anchors.device.type):
            a = self._unit(self.anchors)
            c = a if self.candidates_are_anchors else self._unit(self.candidates)
            p = None if self.positives is None else self._unit(self.positives)
        return LazyLogits(a, c, p, kernel=kernel or KernelChoice("fused"), labels=self.labels, bond=self.bond,
                          mirrored=self.candidates_are_anchors)  # fmt: skip

    @property
    def size(self) -> int:
        """Entries of the block's [A, M] logit matrix."""
        return self.anchors.shape[0] * (self.candidates.shape[0] + int(self.positives is not None))

    def cosine(self) -> torch.Tensor:
        """Cosine similarities [A, M] in float32 (float64 for float64 inputs), also under autocast."""
        with autocast_off(self.anchors.device.type):
            a = self._unit(self.anchors)
            c = a if self.candidates_are_anchors else self._unit(self.candidates)
            sim = a @ c.T
            if self.positives is not None:
                sim = torch.cat([(a * self._unit(self.positives)).sum(dim=1, keepdim=True), sim], dim=1)
        return sim


class _UnitRows(torch.autograd.Function):
    """y = x / ||x|| computed as s / ||s|| with s = x / peak; backward (g - y (y . g)) / ||s|| / peak."""

    @staticmethod
    def forward(ctx, x, peak):  # type: ignore[override]
        s = x / peak
        # every row of s has an entry of magnitude 1, so its norm is at least 1; an all-zero row keeps norm 1
        norm = torch.linalg.vector_norm(s, dim=1, keepdim=True).clamp_min_(1.0)
        y = s.div_(norm)
        ctx.save_for_backward(x, y, norm, peak)
        return y

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        x, y, norm, peak = ctx.saved_tensors
        if torch.is_grad_enabled():  # second derivatives: the same formula, recomputed differentiably from x
            s = x / peak
            norm = torch.linalg.vector_norm(s, dim=1, keepdim=True).clamp_min(1.0)
            y = s / norm
            return (g - y * (g * y).sum(dim=1, keepdim=True)) / norm / peak, None
        return (g - y * (g * y).sum(dim=1, keepdim=True)).div_(norm).div_(peak), None


def unit_rows(x: torch.Tensor, name: str | tuple[str, ...] | None = None, allow_zero_rows: bool = False,
              checks: DeferredChecks | None = None) -> torch.Tensor:  # fmt: skip
    """Rows scaled to unit L2 norm, in float32 at least, for rows of any magnitude; with ``name``, also the
    check that every row is finite and (unless ``allow_zero_rows``) non-zero, from the same pass: at once, or
    with ``checks`` deferred (:mod:`cl_plugins.deferred`; the rows it flags become zero, with a zero gradient).
    A tuple ``name`` names views of one shape that ``x`` stacks (:func:`unit_views`).

    ``F.normalize`` divides by ``max(norm, 1e-12)``, so a row of norm below 1e-12 gets a cosine near 0, and a
    float32 row of entries ~1e-30 has a norm that underflows to 0. Dividing each row by its largest
    |entry| first keeps every norm in [1, sqrt(D)]; the result (and its gradient) is the same unit vector.
    """
    x = at_least_float32(x)
    with torch.no_grad():
        peak = x.detach().abs().amax(dim=1, keepdim=True)
        ok = None if name is None else passing_rows(x, peak, name, allow_zero_rows, checks)
        # an all-zero or flagged row divides by 1; a row of subnormal entries by its own peak (a clamp to the
        # smallest normal number would leave it short of unit norm), which the check refuses when the row is named;
        # a row that passes the check without allow_zero_rows has a positive peak
        if ok is None:
            usable = peak > 0
        elif allow_zero_rows:
            usable = ok & (peak > 0)
        else:
            usable = ok
        peak = torch.where(usable, peak, 1.0)
    return _UnitRows.apply(x if ok is None else torch.where(ok, x, 0.0), peak)


def unit_views(z1: torch.Tensor, z2: torch.Tensor, names: tuple[str, str] | None,
               checks: DeferredChecks | None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """:func:`unit_rows` of two views (checked as ``names``, none without): views of one shape, dtype and device of
    at most :data:`JOIN_VIEWS_MAX` entries each in one pass over their stacked rows (one check, one normalisation:
    half their kernels), each view's rows a part of the result."""
    joined = z1.shape == z2.shape and z1.dtype == z2.dtype and z1.device == z2.device
    if joined and 0 < z1.numel() <= JOIN_VIEWS_MAX:
        u1, u2 = unit_rows(torch.cat([z1, z2]), names, checks=checks).chunk(2)
        return u1, u2
    first, second = names or (None, None)
    return unit_rows(z1, first, checks=checks), unit_rows(z2, second, checks=checks)


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """Up-cast half precision to float32; float64 stays float64 (and either is returned as it is: no kernel)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.to(torch.promote_types(x.dtype, torch.float32))


def _arange(n: int, like: torch.Tensor) -> torch.Tensor:
    return torch.arange(n, device=like.device)


def _local(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    return x, 0


Gather = Callable[[torch.Tensor], tuple[torch.Tensor, int]]


def _missing_negatives(anchors: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(some, every) as 0-d bool tensors: an anchor's label covers every candidate, for some or every anchor."""
    first = candidates[0]
    one_label, shared = (candidates == first).all(), anchors == first
    return one_label & shared.any(), one_label & shared.all()


def no_negatives_message(candidates: torch.Tensor) -> str:
    return f"with labels= every anchor and candidate has label {int(candidates[0])}: no anchor has a negative"


def _refuse_some_anchors(candidates: torch.Tensor) -> None:
    raise ValueError(f"with labels= an anchor of label {int(candidates[0])} has no negative: every candidate shares "
                     "its label; use a larger or more varied batch (or queue)")  # fmt: skip


def refuse_anchors_without_negatives(anchors: torch.Tensor, candidates: torch.Tensor) -> None:
    """Raise, the same on every process (both label vectors span the global batch), when an anchor's label
    covers every candidate: no negative would be left to it. :class:`NoNegatives` when that holds for every
    anchor (the loss is then defined: see :class:`NoNegatives`), a plain one-line error when only for some."""
    some, every = torch.stack(_missing_negatives(anchors, candidates)).tolist()  # one host sync
    if every:
        raise NoNegatives(no_negatives_message(candidates))
    if some:
        _refuse_some_anchors(candidates)


def without_negatives_checked(labels: Labels, anchors: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor | None:
    """:func:`refuse_anchors_without_negatives`, deferred where ``labels.checks`` takes the checks (one process's
    batch): "some anchors" becomes a deferred check, "every anchor" the flag returned (None where checked at once),
    also kept in ``labels.without_negatives`` for the loss to turn into its defined 0 or its refusal. The caller
    makes the anchors' labels distinct where the flag is set (:func:`_distinct_where`), so that the values the loss
    discards stay finite."""
    if labels.checks is None:
        refuse_anchors_without_negatives(anchors, candidates)
        return None
    some, every = _missing_negatives(anchors, candidates)
    labels.checks.add(some & ~every, _refuse_some_anchors, candidates)
    labels.without_negatives = (every, candidates)
    return every


def _distinct_where(every: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``y`` (long), or where ``every`` is set a distinct label per row."""
    return torch.where(every, _arange(y.shape[0], y), y.long())


#: index columns a layout builds at every call of a run, kept per (layout, sizes, offset, device): read only
_COLUMNS: dict[tuple[object, ...], Any] = {}
Built = TypeVar("Built")


def _built_once(key: tuple[object, ...], build: Callable[[], Built]) -> Built:
    """``build()``, kept for the next call with ``key`` (outside a compiled region, which holds them as constants
    of its graph); made outside inference mode, since a later call's autograd may save them."""
    if torch.compiler.is_compiling():
        return build()
    found = _COLUMNS.get(key)
    if found is None:
        if len(_COLUMNS) >= 64:  # batch sizes come and go (a last batch, evaluation): keep few
            _COLUMNS.clear()
        with torch.inference_mode(False):
            found = _COLUMNS[key] = build()
    return found


def _simclr_columns(n: int, big_n: int, offset: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """SimCLR's positive columns [2n] and excluded columns [2n, 2] (its positive, itself) for this process's n rows
    at ``offset`` among ``big_n`` per view."""

    def build() -> tuple[torch.Tensor, torch.Tensor]:
        own = offset + torch.arange(n, device=device)
        self_cols = torch.cat([own, own + big_n])
        pos_cols = torch.cat([own + big_n, own])
        return pos_cols, torch.stack([pos_cols, self_cols], dim=1)

    return _built_once(("simclr", n, big_n, offset, device), build)


def _diagonal_columns(n: int, offset: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The positive columns [n] of a cross-view block (row i's positive at ``offset + i``) and, as [n, 1], its
    excluded ones."""

    def build() -> tuple[torch.Tensor, torch.Tensor]:
        pos_cols = offset + torch.arange(n, device=device)
        return pos_cols, pos_cols[:, None]

    return _built_once(("diagonal", n, offset, device), build)


def _simclr(z1: torch.Tensor, z2: torch.Tensor, gather: Gather, labels: Labels | None) -> list[PairBlock]:
    n = z1.shape[0]
    anchors = torch.cat([z1, z2], dim=0)
    z1_all, offset = gather(z1)
    if z1_all is z1:
        candidates, big_n, same = anchors, n, True
    else:
        z2_all, _ = gather(z2)
        candidates, big_n, same = torch.cat([z1_all, z2_all], dim=0), z1_all.shape[0], False
    pos_cols, exclude = _simclr_columns(n, big_n, offset, z1.device)
    block = PairBlock(anchors, candidates, pos_cols, exclude, candidates_are_anchors=same)
    if labels is not None:
        everyone = labels.gathered()
        every = without_negatives_checked(labels, everyone, everyone)
        if every is not None:  # one process: everyone is labels.y
            everyone = _distinct_where(every, everyone)
        anchor_labels = everyone.repeat(2) if same else labels.y.repeat(2)
        block.labels = labels.block(anchor_labels, anchor_labels if same else everyone.repeat(2))
    return [block]


def _cross_view(
    z1: torch.Tensor,
    z2: torch.Tensor,
    symmetric: bool,
    hard_negatives: torch.Tensor | None,
    gather: Gather,
    labels: Labels | None,
) -> list[PairBlock]:
    n = z1.shape[0]
    blocks = []
    everyone = None if labels is None else labels.gathered()
    anchor_labels = None if labels is None else labels.y
    if everyone is not None and hard_negatives is None:  # a hard negative is a negative whatever the labels
        every = without_negatives_checked(labels, everyone, everyone)
        if every is not None:  # one process: everyone is labels.y
            everyone = anchor_labels = _distinct_where(every, everyone)
    directions = [(z1, z2), (z2, z1)] if symmetric else [(z1, z2)]
    for anchors, keys in directions:
        keys_all, offset = gather(keys)
        pos_cols, excluded = _diagonal_columns(n, offset, z1.device)
        hard_cols, cand_labels = None, everyone
        if hard_negatives is not None:
            hard_all, _ = gather(hard_negatives)
            hard_cols = keys_all.shape[0] + pos_cols
            keys_all = torch.cat([keys_all, hard_all], dim=0)
            if everyone is not None:
                cand_labels = torch.cat([everyone.long(), _label_of_none(everyone, hard_all.shape[0])])
        marked = None if labels is None else labels.block(anchor_labels, cand_labels)
        blocks.append(PairBlock(anchors, keys_all, pos_cols, excluded, hard_cols=hard_cols, labels=marked))
    if symmetric and blocks[0].candidates is blocks[1].anchors and blocks[1].candidates is blocks[0].anchors:
        # nothing gathered (one process): the two directions are each other's transpose, positives on the diagonal
        # and the same labels on both sides; the bond lets a kernel serve both from one backward
        blocks[0].bond = blocks[1].bond = Bond()
    return blocks


def _label_of_none(labels: torch.Tensor, n: int) -> torch.Tensor:
    """[n] copies of a label that no row of ``labels`` has (the hard negatives': never excluded, never positive),
    computed on the device."""
    labels = labels.long()
    low = labels.min()
    return torch.where(low > torch.iinfo(torch.long).min, low - 1, labels.max() + 1).expand(n)


def _queue(
    z1: torch.Tensor, z2: torch.Tensor, symmetric: bool, queue: torch.Tensor, labels: Labels | None
) -> list[PairBlock]:
    n = z1.shape[0]
    zeros = torch.zeros(n, dtype=torch.long, device=z1.device)
    directions = [(z1, z2), (z2, z1)] if symmetric else [(z1, z2)]
    # MoCo: the key is a target, the queue a fixed dictionary; neither carries gradient there,
    # but we leave detaching keys to the caller (SimCo-style symmetric use wants gradient).
    marked = None
    if labels is not None:
        anchor_labels = labels.y
        every = without_negatives_checked(labels, labels.gathered(), labels.queue)
        if every is not None:  # one process: labels.gathered() is labels.y
            anchor_labels = torch.where(every, _label_of_none(labels.queue, n), labels.y.long())
        marked = labels.block(anchor_labels, labels.queue)
    return [PairBlock(q, queue.detach(), zeros, zeros[:, None], positives=k, labels=marked) for q, k in directions]


def build_blocks(
    layout: str,
    z1: torch.Tensor,
    z2: torch.Tensor,
    *,
    symmetric: bool = False,
    queue: torch.Tensor | None = None,
    hard_negatives: torch.Tensor | None = None,
    gather: bool = True,
    normalized: bool = False,
    tag: int = 0,
    labels: Labels | None = None,
    rows_checked: bool = False,
) -> list[PairBlock]:
    """Build the pair blocks of ``layout`` for two views ``z1``, ``z2`` [N, D].

    ``gather=False`` keeps candidates local even under ``torch.distributed``; ``normalized=True`` says that
    every input row is of unit norm already (the blocks then skip :func:`unit_rows`). ``tag`` identifies the
    call (strategy, layout) in the gathers, so processes that disagree raise instead of hanging. ``labels`` (with
    the loss's label policy, :mod:`cl_plugins.labels`) travel into the blocks as [A] and [M] vectors, gathered like
    the candidates. The queue's and hard negatives' rows are checked here unless ``normalized`` or ``rows_checked``
    (the loss checked them already).
    """
    if labels is not None:
        _check_labels(layout, labels, z1.shape[0], None if queue is None else queue.shape[0], z1.device)
    blocks = _build(layout, z1, z2, symmetric=symmetric, queue=queue, hard_negatives=hard_negatives, gather=gather,
                    tag=tag, labels=labels, rows_checked=normalized or rows_checked)  # fmt: skip
    for block in blocks:
        block.normalized = normalized
    return blocks


def _check_labels(layout: str, labels: Labels, n: int, queue_rows: int | None, device: torch.device) -> None:
    """One integer label per pair (and per queue row), or one line saying what is wrong."""
    for name, y, rows in (("labels", labels.y, n), ("queue_labels", labels.queue, queue_rows)):
        if y is None:
            if layout == "queue":
                raise ValueError("layout='queue' with labels= needs queue_labels= [K], the labels of the queue's rows")
            continue
        if not isinstance(y, torch.Tensor) or y.dim() != 1 or (rows is not None and y.shape[0] != rows):
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            what = "pair" if y is labels.y else "queue row"
            raise ValueError(f"{name} must be a 1-D tensor with one label per {what}"
                             f"{f' ({rows})' if rows is not None else ''}, got {got}")  # fmt: skip
        check_integer_labels(y, name)
        if y.device != device:
            raise ValueError(f"{name} is on {y.device} but the features are on {device}; move both to one device "
                             f"({name}.to(z1.device))")  # fmt: skip
    if labels.queue is not None and layout != "queue":
        raise ValueError(f"layout={layout!r} does not use queue_labels=; they label a queue (layout='queue')")


def _checked_queue(z1: torch.Tensor, queue: torch.Tensor | None, hard_negatives: torch.Tensor | None,
                   rows_checked: bool = False) -> torch.Tensor:  # fmt: skip
    """``queue=`` as ``layout="queue"`` needs it, or one line saying what is wrong (its rows too, unless
    ``rows_checked``: the loss checked them as it normalised them)."""
    if queue is None:
        raise ValueError(
            "layout='queue' needs queue= [K, D] negatives (e.g. FeatureQueue.get()); "
            "use layout='cross_view' for in-batch negatives"
        )
    if hard_negatives is not None:
        raise ValueError("layout='queue' does not take hard_negatives=")
    check_embeddings(queue, "queue", rows=not rows_checked)
    check_same(z1, queue, ("z1", "queue"))
    check_feature_dim(queue, z1.shape[1], "queue", "z1")
    return queue


def _build(
    layout: str,
    z1: torch.Tensor,
    z2: torch.Tensor,
    *,
    symmetric: bool,
    queue: torch.Tensor | None,
    hard_negatives: torch.Tensor | None,
    gather: bool,
    tag: int = 0,
    labels: Labels | None = None,
    rows_checked: bool = False,
) -> list[PairBlock]:
    n = z1.shape[0]
    # under several processes the global batch decides whether an anchor has a negative: a rank may hold one row
    too_few = n < 2 and not (gather and is_distributed())
    gather_fn: Gather = functools.partial(gather_with_grad, tag=tag) if gather else _local
    if layout in ("simclr", "grace"):
        if symmetric:
            raise ValueError(f"layout={layout!r} already uses both views as anchors; drop symmetric=True")
        if queue is not None or hard_negatives is not None:
            raise ValueError(
                f"layout={layout!r} takes neither queue= nor hard_negatives=; use layout='queue' or layout='cross_view'"
            )
        if too_few:
            raise NoNegatives(
                f"layout={layout!r} needs a batch of at least 2 (got {n}): with one sample an anchor has no negative"
            )
        return _simclr(z1, z2, gather_fn, labels)
    if layout == "cross_view":
        if queue is not None:
            raise ValueError("layout='cross_view' does not use queue=; use layout='queue'")
        if hard_negatives is not None:
            check_embeddings(hard_negatives, "hard_negatives", rows=not rows_checked)
            check_same(z1, hard_negatives, ("z1", "hard_negatives"))
            if hard_negatives.shape != z1.shape:
                raise ValueError(
                    f"hard_negatives must have the shape of z1 {tuple(z1.shape)} (one hard negative "
                    f"per anchor), got {tuple(hard_negatives.shape)}"
                )
            if symmetric:
                raise ValueError("hard_negatives is supported with symmetric=False (SimCSE's direction)")
        elif too_few:
            raise NoNegatives(
                "layout='cross_view' needs a batch of at least 2 (got 1): one anchor has no negative; "
                "pass hard_negatives= or use a larger batch"
            )
        return _cross_view(z1, z2, symmetric, hard_negatives, gather_fn, labels)
    if layout == "queue":
        queue = _checked_queue(z1, queue, hard_negatives, rows_checked)
        if gather:
            check_agreement(z1, tag)
        return _queue(z1, z2, symmetric, queue, labels)
    raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}")
