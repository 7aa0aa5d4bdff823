"""Whole tiles in one compiled loop: a per-pair strategy's map, its exponential, the masks, the sums and the
statistics of a streaming tile (forward), or its softmax gradient (backward), as one function that ``torch.compile``
fuses (``compile_maps=True`` or ``CL_PLUGINS_COMPILE=1``, :mod:`cl_plugins.kernels.compiled`).

The one-buffer kernel does the same per row chunk, keeping exp(phi) phi' in its buffer for backward.

Eagerly each of these is a pass over the tile: the map (several), the masks, ``exp``, the row sums, the column sums
of the symmetric kernel, three reductions for a statistic. Compiled, inductor reads the tile once per loop. The
tile's non-negatives arrive as NaN (written into the fresh product at the few excluded entries); the same-label
mask is made inside the loop from the two label vectors, never as an [R, T] tensor.

A map takes part through ``LogitMap.tile_form = (form, args)``: ``form(x, *args, grad) -> (exp(phi(x)),
exp(phi(x)) phi'(x) if grad else None, stat(x) or None)``, elementwise and bounded (the sums carry no maximum).
:meth:`LogitMap.of_terms <cl_plugins.kernels.contract.LogitMap.of_terms>` makes it from the map's terms
(:func:`exp_of_terms`) or from its closed-form exponential (:func:`exp_of_closed_form`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Exps = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]
Form = Callable[..., Exps]
Sums = tuple[torch.Tensor, torch.Tensor | None, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None]


def exp_of_terms(x: torch.Tensor, terms: Callable[..., Any], *args: Any) -> Exps:
    """A tile form from a map's ``terms(x, *params, derivative, statistic) -> (phi, phi' or None, stat or None)``:
    ``args`` = (*params, statistic, grad) (compiled, what a caller leaves unused is never computed)."""
    *params, statistic, grad = args
    phi, derivative, stat = terms(x, *params, grad, statistic)
    e = torch.exp(phi)
    return e, (e * derivative if grad else None), stat


def exp_of_closed_form(x: torch.Tensor, closed: Callable[..., Any], *args: Any) -> Exps:
    """A tile form from a map's closed-form exponential ``closed(x, *params, grad) -> (exp(phi), exp(phi) phi' or
    None)``, without a statistic: ``args`` = (*params, grad)."""
    e, factor = closed(x, *args)
    return e, factor, None


def _kept(x: torch.Tensor, row_labels: torch.Tensor | None, col_labels: torch.Tensor | None) -> torch.Tensor:
    """The tile's negatives: not NaN (excluded) and, with labels, of another label."""
    keep = ~torch.isnan(x)
    if row_labels is not None and col_labels is not None:
        keep = keep & (row_labels[:, None] != col_labels[None, :])
    return keep


def forward_sums(x: torch.Tensor, row_labels: torch.Tensor | None, col_labels: torch.Tensor | None, form: Form,
                 args: tuple[Any, ...], columns: bool) -> Sums:  # fmt: skip
    """(row sums of exp(phi) over the negatives [R], column sums [T] if ``columns``, the statistic's (sum, min,
    max) over the negatives or None)."""
    e, _, stat = form(x, *args, False)
    keep = _kept(x, row_labels, col_labels)
    e = torch.where(keep, e, 0.0)
    col_sums = e.sum(dim=0) if columns else None
    return e.sum(dim=1), col_sums, _summary(stat, keep)


def _summary(stat: torch.Tensor | None, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The statistic's (sum, min, max) over the kept entries, or None without a statistic."""
    if stat is None:
        return None
    low, high = torch.where(keep, stat, torch.inf).amin(), torch.where(keep, stat, -torch.inf).amax()
    return torch.where(keep, stat, 0.0).sum(), low, high


def gradient_tile(x: torch.Tensor, row_labels: torch.Tensor | None, col_labels: torch.Tensor | None, form: Form,
                  args: tuple[Any, ...], v_rows: torch.Tensor,
                  v_cols: torch.Tensor | None) -> torch.Tensor:  # fmt: skip
    """dL/dx of the tile: exp(phi) phi' (v_i, or v_i + v_j for a tile that stands for its transpose too), 0 at the
    non-negatives."""
    _, g, _ = form(x, *args, True)
    assert g is not None
    weight = v_rows[:, None] if v_cols is None else v_rows[:, None] + v_cols[None, :]
    return torch.where(_kept(x, row_labels, col_labels), g * weight, 0.0)


def chunk_forward(x: torch.Tensor, row_labels: torch.Tensor | None, col_labels: torch.Tensor | None, form: Form,
                  args: tuple[Any, ...]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:  # fmt: skip
    """The one-buffer kernel's chunk: ``x`` overwritten with exp(phi) phi' (0 at the non-negatives), all that its
    backward needs; returns (row sums of exp(phi) over the negatives, the statistic's (sum, min, max) or None)."""
    e, g, stat = form(x, *args, True)
    keep = _kept(x, row_labels, col_labels)
    rows = torch.where(keep, e, 0.0).sum(dim=1)
    summary = _summary(stat, keep)
    x.copy_(torch.where(keep, g, 0.0))
    return rows, summary
