"""MABEL's objective (He et al., EMNLP 2022) on SimCSE's encoder, with any cl-plugins strategy.

A batch holds (premise, hypothesis, swapped premise, swapped hypothesis) [B, 4, L]. With
z0 = [orig premises; swapped premises] and z1 = [orig hypotheses; swapped hypotheses] (2B each):

* contrastive: the strategy over the 2B × 2B matrix, z0 anchors against z1 (MABEL's ``cl_loss``,
  InfoNCE at τ 0.05 there);
* alignment (``a1_loss``): ``mean_i ‖S_orig[i] − S_aug[i]‖²`` with ``S = cos(z0, z1) / τ_align``
  over the B × B original and swapped matrices. It keeps its own constant ``align_temp`` (MABEL
  computes it with the contrastive τ, 0.05): swapping the contrastive strategy must not rescale
  this term, and a strategy without a τ (temperature-free) would leave it undefined;
* MLM on the four sentences, weight ``mlm_weight`` (0.1).

Loss = contrastive + ``align_weight`` · alignment + ``mlm_weight`` · MLM (MABEL's ``align_temp``
0.05 is this ``align_weight``). The head over [CLS] is MABEL's: Linear, Tanh, Linear, used at
inference too. Under several processes the four embeddings are gathered with gradient, so both
terms are those of the global batch, exactly.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import cl_plugins as clp
from cl_plugins.integrations.modalities.text.encoder import SimCSEModel


def alignment_loss(orig_z0: torch.Tensor, orig_z1: torch.Tensor, aug_z0: torch.Tensor, aug_z1: torch.Tensor,
                   temperature: float) -> torch.Tensor:  # fmt: skip
    """MABEL's ``a1_loss``: mean over rows of ‖cos(o0, o1)/τ − cos(a0, a1)/τ‖² (Wang & Isola's align, α = 2)."""

    def sims(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # float32 at least, float64 stays float64
        a, b = (x.to(torch.promote_types(x.dtype, torch.float32)) for x in (a, b))
        return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / temperature

    return (sims(orig_z0, orig_z1) - sims(aug_z0, aug_z1)).norm(p=2, dim=1).pow(2).mean()


class MabelModel(SimCSEModel):
    """SimCSE's encoder and pooler with MABEL's head and objective.

    Shapes: forward(input_ids [B, 4, L], attention_mask [B, 4, L], ...) -> scalar loss.
    """

    def __init__(self, backbone: nn.Module, loss_fn: nn.Module, *, align_weight: float = 0.05,
                 align_temp: float = 0.05, **kwargs: Any) -> None:  # fmt: skip
        kwargs.setdefault("head", "mabel")
        super().__init__(backbone, loss_fn, **kwargs)
        if align_temp <= 0:
            raise ValueError(f"align_temp must be > 0, got {align_temp}")
        self.align_weight, self.align_temp = float(align_weight), float(align_temp)
        self.last_terms: dict[str, float] = {}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        mlm_input_ids: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if input_ids.dim() != 3 or input_ids.shape[1] != 4:
            raise ValueError(
                "input_ids must be [batch, 4, length]: premise, hypothesis and their gender-swapped copies; "
                f"got {tuple(input_ids.shape)}"
            )
        orig_z0, orig_z1, aug_z0, aug_z1 = self.embed_views(input_ids, attention_mask, token_type_ids).unbind(1)
        self.last_embeddings = (orig_z0.detach(), orig_z1.detach())
        contrastive = self.loss_fn(torch.cat([orig_z0, aug_z0]), torch.cat([orig_z1, aug_z1]))
        gathered = [clp.gather_with_grad(t)[0] for t in (orig_z0, orig_z1, aug_z0, aug_z1)]  # no-op alone
        align = alignment_loss(*gathered, temperature=self.align_temp)
        loss = contrastive + self.align_weight * align
        self.last_terms = {"contrastive": float(contrastive.detach()), "align": float(align.detach())}
        mlm = self.mlm_loss(mlm_input_ids, mlm_labels, attention_mask)
        if mlm is not None:
            loss = loss + self.mlm_weight * mlm
            self.last_terms["mlm"] = float(mlm.detach())
        return loss
