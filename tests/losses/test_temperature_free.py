"""Temperature-free's closed form: the tiles where its clamp binds nowhere skip it, with the same bits."""

from __future__ import annotations

import torch

from cl_plugins.losses import temperature_free

LO, HI = -1 + 1e-6, 1 - 1e-6


def _clamped(s: torch.Tensor, grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The form with its clamp always applied: (1 + c) / (1 - c) and 2 / (1 - c)^2 inside [LO, HI], 0 outside."""
    c = s.clamp(LO, HI)
    r = torch.rsub(c, 1).reciprocal_()
    factor = torch.where(c == s, r.square() * 2, 0.0) if grad else None
    return r * 2 - 1, factor


def test_a_tile_inside_the_clamp_skips_it_with_the_same_bits() -> None:
    s = torch.rand(64, 96, generator=torch.Generator().manual_seed(0)) * 1.8 - 0.9
    assert temperature_free._inside(s, LO, HI)
    for grad in (False, True):
        ours, reference = temperature_free.closed_form(s, LO, HI, grad), _clamped(s, grad)
        assert torch.equal(ours[0], reference[0])
        assert (ours[1] is None) == (not grad) and (not grad or torch.equal(ours[1], reference[1]))


def test_a_tile_the_clamp_binds_in_keeps_it() -> None:
    s = torch.rand(8, 8, generator=torch.Generator().manual_seed(1)) * 1.8 - 0.9
    s[2, 3], s[5, 1] = 1.0, -1.0
    assert not temperature_free._inside(s, LO, HI)
    e, factor = temperature_free.closed_form(s, LO, HI, True)
    reference = _clamped(s, True)
    assert torch.equal(e, reference[0]) and torch.equal(factor, reference[1])
    assert factor[2, 3] == 0 and factor[5, 1] == 0  # the clamp passes no gradient
