"""The base class every temperature strategy derives from.

A strategy only says how a cosine similarity becomes a logit (:meth:`ContrastiveLoss.logits`)
and, optionally, how the per-pair loss is formed from the logits
(:meth:`ContrastiveLoss.pair_loss`). Layouts, distributed gathering, masking, validation,
reductions and diagnostics live here, once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from .deferred import DeferredChecks
from .distributed import ProcessesDisagree, all_reduce_sum, is_distributed, refuse_on_every_rank, world_size
from .extension import LazyLogits, LogitMap, Pairs, softplus
from .kernels.autocast import autocast_off
from .kernels.contract import KernelChoice, KernelHealth
from .kernels.dispatch import KERNELS, choose
from .labels import Labels, refuse_replaced
from .labels import label_policy as label_policy_of
from .layouts import (
    LAYOUTS,
    NoNegatives,
    PairBlock,
    at_least_float32,
    build_blocks,
    no_negatives_message,
    unit_rows,
    unit_views,
)
from .validation import (
    ArgumentTypeError,
    check_choice,
    check_flag,
    check_pair,
    check_range,
    check_similarity,
    check_state_fits,
    looks_like_embeddings,
)

Reduction = Literal["mean", "sum", "none"]
REDUCTIONS = ("mean", "sum", "none")


class ContrastiveLoss(nn.Module):
    """InfoNCE-style loss over cosine similarities with a pluggable temperature strategy.

    Args:
        layout: pair layout of ``forward`` (see :mod:`cl_plugins.layouts`): ``"simclr"``
            (default), ``"grace"``, ``"cross_view"`` or ``"queue"``.
        symmetric: for ``cross_view`` / ``queue``, also use view 2 as anchors and average
            both directions.
        decoupled: remove the positive from the denominator (DCL / GraphCL).
        reduction: ``"mean"`` over anchors, ``"sum"`` or ``"none"`` (per-anchor losses).
        hard_negative_weight: logit bias added to each anchor's own hard negative
            (SimCSE's ``hard_negative_weight``; only with ``hard_negatives=``).
        gather_distributed: under ``torch.distributed``, gather candidates from all ranks with
            gradient so negatives (and batch statistics) are global. Default True.
        check_inputs: validate inputs (finite, non-zero rows, shapes). Costs one pass over
            the embeddings; disable only in tight loops you trust.
        kernel: how the [A, M] logits are computed (same values and gradients every way):
            ``"dense"`` (autograd on the matrix; the only one that can be differentiated twice),
            ``"fused"`` (one [A, M] buffer, :mod:`cl_plugins.kernels.fused`; a per-pair map without an explicit
            derivative streams), ``"stream"`` (tiles recomputed in backward, no [A, M] buffer:
            :mod:`cl_plugins.kernels.streaming`), ``"triton"`` (flash-style kernels that never write a tile of
            logits, :mod:`cl_plugins.kernels.triton_lse`: CUDA tensors, Triton installed), or ``"auto"`` (default:
            the measured choice of :func:`cl_plugins.kernels.dispatch.auto`: on the CPU ``"fused"``, streaming from
            2^28 entries, a SimCLR block in one process by halves from 2^24 (:mod:`cl_plugins.kernels.halves`);
            on a GPU ``"dense"`` below 2^26 entries, from there ``"triton"`` for rows of at most 128 features and
            ``"stream"`` for wider ones). Every strategy runs on all of them.
        strict: refuse a batch in which no anchor has a negative (a batch of one, every label the same) instead
            of returning its defined loss, 0 with zero gradients (``stats["rows_without_negative"]`` counts such
            rows); the decoupled forms and FlatNCE refuse it always (default: False).
        label_policy: what the ``labels=`` of each call do (:mod:`cl_plugins.labels`): ``"exclude"`` (a candidate
            sharing its anchor's label is no negative), or supervised contrastive learning, every candidate of the
            anchor's label a positive too, in Khosla et al.'s L_out (``"positives_out"``) or L_in
            (``"positives_in"``), or pytorch-metric-learning's per-pair form (``"positives_pair"``); labels are
            gathered with the candidates and each kernel tile derives its mask from the two label vectors.
            None: the loss takes no labels (default: None).
        compile_maps: run a per-pair strategy's map (DySTreSS, temperature-free) compiled into one loop with
            ``torch.compile`` (:mod:`cl_plugins.kernels.compiled`: the same values; the first call compiles, for
            seconds to a minute); where the sums need no maximum the kernels compile each whole tile or row chunk
            (map, masks, exp, sums, statistics; :mod:`cl_plugins.kernels.tiles`). None: as ``$CL_PLUGINS_COMPILE``
            says (default: None, i.e. eager).

    Distributed semantics (``forward`` with ``gather_distributed=True``): the returned value is
    the loss of the global batch on every rank, and its gradient is scaled so that DDP's
    gradient averaging yields exactly the single-process gradient of that global loss.
    """

    name: ClassVar[str] = ""
    #: the strategy only divides the cosine matrix by a scalar: the fused path applies
    scalar_temperature: ClassVar[bool] = False
    #: strategies whose loss is defined with the positive outside the denominator
    default_decoupled: ClassVar[bool] = False

    # ------------------------------------------------------------------ host facts (each strategy declares them)
    #: ``decoupled=True`` applies to this strategy (an InfoNCE-shaped loss); False where the strategy
    #: defines its own denominator (MACL, DCL, FlatNCE, dual temperature)
    decouplable: ClassVar[bool] = True
    #: the constructor argument that takes the width of the embeddings it receives (AMCL's ``dim``)
    feature_dim_arg: ClassVar[str | None] = None
    #: the strategy brings its own projection heads (AMCL): a host hands it backbone features, not the output of
    #: its own projection head (see :func:`cl_plugins.owns_projection_head`)
    replaces_projection_head: ClassVar[bool] = False
    #: the papers' settings per modality (``"vision"``, ``"simcse"``), for ``build_host_loss(preset=...)``
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    #: the pair layouts the strategy supports
    layouts: ClassVar[tuple[str, ...]] = LAYOUTS
    #: the loss of an anchor without negatives is defined (0: the log-sum-exp over its positive alone is the
    #: positive's logit); False where the denominator holds no positive (FlatNCE; every decoupled form)
    defined_without_negatives: ClassVar[bool] = True

    @classmethod
    def host_temperature(cls, tau: float) -> dict[str, Any]:
        """The parameters that stand in for a host codebase's one fixed temperature ``tau``.

        Every strategy declares it (an empty dict when it has no temperature a host could set);
        :func:`cl_plugins.build_host_loss` applies it.
        """
        raise NotImplementedError(
            f"{cls.__name__} does not declare host_temperature(tau): say how a host's fixed τ maps onto its parameters"
        )

    def __init__(
        self,
        *,
        layout: str = "simclr",
        symmetric: bool = False,
        decoupled: bool | None = None,
        reduction: Reduction = "mean",
        hard_negative_weight: float = 0.0,
        gather_distributed: bool = True,
        check_inputs: bool = True,
        kernel: str = "auto",
        label_policy: str | None = None,
        compile_maps: bool | None = None,
        strict: bool = False,
        **replaced: Any,
    ) -> None:
        super().__init__()
        refuse_replaced(replaced)
        if replaced:
            raise ArgumentTypeError(f"{type(self).__name__} got unexpected argument(s) {sorted(replaced)}")
        self.layout = check_choice("layout", layout, LAYOUTS)
        if self.layout not in self.layouts:
            supported = ", ".join(repr(x) for x in self.layouts)
            raise ValueError(f"{self.name} supports layout={supported} (not {self.layout!r})")
        self.symmetric = check_flag("symmetric", symmetric)
        self.decoupled = self.default_decoupled if decoupled is None else check_flag("decoupled", decoupled)
        self.reduction = check_choice("reduction", reduction, REDUCTIONS)
        if not isinstance(hard_negative_weight, (int, float)):
            raise ArgumentTypeError(f"hard_negative_weight must be a number, got {type(hard_negative_weight).__name__}")
        self.hard_negative_weight = check_range("hard_negative_weight", hard_negative_weight, -1e4, 1e4)
        if self.hard_negative_weight != 0.0 and self.layout != "cross_view":
            raise ValueError(
                f"hard_negative_weight is the bias of SimCSE's hard negatives (layout='cross_view' with "
                f"hard_negatives=); layout={self.layout!r} has none, so it would do nothing: drop it"
            )
        self.gather_distributed = check_flag("gather_distributed", gather_distributed)
        self.check_inputs = check_flag("check_inputs", check_inputs)
        self.kernel = check_choice("kernel", kernel, KERNELS)
        self.label_policy = label_policy_of(label_policy)
        self.compile_maps = check_flag("compile_maps", compile_maps, optional=True)
        self.strict = check_flag("strict", strict)
        self._stats: dict[str, list[torch.Tensor | float]] = {}
        # built here, not on first use: torch.compile traces a loss's first call and builds no objects in it
        self._kernel_health, self._deferred_checks = KernelHealth(), DeferredChecks()

    # ------------------------------------------------------------------ strategy hooks
    def logits(self, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        """Map raw cosine similarities [A, M] (float32) to logits [A, M]."""
        raise NotImplementedError

    def logit_map(self, pairs: Pairs) -> LogitMap | None:
        """Per-pair strategies: their logits as an elementwise map of the cosine, for the fused and streaming
        kernels (None: the strategy has a scalar temperature, or only the dense path)."""
        return None

    def pair_loss(self, logits: torch.Tensor, sim: torch.Tensor, pairs: Pairs) -> torch.Tensor:
        """Loss of every positive pair [P]; the default is InfoNCE or its decoupled form."""
        d = pairs.d(logits)
        self.record_d(d)
        return d if self.decoupled else softplus(d)

    def after_optimizer_step(self) -> None:
        """Per-step upkeep, once per optimizer step (not per micro-batch): a no-op by default.

        Strategies with state override it (``learnable`` clamps its temperature,
        ``cosine_schedule`` advances its step counter). Call it for every loss inside a model
        with :func:`cl_plugins.after_optimizer_step`.
        """

    def set_epoch_length(self, steps_per_epoch: int) -> None:
        """The trainer's optimizer steps per epoch, for schedules that count epochs: a no-op by default.

        ``cosine_schedule`` with ``period_unit="epoch"`` needs it. Set it for every loss inside a model
        with :func:`cl_plugins.set_epoch_length`.
        """

    # ------------------------------------------------------------------ public API
    def forward(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        *,
        queue: torch.Tensor | None = None,
        hard_negatives: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        queue_labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Loss of two views.

        Shapes:
            z1, z2: [N, D] (row i of z2 is the positive of row i of z1; L2-normalised here);
            labels: [N] integer label of pair i, queue_labels: [K] of the queue's rows (a loss built with a
            ``label_policy``);
            queue: [K, D] negatives for ``layout="queue"``;
            hard_negatives: [N, D] one hard negative per anchor for ``layout="cross_view"``.
            Returns a scalar, or [A] per-anchor losses with ``reduction="none"``.
        """
        self.deferred_checks.raise_ready()  # the last call's, from flags the device has copied to the host by now
        self._fresh("_call_memo")
        views = {"queue": queue, "hard_negatives": hard_negatives, "labels": labels, "queue_labels": queue_labels}
        try:
            prepared = self.prepare_blocks(z1, z2, **views)
        except NoNegatives as exc:
            # the rows were checked before the layout found no negative: their error comes first
            # every rank sees the same global batch
            return self.deferred_checks.settle(self.without_negatives(exc, z1, z2, hard_negatives))
        except ProcessesDisagree:
            raise  # every rank raises this one together
        except (ValueError, TypeError):
            if self.gather_distributed and is_distributed():
                refuse_on_every_rank()  # the other ranks wait in the first gather: they stop with this one
            raise
        self._fresh("_stats")
        per_anchor = self._where_labels_leave_no_negatives(self.blocks_loss(prepared, z1, z2), z1)
        return self.deferred_checks.settle(self._reduce(per_anchor, global_batch=True))

    def prepare_blocks(self, z1: torch.Tensor, z2: torch.Tensor, *, queue: torch.Tensor | None,
                       hard_negatives: torch.Tensor | None, labels: torch.Tensor | None,
                       queue_labels: torch.Tensor | None) -> list[Any]:  # fmt: skip
        """The checked views' blocks in the loss's layout (:meth:`forward`'s arguments; a strategy with heads of its
        own projects the views first, one list of blocks per head)."""
        if self.check_inputs:
            check_pair(z1, z2, rows=False)  # the rows are checked in the pass that normalises them
        checks = self.input_checks
        with autocast_off(z1.device.type):
            u1, u2 = unit_views(z1, z2, ("z1", "z2") if self.check_inputs else None, checks)
            # a queue's and hard negatives' rows are checked even with check_inputs=False, as the layout always has
            queue, hard_negatives = (
                _unit_if_tensor(queue, "queue", checks),
                _unit_if_tensor(hard_negatives, "hard_negatives", checks),
            )
        # the layout's own argument checks run before its first gather
        return self.blocks(u1, u2, queue=queue, hard_negatives=hard_negatives, normalized=True, labels=labels,
                           queue_labels=queue_labels)  # fmt: skip

    def blocks_loss(self, prepared: list[Any], z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        """Per-anchor losses [A] of :meth:`prepare_blocks`' blocks for the views ``z1``, ``z2``."""
        features = z1.dtype if z1.dtype == z2.dtype else torch.float32  # half features take half products on Triton
        losses = [self.block_loss(b, features) for b in prepared]
        return losses[0] if len(losses) == 1 else torch.cat(losses)

    def from_similarity(
        self, sim: torch.Tensor, pos_mask: torch.Tensor, neg_mask: torch.Tensor | None = None, *, average: str = "row"
    ) -> torch.Tensor:
        """Loss from a precomputed similarity matrix: the modality-agnostic seam.

        Each positive pair (a, p) has its own loss, with that positive and the row's negatives in its
        denominator (the other positives are not negatives). ``average="row"`` (default) averages a row's
        pair losses, then the rows: every anchor weighs the same. ``average="pair"`` averages over all positive
        pairs, as pytorch-metric-learning's ``NTXentLoss`` (its ``MeanReducer`` over pairs): a row with more
        positives weighs more. The two agree when every row has the same number of positives. Entries in
        neither mask are ignored (e.g. self-similarities).

        Shapes:
            sim: [A, M] raw cosine similarities in [-1, 1] (not divided by a temperature);
            pos_mask: [A, M] bool; neg_mask: [A, M] bool, default ``~pos_mask``.
            Returns a scalar, or with ``reduction="none"`` [A] (``average="row"``) or [P] per positive pair in
            row-major order (``average="pair"``).

        The reduction is over the rows given; distributed gathering is the caller's business,
        but batch statistics (MACL's alignment) are still all-reduced when distributed.
        """
        if self.check_inputs:
            neg = check_similarity(sim, pos_mask, neg_mask)
        else:
            neg = ~pos_mask if neg_mask is None else neg_mask
        check_choice("average", average, ("row", "pair"))
        self._fresh("_stats", "_call_memo")
        keep = neg.any(dim=1)
        if not bool(keep.all()):
            return self._some_rows_without_negatives(sim, pos_mask, neg, keep, average)
        pairs = Pairs.from_masks(pos_mask, neg, average)
        per_anchor = self.pairs_loss(at_least_float32(sim), pairs)
        return self._reduce(per_anchor, global_batch=False)

    def _some_rows_without_negatives(
        self, sim: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, keep: torch.Tensor, average: str
    ) -> torch.Tensor:
        """:meth:`from_similarity` where some rows have no negative: each of them (or each of its pairs) is 0 with
        zero gradient, the others are the loss of the rows that have negatives (batch statistics over those)."""
        rows = (~keep).nonzero().flatten()[:5].tolist()
        refused = self._refused_without_negatives()
        if refused:
            raise ValueError(f"rows {rows} have no negative; {refused}: every anchor needs at least one negative "
                             "(add negatives to neg_mask, or drop those rows)")  # fmt: skip
        per_item = keep if average == "row" else keep.repeat_interleave(pos.sum(dim=1))  # rows, or pairs row-major
        sim = at_least_float32(sim)
        full = sim.new_zeros(per_item.shape[0]) + 0.0 * sim.sum()
        if bool(keep.any()):
            kept = self.pairs_loss(sim[keep], Pairs.from_masks(pos[keep], neg[keep], average))
            full = full.masked_scatter(per_item, kept)
        self.record(rows_without_negative=float((~keep).sum()))
        return self._reduce(full, global_batch=False)

    def _refused_without_negatives(self) -> str:
        """Why an anchor without negatives is refused here ("" where its loss is defined: 0)."""
        if self.strict:
            return "refused under strict=True"
        if self.decoupled or not self.defined_without_negatives:
            form = f"{self.name}{' (decoupled)' if self.decoupled else ''}"
            return f"{form} has no positive in its denominator, which is then empty: its loss is undefined"
        return ""

    def _where_labels_leave_no_negatives(self, per_anchor: torch.Tensor, z1: torch.Tensor) -> torch.Tensor:
        """:meth:`without_negatives` decided on the device, where the labels' checks are deferred and every anchor's
        label covers every candidate (the layout made the labels distinct then, so the discarded values are
        finite): 0 per anchor with zero gradients, or the refusal as a deferred check."""
        flagged = self._call_memo.get("labels_without_negatives")
        if flagged is None:
            return per_anchor
        every, candidates = flagged
        refused = self._refused_without_negatives()
        if refused:
            self.deferred_checks.add(every, _refuse_without_negatives, candidates, refused)
            return per_anchor
        rows = self._anchor_rows(z1)
        self.record(**{_BATCH_WITHOUT_NEGATIVES: lambda: every.to(torch.float32) * rows})
        return torch.where(every, torch.zeros_like(per_anchor), per_anchor)

    def _anchor_rows(self, z1: torch.Tensor) -> int:
        """The anchors of a call with views of ``z1``'s rows."""
        return z1.shape[0] * (2 if self.layout in ("simclr", "grace") or self.symmetric else 1)

    def without_negatives(self, exc: NoNegatives, z1: torch.Tensor, *tied: torch.Tensor | None) -> torch.Tensor:
        """The loss of a batch in which no anchor has a negative: 0 per anchor, with zero gradients for the inputs
        and the strategy's parameters (so that every parameter has one, as DDP expects); ``stats`` count the rows
        (``rows_without_negative``). A one-line ``ValueError`` carrying ``exc``'s message instead with ``strict=True``
        and where the loss is undefined there (:attr:`defined_without_negatives`, the decoupled forms)."""
        refused = self._refused_without_negatives()
        if refused:
            raise ValueError(f"{exc}; {refused}: use a batch of at least 2 with two labels") from None
        rows = self._anchor_rows(z1)
        dtype = torch.promote_types(z1.dtype, torch.float32)  # the loss's dtype on these inputs
        tie = sum((0.0 * t.sum().to(dtype) for t in (z1, *tied, *self.parameters()) if t is not None
                   and t.requires_grad), torch.zeros((), device=z1.device, dtype=dtype))  # fmt: skip
        self._fresh("_stats")
        self.record(rows_without_negative=float(rows))
        return self._reduce(torch.zeros(rows, device=z1.device, dtype=dtype) + tie, global_batch=False)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """``nn.Module.load_state_dict``, with a state of another strategy (or another configuration: AMCL's heads)
        refused in one line that says what differs, before anything is loaded."""
        if strict:
            check_state_fits(self, state_dict, f"a {self.name} loss's as built", "the strategy and arguments")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @property
    def stats(self) -> dict[str, float]:
        """Diagnostics of the last call (temperature, alignment, W = 1 - P_pos, loss, ...); first the error of a
        failed input check of the last call, if any (:mod:`cl_plugins.deferred`)."""
        self.deferred_checks.raise_ready()
        out: dict[str, float] = {}
        for key, values in self._stats.items():
            nums = [float(v() if callable(v) else v) for v in values]
            if key.endswith("_min"):
                out[key] = min(nums)
            elif key.endswith("_max"):
                out[key] = max(nums)
            else:
                out[key] = sum(nums) / len(nums)
        batch = out.pop(_BATCH_WITHOUT_NEGATIVES, 0.0)
        if batch:  # a batch the loss set aside: its loss (0) alone, the other numbers are of no batch
            out = {"rows_without_negative": batch, **({"loss": out["loss"]} if "loss" in out else {})}
        return out

    # ------------------------------------------------------------------ building blocks
    def blocks(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        *,
        queue: torch.Tensor | None = None,
        hard_negatives: torch.Tensor | None = None,
        normalized: bool = False,
        labels: torch.Tensor | None = None,
        queue_labels: torch.Tensor | None = None,
        rows_checked: bool = False,
    ) -> list[PairBlock]:
        """The blocks of the loss's layout (:func:`~cl_plugins.layouts.build_blocks`); ``rows_checked``: the queue's
        and hard negatives' rows were checked already (a strategy that projects them checks them before)."""
        if hard_negatives is None and self.hard_negative_weight != 0.0 and self.layout == "cross_view":
            raise ValueError("hard_negative_weight is set but no hard_negatives= were passed")
        if (labels is None) == self.uses_labels or (queue_labels is not None and labels is None):
            policy = None if self.label_policy is None else self.label_policy.name
            raise ValueError("labels= go with a label_policy (build the loss with one) and every call of such a loss "
                             f"passes labels=; got label_policy={policy!r} and labels={_shape(labels)}")  # fmt: skip
        policy, gather = self.label_policy, self.gather_distributed
        tag = 0
        if gather and is_distributed():  # the processes must agree on the call, or each would wait for another
            tag = call_tag(f"{self.name}|{self.layout}|{self.symmetric}|{queue is None}|{hard_negatives is None}|"
                           f"{labels is None}")  # fmt: skip
        marked = None if labels is None else Labels(labels, queue_labels, policy, gather, tag, self.input_checks)
        blocks = build_blocks(
            self.layout,
            z1,
            z2,
            symmetric=self.symmetric,
            queue=queue,
            hard_negatives=hard_negatives,
            gather=self.gather_distributed,
            normalized=normalized,
            tag=tag,
            labels=marked,
            rows_checked=rows_checked,
        )
        if marked is not None and marked.without_negatives is not None:
            self.once_per_call("labels_without_negatives", lambda: marked.without_negatives)
        return blocks

    @property
    def uses_labels(self) -> bool:
        """Every call passes ``labels=`` (the loss has a ``label_policy``)."""
        return self.label_policy is not None

    def _fresh(self, *names: str) -> None:
        """Empty dicts as ``names`` (this call's memo, :meth:`once_per_call`; its statistics), set past
        ``nn.Module.__setattr__``, whose checks of the module's parameters, buffers and submodules cost microseconds
        a call and guards under ``torch.compile``."""
        for name in names:
            self.__dict__[name] = {}

    def once_per_call(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per call of the loss and shared by its blocks (one temperature tensor for
        both of CLIP's directions lets one kernel serve the two without comparing values on the device)."""
        memo = self.__dict__.setdefault("_call_memo", {})
        if key not in memo:
            memo[key] = make()
        return memo[key]

    @property
    def deferred_checks(self) -> DeferredChecks:
        """This loss's input checks whose outcome the device computes (:mod:`cl_plugins.deferred`)."""
        checks = self.__dict__.get("_deferred_checks")
        if checks is None:  # also for a loss unpickled from before the checks were deferred
            checks = self.__dict__["_deferred_checks"] = DeferredChecks()
        return checks

    @property
    def input_checks(self) -> DeferredChecks | None:
        """Where this call's row checks go: the deferred checks; None (at once) where the processes gather, whose
        first exchange reads the host anyway and must stop every process together on a refused input."""
        return None if self.gather_distributed and is_distributed() else self.deferred_checks

    @property
    def kernel_health(self) -> KernelHealth:
        """This loss's record of kernels that failed on it (off for it alone; :mod:`cl_plugins.kernels.dispatch`)."""
        health = self.__dict__.get("_kernel_health")
        if health is None:  # also for a loss unpickled from before the record existed
            health = self.__dict__["_kernel_health"] = KernelHealth()
        return health

    def block_kernel(self, block: PairBlock, features: torch.dtype = torch.float32) -> KernelChoice:
        """The kernel ``block`` runs on (:func:`cl_plugins.kernels.dispatch.choose`; see ``kernel``), whose unit
        rows came from features of ``features``."""
        per_pair = type(self).logit_map is not ContrastiveLoss.logit_map
        return choose(self.kernel, block.anchors, block.size, lazy=self.scalar_temperature or per_pair,
                      features=features, health=self.kernel_health)  # fmt: skip

    def block_loss(self, block: PairBlock, features: torch.dtype = torch.float32) -> torch.Tensor:
        """Per-anchor losses [A] of one block whose unit rows came from features of ``features``."""
        kernel = self.block_kernel(block, features)
        sim = block.cosine() if kernel.name == "dense" else block.lazy(kernel)
        return self.pairs_loss(sim, Pairs.from_block(block))

    def pairs_loss(self, sim: torch.Tensor | LazyLogits, pairs: Pairs) -> torch.Tensor:
        positive = pairs.positive(sim).detach()
        self.record(alignment=lambda: positive.mean())
        logits = self.logits(sim, pairs)
        if pairs.hard_cols is not None and self.hard_negative_weight != 0.0:
            if isinstance(logits, LazyLogits):
                logits = logits.with_bias(pairs.hard_cols, self.hard_negative_weight)
            else:
                bias = logits.new_full(pairs.hard_cols.shape, self.hard_negative_weight)
                rows = pairs.rows[: pairs.n_rows]  # one per anchor (its own pairs come first)
                logits = logits.index_put((rows, pairs.hard_cols), bias, accumulate=True)
        return pairs.per_anchor(self.pair_loss(logits, sim, pairs))

    def _reduce(self, per_anchor: torch.Tensor, *, global_batch: bool) -> torch.Tensor:
        if self.reduction == "none":
            values = per_anchor.detach()
            self.record(loss=lambda: values.mean())
            return per_anchor
        if global_batch and self.gather_distributed and is_distributed():
            out = self._global_reduce(per_anchor)
        else:
            out = per_anchor.mean() if self.reduction == "mean" else per_anchor.sum()
        self.record(loss=out.detach())
        return out

    def _global_reduce(self, per_anchor: torch.Tensor) -> torch.Tensor:
        """The reduction over every process's anchors, with the gradient of this process's share."""
        total = per_anchor.sum()
        count = torch.full((), float(per_anchor.numel()), dtype=per_anchor.dtype, device=per_anchor.device)
        summed = all_reduce_sum(torch.stack([total.detach(), count]))
        scale = float(world_size())
        if self.reduction == "mean":
            grad_path = total * scale / summed[1]
            value = summed[0] / summed[1]
        else:
            grad_path, value = total * scale, summed[0]
        return grad_path + (value - grad_path).detach()

    # ------------------------------------------------------------------ diagnostics
    def record(self, **values: torch.Tensor | float | Callable[[], torch.Tensor | float]) -> None:
        """Add diagnostics of this call; keys ending in _min/_max reduce by min/max. A value may be a function
        of no arguments (over detached tensors), evaluated only when :attr:`stats` is read: diagnostics then cost
        no kernels in training loops that never read them."""
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.detach()
            self._stats.setdefault(key, []).append(value)

    def __getstate__(self) -> dict[str, Any]:
        # the lazy diagnostics are closures (not picklable): pickling evaluates them, so a model can be saved or
        # sent to another process at any point of training and keeps its last statistics
        state = self.__dict__.copy()
        state.pop("_call_memo", None)  # the last call's shared tensors (their graph is gone with the call)
        state["_stats"] = {k: [float(v() if callable(v) else v) for v in vs] for k, vs in self._stats.items()}
        return state

    def record_d(self, d: torch.Tensor) -> None:
        d = d.detach()
        self.record(w_mean=lambda: torch.sigmoid(d).mean(), p_pos_mean=lambda: 1 - torch.sigmoid(d).mean())

    def record_tau(self, tau: torch.Tensor | float) -> None:
        if isinstance(tau, torch.Tensor) and tau.numel() > 1:
            tau = tau.detach()
            self.record(tau_mean=lambda: tau.mean(), tau_min=lambda: tau.min(), tau_max=lambda: tau.max())
        else:
            self.record(tau_mean=tau, tau_min=tau, tau_max=tau)

    def extra_repr(self) -> str:
        return (
            f"layout={self.layout!r}, symmetric={self.symmetric}, decoupled={self.decoupled}, "
            f"reduction={self.reduction!r}"
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _recording_arguments(cls.__init__)  # type: ignore[method-assign]

    def hyperparameters(self) -> dict[str, Any]:
        """The arguments the loss was built with (by :func:`build_loss` or its class, by name or position), for
        logging and for rebuilding with :func:`build_loss`; defaults it was not given are not listed."""
        return dict(getattr(self, "_init_kwargs", {}))


def _recording_arguments(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` that first records the arguments of the outermost constructor call in ``_init_kwargs``."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        if "_init_kwargs" not in self.__dict__:  # a subclass's __init__ calling its parent's records nothing
            bound = signature.bind(self, *args, **kwargs).arguments
            extra = next((bound.pop(p.name) for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD
                          and p.name in bound), {})  # fmt: skip
            bound.pop(next(iter(signature.parameters)))
            object.__setattr__(self, "_init_kwargs", {**bound, **extra})
        init(self, *args, **kwargs)

    return wrapper


def call_tag(call: str) -> int:
    """A 32-bit hash of ``call`` (FNV-1a), the same in every process: plain Python, which ``torch.compile`` traces
    (``zlib.crc32`` broke the graph)."""
    h = 0x811C9DC5
    for char in call:
        h = ((h ^ ord(char)) * 0x01000193) & 0xFFFFFFFF
    return h


#: the stats key of the anchors of a batch without negatives, read by :attr:`ContrastiveLoss.stats`
_BATCH_WITHOUT_NEGATIVES = "_batch_without_negatives"


def _refuse_without_negatives(candidates: torch.Tensor, refused: str) -> None:
    raise ValueError(f"{no_negatives_message(candidates)}; {refused}: use a batch of at least 2 with two labels")


def _shape(x: object) -> str:
    return "None" if x is None else f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


def _unit_if_tensor(x: torch.Tensor | None, name: str | None,
                    checks: DeferredChecks | None) -> torch.Tensor | None:  # fmt: skip
    """Unit rows of a queue or hard negatives that look like embeddings (their rows checked as ``name`` with
    ``checks``, :func:`~cl_plugins.layouts.unit_rows`); anything else goes on unchanged to the layout's checks, which
    refuse it with a message naming it."""
    return unit_rows(x, name, checks=checks) if looks_like_embeddings(x) else x
