"""Which entries of a tile are no negatives: one helper that every torch kernel and the dense path use.

A block's non-negatives are each anchor's excluded columns (``exclude_cols`` [A, k]: its positive and itself, as
:mod:`cl_plugins.layouts` lists them) and, under a label policy, the candidates of its label
(:class:`~cl_plugins.labels.BlockLabels`). A kernel sees them one tile at a time, rows ``r0:`` against columns
``t0:``; :class:`NonNegatives` locates them there from the block's [A, k] and label vectors, never from an [A, M]
mask. The Triton kernel computes the same in registers (:mod:`cl_plugins.kernels.triton_lse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ..labels import BlockLabels


@dataclass(frozen=True)
class NonNegatives:
    """The non-negatives of one tile in its own coordinates: each row's excluded columns that fall in the tile,
    either ``columns`` [R, k] (a tile of whole rows: every one does) or ``located`` [R, T] (True at them), and
    ``same`` [R, T], the candidates of each row's label (None without labels, or where not asked for); the excluded
    and the same-label entries may overlap."""

    columns: torch.Tensor | None = None
    located: torch.Tensor | None = None
    same: torch.Tensor | None = None

    @classmethod
    def of(cls, exclude_cols: torch.Tensor | None, labels: BlockLabels | None, r0: int, tile: torch.Tensor,
           t0: int | None = None, *, with_same: bool = True,
           kept: torch.Tensor | None = None) -> NonNegatives:  # fmt: skip
        """Those of ``tile`` [R, T] at rows ``r0:`` and columns ``t0:`` of the block (None: the tile holds whole
        rows, every column). ``with_same=False`` leaves the label part out (a kernel that compares the labels
        itself); ``kept`` [A] (whole rows only): one column per row that stays a term under its label (AMCL's
        positive)."""
        n_rows, width = tile.shape
        rows = slice(r0, r0 + n_rows)
        columns = located = None
        if exclude_cols is not None and t0 is None:
            columns = exclude_cols[rows]
        elif exclude_cols is not None:
            located = listed_mask(exclude_cols[rows] - t0, width)
        if labels is None or not with_same:
            return cls(columns, located)
        same = labels.same(rows, slice(t0 or 0, (t0 or 0) + width))
        if kept is not None:
            assert t0 is None, "kept columns apply to whole rows"
            same.scatter_(1, kept[rows, None], False)
        return cls(columns, located, same)

    def fill_(self, t: torch.Tensor, value: float) -> torch.Tensor:
        """``t`` [R, T] (the tile's logits, exponentials or cosines) with ``value`` at every non-negative, in place."""
        self._fill_excluded_(t, value)
        return t if self.same is None else t.masked_fill_(self.same, value)

    def _fill_excluded_(self, t: torch.Tensor, value: float | bool) -> torch.Tensor:
        if self.columns is not None:
            return t.scatter_(1, self.columns, value)
        return t if self.located is None else t.masked_fill_(self.located, value)

    def mask(self) -> torch.Tensor | None:
        """[R, T] True at every non-negative, where labels make an [R, T] mask anyway (None without them)."""
        return None if self.same is None else self._fill_excluded_(self.same.clone(), True)

    def excluded_sum(self, t: torch.Tensor) -> torch.Tensor:
        """The sum of ``t`` [R, T] over the excluded entries."""
        if self.columns is not None:
            return t.gather(1, self.columns).sum()
        return torch.where(self.located, t, 0).sum() if self.located is not None else t.new_zeros(())


def listed_mask(local: torch.Tensor, width: int) -> torch.Tensor:
    """[R, T] True at each row's listed columns ``local`` [R, k] that fall in [0, T): the others go to a spare
    column, so that no read of the host sizes anything (a ``nonzero`` would wait for the device)."""
    inside = (local >= 0) & (local < width)
    mask = torch.zeros(local.shape[0], width + 1, dtype=torch.bool, device=local.device)
    return mask.scatter_(1, torch.where(inside, local, width), True)[:, :width]


def at_listed(local: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(column [R, 1], inside [R, 1]) of one listed column per row ``local`` [R] in a tile of ``width`` columns:
    the column clamped into the tile, and whether it was there (a row's value at a clamped column stays as it is)."""
    inside = (local >= 0) & (local < width)
    return local.clamp(0, width - 1)[:, None], inside[:, None]
