"""What class labels do in a loss: one policy, chosen once when the loss is built, and carried from the call to
every kernel (dense, one-buffer, streaming, symmetric, Triton, AMCL's).

``ContrastiveLoss(label_policy=...)``, then ``loss(z1, z2, labels=y)`` with ``y`` [N] the integer label of pair
i (and ``queue_labels=`` [K] for ``layout="queue"``):

==================  ==========================================================================================
policy              what the labels do
==================  ==========================================================================================
``"exclude"``       false-negative elimination: a candidate sharing its anchor's label is no negative; the
                    positives are the layout's (one per anchor)
``"positives_out"`` supervised contrastive learning (Khosla et al., NeurIPS 2020), their L_out (their
                    default): every candidate of the anchor's label is a positive too, and
                    (1/|P|) sum_p -log(e^l_ap / sum_{P+N} e^l): the other positives stay in each denominator
``"positives_in"``  their L_in: -log((1/|P|) sum_p e^l_ap / sum_{P+N} e^l), one term per anchor
``"positives_pair"`` pytorch-metric-learning's ``NTXentLoss`` with labels: -log(e^l_ap / (e^l_ap + sum_N e^l))
                    for every positive pair, averaged over all pairs, the other positives outside the denominator
==================  ==========================================================================================

With labels as positives, strategies see, per pair, the d with softplus(d) equal to that pair's InfoNCE term
(per anchor for ``"positives_in"``: d = LSE_N - LSE_P, plus the constant log |P|), so reweightings (MACL's
1/(1-P), dual temperature's intra-anchor weight) apply per positive pair, and per-pair statistics (MACL's
alignment, DySTreSS's positive τ) are over every positive pair; negative statistics (DySTreSS) over N. Memory:
one cosine per positive pair (P = sum over labels of anchors x candidates), besides the kernel's.

The labels travel as :class:`Labels` (a call's) and :class:`BlockLabels` (a block's anchors and candidates),
each holding the policy; a kernel derives each tile's mask from the two label vectors, never from an [A, M] mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .deferred import DeferredChecks
from .distributed import gather_no_grad, is_distributed
from .validation import ArgumentTypeError, check_choice

LABEL_POLICIES = ("exclude", "positives_out", "positives_in", "positives_pair")

#: the arguments ``label_policy=`` replaced
_REPLACED = ("exclude", "positives", "positive_form")


@dataclass(frozen=True)
class LabelPolicy:
    """One of :data:`LABEL_POLICIES` (see the module docstring)."""

    name: str

    @property
    def form(self) -> str | None:
        """How an anchor's several positives make its loss (``"out"``, ``"in"``, ``"pair"``); None for
        ``"exclude"``, whose anchors keep their one positive."""
        return self.name.partition("_")[2] or None

    @property
    def makes_positives(self) -> bool:
        return self.form is not None


def label_policy(value: str | LabelPolicy | None) -> LabelPolicy | None:
    """The policy ``label_policy=`` names (None: the loss takes no labels)."""
    if value is None or isinstance(value, LabelPolicy):
        return value
    return LabelPolicy(check_choice("label_policy", value, LABEL_POLICIES))


def refuse_replaced(arguments: dict[str, object]) -> None:
    """One line for the arguments ``label_policy=`` replaced, naming the policy they meant (nothing has been
    released: no aliases)."""
    old = [name for name in _REPLACED if name in arguments]
    if not old:
        return
    meant = "exclude" if "exclude" in old else f"positives_{arguments.get('positive_form') or 'out'}"
    given = ", ".join(f"{name}={arguments[name]!r}" for name in old)
    raise ArgumentTypeError(f"{old[0]}= is gone: what labels do is one argument, label_policy= (one of "
                            f"{', '.join(LABEL_POLICIES)}); for {given} pass label_policy={meant!r}")  # fmt: skip


@dataclass(frozen=True)
class BlockLabels:
    """A block's labels: ``anchor`` [A] and ``candidate`` [M] (a candidate's label is ``candidate[j]``), with the
    policy that says what a shared label means."""

    anchor: torch.Tensor
    candidate: torch.Tensor
    policy: LabelPolicy

    def same(self, rows: slice | torch.Tensor, cols: slice) -> torch.Tensor:
        """[r, c] whether candidate ``cols`` shares the label of anchor ``rows``: one tile's label mask."""
        return self.anchor[rows, None] == self.candidate[None, cols]

    @property
    def mirrored(self) -> bool:
        """The anchors' labels are the candidates' (a SimCLR block in one process): one tensor, as the layout
        made it, so that no value is read from the device to tell."""
        return self.anchor is self.candidate


@dataclass
class Labels:
    """A call's labels: ``y`` [N] of this process's rows (the label of pair i), ``queue`` [K] the labels of the
    queue's rows (``layout="queue"``), and the loss's policy; gathered with the candidates (``tag`` names the
    call in the gathers)."""

    y: torch.Tensor
    queue: torch.Tensor | None
    policy: LabelPolicy
    gather: bool = True
    tag: int = 0
    #: where the checks of the labels go (:mod:`cl_plugins.deferred`; None: at once, reading the host)
    checks: DeferredChecks | None = None
    #: set by the layout where the checks are deferred: (whether every anchor's label covers every candidate, the
    #: candidates' labels), for the loss to give its defined 0 or its refusal
    without_negatives: tuple[torch.Tensor, torch.Tensor] | None = None

    def gathered(self) -> torch.Tensor:
        """Every process's labels, in the order the candidates are gathered."""
        return gather_no_grad(self.y, self.tag) if self.gather and is_distributed() else self.y

    def block(self, anchor: torch.Tensor, candidate: torch.Tensor) -> BlockLabels:
        return BlockLabels(anchor, candidate, self.policy)
