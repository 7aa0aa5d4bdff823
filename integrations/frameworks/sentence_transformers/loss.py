"""Any cl-plugins strategy in sentence-transformers, where ``MultipleNegativesRankingLoss`` (MNRL) sits.

* :class:`StrategyRankingLoss` takes MNRL's columns (anchor, positive, optional negatives 1..n) and its host
  temperature (``scale=20``: τ = 1/scale = 0.05, mapped through the strategy's own declaration). Each anchor's
  candidates are every positive and every negative of the batch; with ``gather_across_devices`` this process's
  anchors meet every process's candidates, as in MNRL. ``infonce`` is MNRL.
* :class:`CachedStrategyRankingLoss` is its GradCache form on sentence-transformers' ``CachedLossMixin``
  (``CachedMultipleNegativesRankingLoss`` for ``infonce``): embeddings in mini-batches without a graph, the loss and
  its gradients on the whole batch (batch statistics such as MACL's alignment stay those of the whole batch, a
  learned temperature gets its gradient there), then the backward mini-batch by mini-batch. Equal in loss and
  gradients to the uncached loss; the memory is that of a mini-batch.
* :class:`StrategyTrainer` is ``SentenceTransformerTrainer`` that keeps temperatures out of weight decay (the
  trainer's grouping would decay ``learnable``'s ``log_tau`` by the run's weight decay) and runs the strategies'
  per-step upkeep through :class:`~cl_plugins.integrations.frameworks.hf_trainer.StrategyTrainerCallback`.

Example::

    loss = CachedStrategyRankingLoss(model, "macl", mini_batch_size=64)
    StrategyTrainer(model=model, args=args, train_dataset=pairs, loss=loss).train()
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformerTrainer
from sentence_transformers.base.losses.gradcache import CachedLossMixin
from torch import nn

import cl_plugins as clp
from cl_plugins.arguments import strict_flags
from cl_plugins.distributed import gather_no_grad
from cl_plugins.integrations.frameworks.hf_trainer import StrategyTrainerCallback
from cl_plugins.layouts import unit_rows
from cl_plugins.validation import check_embeddings, check_positive

#: sentence-transformers' MNRL scale: τ = 1 / 20
MNRL_SCALE = 20.0


@strict_flags
class StrategyRankingLoss(nn.Module):
    """MNRL's seam with strategy ``loss``.

    Args:
        model: the ``SentenceTransformer``.
        loss: a registry name or a built cl-plugins loss (default: "infonce").
        scale: MNRL's inverse temperature; the host τ is 1 / scale (default: 20.0).
        gather_across_devices: this process's anchors against every process's candidates (default: False).
        exclude_duplicates: a candidate whose text equals the anchor's or the anchor's positive text is no
            negative of that anchor (duplicates in a batch, sentence-transformers #3189, #2756); texts are
            compared by their token ids (default: False, MNRL's behaviour).
        **loss_args: the strategy's own arguments.

    Shapes:
        each column's embeddings: [B, D] -> scalar.
    """

    def __init__(self, model: nn.Module, loss: str | clp.ContrastiveLoss = "infonce", scale: float = MNRL_SCALE,
                 gather_across_devices: bool = False, exclude_duplicates: bool = False,
                 **loss_args: Any) -> None:  # fmt: skip
        super().__init__()
        self.exclude_duplicates = bool(exclude_duplicates)
        name = loss if isinstance(loss, str) else loss.name
        if clp.owns_projection_head(name):
            raise ValueError(f"{name} builds heads on the embeddings; this seam hands it similarities")
        self.scale = check_positive("scale", scale)  # MNRL's 1/τ: 0 or a negative scale has no temperature
        self.model, self.gather_across_devices = model, bool(gather_across_devices)
        # the strategy sees one process's anchors against the candidates this loss gathers itself
        self.loss_fn = loss if isinstance(loss, nn.Module) else clp.build_host_loss(
            loss, host_tau=1.0 / self.scale, layout="cross_view", gather_distributed=False, **loss_args)  # fmt: skip

    def forward(self, sentence_features: Any, labels: torch.Tensor | None = None) -> torch.Tensor:
        keys = self.text_keys(sentence_features)
        embeddings = [self.model(features)["sentence_embedding"] for features in sentence_features]
        return self.loss_from_embeddings(embeddings, keys)

    def text_keys(self, sentence_features: Any) -> list[torch.Tensor] | None:
        """One key per text of each column (equal token ids, equal keys) under ``exclude_duplicates``."""
        return [text_keys(features) for features in sentence_features] if self.exclude_duplicates else None

    def loss_from_embeddings(
        self, embeddings: list[torch.Tensor], keys: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Anchors ``embeddings[0]`` against the candidates ``cat(embeddings[1:])``; row i's positive is row i of
        ``embeddings[1]`` (of this process's slice under ``gather_across_devices``). ``keys`` (one per text,
        :func:`text_keys`) remove the candidates whose text is the anchor's or its positive's from its negatives."""
        if len(embeddings) < 2:
            raise ValueError(f"expected an anchor and a positive column at least, got {len(embeddings)} column(s)")
        for i, e in enumerate(embeddings):  # a tensor [B, D] each; rows are checked where they are normalised
            check_embeddings(e, f"column {i}'s embeddings", rows=False)
        sizes = [e.shape[0] for e in embeddings]
        if len(set(sizes)) != 1:  # row i of every column belongs to row i of the anchors
            raise ValueError(f"the columns hold different numbers of rows {sizes} (anchor, positive, negatives...): "
                             "each row of the dataset needs a text in every column")  # fmt: skip
        anchors, candidates, offset = embeddings[0], embeddings[1:], 0
        cand_keys = None if keys is None else keys[1:]
        if self.gather_across_devices and clp.is_distributed():
            offset = clp.gather_with_grad(anchors)[1]
            candidates = [clp.gather_with_grad(c)[0] for c in candidates]
            cand_keys = None if keys is None else [gather_no_grad(k) for k in keys[1:]]
        # scale-invariant and checked (F.normalize turns rows of 1e-14 into cosines of 1e-4 without a word)
        sim = unit_rows(anchors, "anchor embeddings") @ unit_rows(torch.cat(candidates), "candidate embeddings").T
        cols = torch.arange(anchors.shape[0], device=sim.device) + offset
        pos = F.one_hot(cols, sim.shape[1]).bool()
        if keys is None or cand_keys is None:  # (both or neither: cand_keys are keys[1:], gathered)
            return self.loss_fn.from_similarity(sim, pos)
        flat = torch.cat(cand_keys)
        duplicate = (flat[None, :] == flat[cols][:, None]) | (flat[None, :] == keys[0][:, None])
        return self.loss_fn.from_similarity(sim, pos, ~pos & ~duplicate)

    def get_config_dict(self) -> dict[str, Any]:
        return {"strategy": self.loss_fn.name, "scale": self.scale, "exclude_duplicates": self.exclude_duplicates,
                **self.loss_fn.hyperparameters()}  # fmt: skip


def text_keys(features: dict[str, torch.Tensor]) -> torch.Tensor:
    """One int64 per row of a tokenised column: a hash of the row's unpadded token ids (equal texts, equal keys;
    the same on every process)."""
    if "input_ids" not in features:
        raise ValueError("exclude_duplicates compares texts by their token ids; these features have no input_ids")
    ids, mask = features["input_ids"], features.get("attention_mask")
    rows = []
    for i in range(ids.shape[0]):
        row = ids[i][mask[i].bool()] if mask is not None else ids[i]
        digest = hashlib.blake2b(row.to("cpu", torch.int64).numpy().tobytes(), digest_size=8).digest()
        rows.append(int.from_bytes(digest, "little", signed=True))
    return torch.tensor(rows, dtype=torch.long, device=ids.device)


@strict_flags
class CachedStrategyRankingLoss(CachedLossMixin, StrategyRankingLoss):
    """:class:`StrategyRankingLoss` with GradCache: the memory of ``mini_batch_size`` rows at any batch size.

    Args:
        model, loss, scale, gather_across_devices, exclude_duplicates, **loss_args: as :class:`StrategyRankingLoss`.
        mini_batch_size: rows embedded at once (default: 32).
        show_progress_bar: a bar over the mini-batches (default: False).
    """

    def __init__(self, model: nn.Module, loss: str | clp.ContrastiveLoss = "infonce", scale: float = MNRL_SCALE,
                 gather_across_devices: bool = False, mini_batch_size: int = 32, show_progress_bar: bool = False,
                 exclude_duplicates: bool = False, **loss_args: Any) -> None:  # fmt: skip
        StrategyRankingLoss.__init__(self, model, loss, scale, gather_across_devices, exclude_duplicates, **loss_args)
        self._keys: list[torch.Tensor] | None = None
        if mini_batch_size < 1:
            raise ValueError(f"mini_batch_size must be >= 1, got {mini_batch_size}")
        self.mini_batch_size, self.show_progress_bar = int(mini_batch_size), bool(show_progress_bar)

    def calculate_loss(self, reps: list[list[torch.Tensor]], labels: torch.Tensor | None = None, *,
                       with_backward: bool = False) -> torch.Tensor:  # fmt: skip
        loss = self.loss_from_embeddings([torch.cat(column) for column in reps], self._keys)
        if with_backward:
            loss.backward()
            return loss.detach()
        return loss

    def forward(self, sentence_features: Any, labels: torch.Tensor | None = None) -> torch.Tensor:
        self._keys = self.text_keys(sentence_features)  # read by calculate_loss, inside GradCache's passes
        return self.forward_cached(sentence_features, labels)


class StrategyTrainer(SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` with no weight decay on temperatures and the strategies' per-step hook."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        losses = list(self.loss.values()) if isinstance(self.loss, dict) else [self.loss]
        self.add_callback(StrategyTrainerCallback(losses))

    def get_decay_parameter_names(self, model: nn.Module) -> list[str]:
        names = super().get_decay_parameter_names(model)
        skip = clp.no_weight_decay_names(model)
        return [n for n in names if n not in skip]
