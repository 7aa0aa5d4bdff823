"""A per-pair map stated once: every per-pair strategy of the registry builds its kernels' forms from one
statement (the torch forms and the Triton form are the same code), and the two forms give the float64
reference's values (Triton under its interpreter)."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.base import ContrastiveLoss
from cl_plugins.kernels import triton_jit
from cl_plugins.kernels.statement import LogitStatement
from cl_plugins.losses.dystress import PROFILES
from tests import reference

PER_PAIR = [n for n in clp.available_losses() if clp.get_loss_class(n).logit_map is not ContrastiveLoss.logit_map]
DYSTRESS = [{"profile": p} for p in PROFILES if p != "shifted"] + [
    {"profile": "shifted", "shift": -0.4, "scale": 0.7}, {"profile": "shifted", "shift": 0.3, "scale": 1.2}]


def _statement(loss: torch.nn.Module) -> LogitStatement:
    logit_map = loss.logit_map(None)  # type: ignore[operator]
    assert logit_map.statement is not None, f"{loss} states its map more than once"
    if triton_jit.available():
        assert logit_map.triton is not None and logit_map.triton.function is logit_map.statement.triton
    return logit_map.statement


@pytest.mark.parametrize("name", PER_PAIR)
def test_every_per_pair_strategy_states_its_map_once(name: str) -> None:
    statement = _statement(clp.build_loss(name))
    code = statement.source.__code__
    assert statement.torch.__code__ is code and statement.through.__code__ is code
    if triton_jit.available():
        assert statement.triton.fn.__code__ is code  # the jitted form is the same source


def _cosines(dtype: torch.dtype) -> torch.Tensor:
    s = torch.rand(61, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1
    edges = torch.tensor([-1.0, 1.0, 0.0, 0.4, -0.4, -0.3, 0.999], dtype=torch.float64)
    return torch.cat([s, edges]).to(dtype)


def _expected(name: str, options: dict, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logit, its derivative at sg(tau)) in float64 from the formulas of tests/reference.py, at the cosines ``s``
    (clamped in their own dtype: float32 rounds the clamp's bounds)."""
    if name == "temperature_free":
        c = s.clamp(-1 + 1e-6, 1 - 1e-6).double()
        inside, s = c == s.double(), s.double()
        return torch.log((1 + c) / (1 - c)), torch.where(inside, 2 / (1 - c * c), 0.0)
    args = (options.get("tau_min", 0.07), options.get("tau_max", 0.2), options["profile"],
            options.get("shift", 0.0), options.get("scale", 1.0))  # fmt: skip
    tau = torch.tensor([reference.dystress_tau(float(v), *args) for v in s], dtype=torch.float64)
    return s / tau, 1 / tau


CASES = [("temperature_free", {})] + [("dystress", o) for o in DYSTRESS]


@pytest.mark.parametrize(("name", "options"), CASES, ids=str)
def test_the_torch_form_equals_the_reference_in_float64(name: str, options: dict) -> None:
    loss = clp.build_loss(name, **options)
    logit_map = loss.logit_map(None)
    s = _cosines(torch.float64)
    phi, slope = logit_map.with_derivative(s)
    expected = _expected(name, options, s)
    torch.testing.assert_close(phi, expected[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(slope, expected[1], rtol=1e-10, atol=1e-12)


if triton_jit.available():
    tl, triton = triton_jit.tl, triton_jit.triton

    @triton.jit
    def _apply(x_ptr, phi_ptr, slope_ptr, n, MAP: tl.constexpr, P, MC: tl.constexpr, B: tl.constexpr):
        i = tl.arange(0, B)
        x = tl.load(x_ptr + i, mask=i < n, other=0.0)
        phi, slope, _ = MAP(x, P, MC)
        tl.store(phi_ptr + i, phi, mask=i < n)
        tl.store(slope_ptr + i, slope, mask=i < n)


@pytest.mark.skipif(not triton_jit.usable_on(torch.device("cpu")), reason="Triton's interpreter is not on")
@pytest.mark.parametrize(("name", "options"), CASES, ids=str)
def test_the_triton_form_equals_the_reference(name: str, options: dict) -> None:
    """The jitted form of the same statement, on a block of float32 cosines: the reference's values to float32
    rounding (its sine is a polynomial within 6e-8)."""
    form = clp.build_loss(name, **options).logit_map(None).triton
    s = _cosines(torch.float32)
    phi, slope = torch.empty_like(s), torch.empty_like(s)
    params = tuple(float(v) for v in form.params) or (0.0,)
    _apply[(1,)](s, phi, slope, s.shape[0], form.function, params, form.constant, 128)
    expected = _expected(name, options, s)
    torch.testing.assert_close(phi.double(), expected[0], rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(slope.double(), expected[1], rtol=2e-6, atol=2e-6)
