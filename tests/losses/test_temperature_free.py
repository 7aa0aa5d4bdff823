"""Temperature-free's map stated once: its logit, derivative and closed-form exponential against float64 formulas,
at the clamp's bounds and beyond them."""

from __future__ import annotations

import torch

from cl_plugins.losses import temperature_free

LO, HI = -1 + 1e-6, 1 - 1e-6


def _cosines() -> torch.Tensor:
    s = torch.rand(2000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1
    edges = [-1.0, 1.0, LO, HI, -1 + 1e-7, 1 - 1e-7, 1 - 1e-3, 0.0, -0.999]
    return torch.cat([s, torch.tensor(edges, dtype=torch.float64)])


def test_the_statement_equals_the_formulas_in_float64() -> None:
    s = _cosines()
    c = s.clamp(LO, HI)
    inside = (s >= LO) & (s <= HI)
    phi, slope, _ = temperature_free._map(s, (LO, HI))
    torch.testing.assert_close(phi, 2 * torch.atanh(c), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(slope, torch.where(inside, 2 / (1 - c * c), 0.0), rtol=1e-10, atol=0)
    e, factor, _ = temperature_free._map(s, (LO, HI), 0, True)
    torch.testing.assert_close(e, (1 + c) / (1 - c), rtol=1e-12, atol=1e-15)  # 2 r - 1 near c = -1
    torch.testing.assert_close(factor, torch.where(inside, 2 / (1 - c) ** 2, 0.0), rtol=1e-10, atol=0)


def test_float32_near_one_keeps_its_precision() -> None:
    """1 - c^2 as (1 - c)(1 + c): no cancellation at cosines near +-1 in float32."""
    s = torch.tensor([0.999, 0.9999, 0.99999, -0.9999, 0.5], dtype=torch.float32)
    phi, slope, _ = temperature_free._map(s, (LO, HI))
    exact = s.double()
    torch.testing.assert_close(phi.double(), 2 * torch.atanh(exact), rtol=2e-6, atol=0)
    torch.testing.assert_close(slope.double(), 2 / (1 - exact**2), rtol=2e-6, atol=0)


def test_the_effective_inverse_temperature() -> None:
    s = torch.tensor([0.0, 1e-8, 0.5, -0.5], dtype=torch.float64)
    half = 2 * torch.atanh(torch.tensor(0.5, dtype=torch.float64)) / 0.5
    expected = torch.stack([torch.tensor(2.0, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64), half, half])
    torch.testing.assert_close(temperature_free.effective_inverse_tau(s), expected, rtol=1e-12, atol=1e-12)
