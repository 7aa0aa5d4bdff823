"""Input and parameter checks shared by every loss.

Each check raises a ``TypeError`` or ``ValueError`` whose message names the offending
argument and says how to fix it; nothing is allowed to turn silently into NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from .arguments import ArgumentTypeError, check_flag, flag_parameters, strict_flags  # noqa: F401 - their home

if TYPE_CHECKING:
    from .deferred import DeferredChecks

# Cosines computed in low precision can exceed 1 by a few ulps; beyond this we refuse.
SIMILARITY_TOLERANCE = 1e-3
#: temperatures outside this range give logits s / τ that overflow float32 or lose all its precision (τ → 0),
#: or that float32 cannot tell apart (τ → ∞); no paper comes near either end
TEMPERATURE_RANGE = (1e-6, 1e6)


def check_positive(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}")
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return float(value)


def check_temperature(name: str, value: float) -> float:
    """A temperature: a finite number in :data:`TEMPERATURE_RANGE`."""
    low, high = TEMPERATURE_RANGE
    value = check_positive(name, value)
    if not low <= value <= high:
        raise ValueError(
            f"{name} must be a temperature in [{low:g}, {high:g}] (logits s / {name} outside it overflow or lose "
            f"float32 precision), got {value:g}"
        )
    return value


def check_count(name: str, value: int, low: int = 1) -> int:
    """An integer >= ``low`` (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def check_range(name: str, value: float, low: float, high: float) -> float:
    """A finite number in [low, high] (NaN and infinities are refused, also when ``high`` is inf)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (low <= value <= high) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number in [{low}, {high}], got {value}")
    return float(value)


def check_choice(name: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_embeddings(z: torch.Tensor, name: str, allow_zero_rows: bool = False, rows: bool = True) -> None:
    """A 2-D floating tensor of finite, non-zero rows (zero rows allowed for inputs a layer with a bias maps).

    ``rows=False`` checks type and shape only; :func:`cl_plugins.layouts.unit_rows` then checks the rows in the
    pass that normalises them.
    """
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [N, D], got {type(z).__name__}")
    if z.dim() != 2:
        raise ValueError(
            f"{name} must have shape [N, D], got {tuple(z.shape)}; flatten extra dimensions "
            f"first (e.g. {name}.flatten(1))"
        )
    if not z.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got dtype {z.dtype}; call {name}.float()")
    if z.shape[0] == 0 or z.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(z.shape)}); pass at least one row and one feature")
    if rows:
        with torch.no_grad():
            check_rows(z, z.detach().abs().amax(dim=1), name, allow_zero_rows)


def good_rows(peak: torch.Tensor, allow_zero_rows: bool = False) -> torch.Tensor:
    """Rows [N, 1] whose largest |entry| ``peak`` is finite and (unless ``allow_zero_rows``) at least the dtype's
    smallest normal number (:func:`check_rows`): ``peak`` unchanged by a clamp to that range (NaN and inf are
    changed), two kernels."""
    info = torch.finfo(peak.dtype)
    return peak.clamp(0.0 if allow_zero_rows else info.tiny, info.max) == peak


def passing_rows(z: torch.Tensor, peak: torch.Tensor, name: str | tuple[str, ...], allow_zero_rows: bool,
                 checks: DeferredChecks | None) -> torch.Tensor | None:  # fmt: skip
    """:func:`check_rows` at once without ``checks`` (None); with them deferred (:mod:`cl_plugins.deferred`), and
    the rows [N, 1] that pass. A tuple ``name`` names views of one shape stacked as ``z``
    (:func:`check_stacked_rows`)."""
    explain = check_rows if isinstance(name, str) else check_stacked_rows
    if checks is None:
        explain(z, peak, name, allow_zero_rows)
        return None
    ok = good_rows(peak, allow_zero_rows)
    checks.add(ok.all().logical_not(), explain, z, peak, name, allow_zero_rows)
    return ok


def checked_rows(z: torch.Tensor, name: str, allow_zero_rows: bool, checks: DeferredChecks | None) -> torch.Tensor:
    """``z`` with its rows checked (:func:`passing_rows`), the rows a deferred check flags replaced by zeros (with a
    zero gradient)."""
    with torch.no_grad():
        ok = passing_rows(z, z.detach().abs().amax(dim=1, keepdim=True), name, allow_zero_rows, checks)
    return z if ok is None else torch.where(ok, z, 0.0)


def looks_like_embeddings(x: object) -> bool:
    """A non-empty 2-D floating tensor: rows a loss may check and normalise (anything else goes on to the checks
    that refuse it with a message naming it)."""
    return isinstance(x, torch.Tensor) and x.dim() == 2 and x.is_floating_point() and x.numel() > 0


def check_rows(z: torch.Tensor, peak: torch.Tensor, name: str, allow_zero_rows: bool = False) -> None:
    """Finite, non-zero rows, from each row's largest |entry| ``peak`` (one pass: NaN/inf for a non-finite row,
    0 for an all-zero row; ``allow_zero_rows`` lets zero and subnormal rows through). Any scale down to the
    dtype's smallest normal number is fine (normalisation is scale-invariant); below it a row's direction keeps
    only a few bits and its gradient, 1 / |row|, overflows."""
    tiny = torch.finfo(peak.dtype).tiny
    if bool(good_rows(peak, allow_zero_rows).all()):
        return
    if not bool(torch.isfinite(z).all()):
        raise ValueError(
            f"{name} contains NaN or inf; check the encoder (learning rate, fp16 overflow) before the loss"
        )
    flat = peak.flatten()
    subnormal = ((flat > 0) & (flat < tiny)).nonzero().flatten()[:5].tolist()
    if subnormal:
        raise ValueError(
            f"{name} has rows {subnormal} whose largest |entry| is below {str(peak.dtype).removeprefix('torch.')}'s "
            "smallest normal number "
            f"({tiny:.3g}): their direction has lost precision and their gradient overflows; scale the embeddings "
            "up (the loss is scale-invariant) or compute them in float64"
        )
    zero = (flat == 0).nonzero().flatten()[:5].tolist()
    raise ValueError(
        f"{name} has all-zero rows {zero}; a zero vector has no direction, so its cosine "
        "similarity is undefined. Remove those rows or fix the encoder output."
    )


def check_stacked_rows(z: torch.Tensor, peak: torch.Tensor, names: tuple[str, ...],
                       allow_zero_rows: bool = False) -> None:  # fmt: skip
    """:func:`check_rows` of views of one shape stacked as ``z`` (their rows' largest |entries| ``peak``), named
    ``names`` in order: the error names the first view with a bad row, as checking the views one by one would."""
    for view, view_peak, name in zip(z.chunk(len(names)), peak.chunk(len(names)), names, strict=True):
        check_rows(view, view_peak, name, allow_zero_rows)


def check_integer_labels(y: torch.Tensor, name: str) -> None:
    """Labels of an integer dtype (a float label cannot be compared for equality reliably)."""
    if y.is_floating_point() or y.is_complex():
        raise TypeError(f"{name} must hold integer labels, got dtype {y.dtype}; call {name}.long()")


#: how far from 1 a row's norm may be for :func:`check_unit_rows` (features normalised in bf16 are ~4e-3 off)
UNIT_NORM_TOLERANCE = 1e-2


def check_unit_rows(z: torch.Tensor, name: str) -> None:
    """Rows of unit L2 norm (features a model has normalised already), or one line naming the rows: a row of norm
    1e-14 or 1e30 would otherwise give cosines of 0 or inf without an error. One O(N D) pass."""
    with torch.no_grad():
        norms = torch.linalg.vector_norm(z.detach(), dim=1, dtype=torch.promote_types(z.dtype, torch.float32))
        bad = ~((norms - 1).abs() <= UNIT_NORM_TOLERANCE)  # NaN norms are bad too
        if bool(bad.any()):
            rows = bad.nonzero().flatten()[:5].tolist()
            shown = ", ".join(f"{v:.3g}" for v in norms[rows].tolist())
            raise ValueError(f"{name} must be L2-normalised (unit rows, as the model returns them): rows {rows} have "
                             f"norms {shown}; normalise them first (F.normalize({name}, dim=-1))")  # fmt: skip


def check_pair(
    z1: torch.Tensor,
    z2: torch.Tensor,
    names: tuple[str, str] = ("z1", "z2"),
    allow_zero_rows: bool = False,
    rows: bool = True,
) -> None:
    a, b = names
    check_embeddings(z1, a, allow_zero_rows, rows)
    check_embeddings(z2, b, allow_zero_rows, rows)
    if z1.shape != z2.shape:
        raise ValueError(
            f"{a} and {b} must have the same shape [N, D], got {tuple(z1.shape)} and "
            f"{tuple(z2.shape)}; row i of {b} must be the positive of row i of {a}"
        )
    check_same(z1, z2, names)


def check_same(x: torch.Tensor, y: torch.Tensor, names: tuple[str, str]) -> None:
    a, b = names
    if x.device != y.device:
        raise ValueError(f"{a} is on {x.device} but {b} is on {y.device}; move both to one device")
    if x.dtype != y.dtype:
        raise TypeError(f"{a} has dtype {x.dtype} but {b} has {y.dtype}; cast both to one dtype")


def check_feature_dim(x: torch.Tensor, dim: int, name: str, ref: str) -> None:
    if x.shape[1] != dim:
        raise ValueError(f"{name} must have {dim} features like {ref}, got shape {tuple(x.shape)}")


def check_similarity(sim: torch.Tensor, pos_mask: torch.Tensor, neg_mask: torch.Tensor | None) -> torch.Tensor:
    """Validate the ``from_similarity`` seam and return the effective negative mask."""
    if not isinstance(sim, torch.Tensor):
        raise TypeError(f"sim must be a torch.Tensor [A, M], got {type(sim).__name__}")
    if sim.dim() != 2:
        raise ValueError(f"sim must have shape [A, M] (anchors x candidates), got {tuple(sim.shape)}")
    if sim.numel() == 0:
        raise ValueError(f"sim has no entries (shape {tuple(sim.shape)}): a loss needs at least one anchor and one "
                         "candidate")  # fmt: skip
    if not sim.is_floating_point():
        raise TypeError(f"sim must be a floating tensor of cosine similarities, got {sim.dtype}")
    if pos_mask is None:
        raise TypeError("pos_mask is required: a bool tensor [A, M] marking each row's positives (e.g. "
                        "torch.eye(A, M, dtype=torch.bool) when row i's positive is column i)")  # fmt: skip
    for name, mask in (("pos_mask", pos_mask), ("neg_mask", neg_mask)):
        if mask is None:
            continue
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"{name} must be a bool torch.Tensor [A, M], got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            raise TypeError(f"{name} must have dtype torch.bool, got {mask.dtype}; use {name}.bool()")
        if mask.shape != sim.shape:
            raise ValueError(f"{name} must have the shape of sim {tuple(sim.shape)}, got {tuple(mask.shape)}")
        if mask.device != sim.device:
            raise ValueError(f"{name} is on {mask.device} but sim is on {sim.device}; move both to one device")
    with torch.no_grad():
        if not bool(torch.isfinite(sim).all()):
            raise ValueError("sim contains NaN or inf; pass raw cosine similarities in [-1, 1]")
        worst = float(sim.detach().abs().max())
        if worst > 1 + SIMILARITY_TOLERANCE:
            raise ValueError(
                f"sim must hold raw cosine similarities in [-1, 1] (not logits already divided "
                f"by a temperature), but |sim| reaches {worst:.4g}; L2-normalise the embeddings "
                "and do not divide by tau"
            )
    neg = ~pos_mask if neg_mask is None else neg_mask
    if neg_mask is not None and bool((pos_mask & neg_mask).any()):
        raise ValueError("pos_mask and neg_mask overlap; an entry cannot be both a positive and a negative")
    no_pos = ~pos_mask.any(dim=1)
    if bool(no_pos.any()):
        rows = no_pos.nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"rows {rows} of pos_mask have no positive; every anchor needs at least one positive "
            "(drop those rows from sim before calling)"
        )
    return neg  # a row without negatives is the loss's business (ContrastiveLoss.from_similarity)


def check_state_fits(module: torch.nn.Module, state_dict: Any, what: str, built_with: str) -> None:
    """Refuse, in one line saying what differs, a ``state_dict`` whose names or shapes are not ``module``'s (``what``
    it must be), before anything is loaded; ``built_with`` names what to build the module with instead."""
    if not hasattr(state_dict, "keys"):
        return  # nn.Module.load_state_dict says what it expects
    own = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    given = {k: tuple(getattr(v, "shape", ())) for k, v in state_dict.items()}
    if own != given:
        missing, unexpected = sorted(own.keys() - given.keys()), sorted(given.keys() - own.keys())
        shapes = [f"{k} {given[k]} for {own[k]}" for k in sorted(own.keys() & given.keys()) if own[k] != given[k]]
        raise ValueError(f"this state_dict is not {what} (missing {missing[:4]}, unexpected {unexpected[:4]}, shapes "
                         f"{shapes[:2]}): load it into {built_with} that saved it")  # fmt: skip
