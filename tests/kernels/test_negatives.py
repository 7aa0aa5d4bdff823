"""The one helper that says which entries of a tile are no negatives, against masks built entry by entry."""

from __future__ import annotations

import pytest
import torch

from cl_plugins.kernels.negatives import NonNegatives
from cl_plugins.labels import BlockLabels, label_policy

A, M = 7, 11


def _block() -> tuple[torch.Tensor, BlockLabels]:
    g = torch.Generator().manual_seed(3)
    exclude = torch.stack([torch.randperm(M, generator=g)[:2] for _ in range(A)])
    labels = BlockLabels(torch.randint(0, 3, (A,), generator=g), torch.randint(0, 3, (M,), generator=g),
                         label_policy("exclude"))  # fmt: skip
    return exclude, labels


def _by_hand(exclude: torch.Tensor, labels: BlockLabels | None, kept: torch.Tensor | None = None) -> torch.Tensor:
    """[A, M]: True where entry (i, j) is no negative, one entry at a time."""
    mask = torch.zeros(A, M, dtype=torch.bool)
    for i in range(A):
        for j in range(M):
            same = labels is not None and bool(labels.anchor[i] == labels.candidate[j])
            mask[i, j] = j in exclude[i].tolist() or (same and (kept is None or j != int(kept[i])))
    return mask


@pytest.mark.parametrize("with_labels", [False, True])
@pytest.mark.parametrize("r0,rows,t0,width", [(0, A, None, M), (2, 3, None, M), (0, A, 0, 4), (3, 4, 4, 7),
                                              (1, 5, 9, 2)])  # fmt: skip
def test_a_tile_fills_exactly_its_non_negatives(with_labels: bool, r0: int, rows: int, t0: int | None,
                                                width: int) -> None:  # fmt: skip
    exclude, labels = _block()
    labels = labels if with_labels else None
    tile = torch.zeros(rows, width)
    skip = NonNegatives.of(exclude, labels, r0, tile, t0)
    start = t0 or 0
    expected = _by_hand(exclude, labels)[r0 : r0 + rows, start : start + width]
    assert torch.equal(skip.fill_(tile, 1.0).bool(), expected)
    mask = skip.mask()
    assert (mask is None) == (labels is None) and (mask is None or torch.equal(mask, expected))
    excluded_only = _by_hand(exclude, None)[r0 : r0 + rows, start : start + width]
    values = torch.arange(float(rows * width)).reshape(rows, width)
    assert float(skip.excluded_sum(values)) == float(values[excluded_only].sum())


def test_without_the_label_part_and_with_kept_columns() -> None:
    exclude, labels = _block()
    tile = torch.zeros(A, M)
    assert torch.equal(NonNegatives.of(exclude, labels, 0, tile, with_same=False).fill_(tile.clone(), 1.0).bool(),
                       _by_hand(exclude, None))  # fmt: skip
    kept = torch.randint(0, M, (A,), generator=torch.Generator().manual_seed(1))
    expected = _by_hand(exclude, labels, kept)
    assert torch.equal(NonNegatives.of(exclude, labels, 0, tile, kept=kept).fill_(tile, 1.0).bool(), expected)


def test_nothing_to_skip() -> None:
    tile = torch.ones(3, 4)
    skip = NonNegatives.of(None, None, 0, tile, 2)
    assert torch.equal(skip.fill_(tile, 0.0), torch.ones(3, 4)) and skip.mask() is None
    assert float(skip.excluded_sum(tile)) == 0.0
