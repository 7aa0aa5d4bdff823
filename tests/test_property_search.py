"""A seeded search over every strategy x layout x kernel x dtype with random shapes (0, 1 and ragged included) and
scales from float32's subnormal range to 1e30: each case either equals the float64 reference (value and
gradient; every loss is scale-invariant) or raises a one-line ValueError / TypeError. Never NaN, inf or another
exception. The cases a mistake would hit first are in the search, so a new strategy, layout or kernel is
searched the day it is registered."""

from __future__ import annotations

import random
import warnings

import pytest
import torch

import cl_plugins as clp

LAYOUTS = ("simclr", "cross_view", "grace", "queue")
KERNELS = ("dense", "fused", "stream")
SCALES = (1e-40, 1e-30, 1e-3, 1.0, 1e30)  # 1e-40: float32 subnormals, refused (their gradient overflows)
ROWS = (0, 1, 2, 3, 7, 16)


def _cases(count: int = 240, seed: int = 49) -> list[tuple]:
    rng = random.Random(seed)
    names = clp.available_losses()
    return [(rng.choice(names), rng.choice(LAYOUTS), rng.choice(KERNELS), rng.choice((torch.float32, torch.float64)),
             rng.choice(SCALES), rng.choice(ROWS), rng.choice((1, 2, 5, 8)), rng.random() < 0.1, rng.randrange(10**6))
            for _ in range(count)]  # fmt: skip


def _build(name: str, layout: str, kernel: str, dim: int) -> torch.nn.Module | None:
    try:
        return clp.build_host_loss(name, host_tau=0.2, layout=layout, kernel=kernel, feature_dim=dim)
    except ValueError as err:  # a layout the strategy does not support: refused at construction, in one line
        assert "\n" not in str(err) and "layout" in str(err)
        return None


def _degenerate(name: str, dtype: torch.dtype, scale: float, dim: int) -> bool:
    """Cases finite but not comparable with float64. With D = 1 every cosine is exactly +-1 (AMCL: every projection
    lies on one line), where temperature-free's 2 atanh(s) is its clamp's (a dtype's epsilon); with D = 2 in float32
    near-parallel rows are common, and 2 atanh(s) turns the rounding of s near 1 into whole units of logit. AMCL's
    float32 heads map rows of 1e-30 onto their biases alone: every row is the same vector, which only float64 still
    tells apart."""
    if name == "temperature_free":
        return dim == 1 or (dtype == torch.float32 and dim == 2)
    return name == "amcl" and (dim == 1 or (dtype == torch.float32 and scale < 1e-20))


def _call(loss_fn, z1, z2, queue):  # noqa: ANN001, ANN202
    torch.manual_seed(0)  # AMCL's heads
    value = loss_fn(z1, z2, **({"queue": queue} if queue is not None else {}))
    return value, torch.autograd.grad(value, (z1, z2), allow_unused=True)


@pytest.mark.parametrize("name,layout,kernel,dtype,scale,n,dim,ragged,seed", _cases())
def test_the_reference_value_or_one_clear_line(name, layout, kernel, dtype, scale, n, dim, ragged, seed):
    warnings.simplefilter("ignore")  # AMCL's opt-in forms warn at construction
    torch.manual_seed(0)
    loss_fn = _build(name, layout, kernel, dim)
    if loss_fn is None:
        return
    g = torch.Generator().manual_seed(seed)
    base = [torch.randn(n, dim, generator=g, dtype=torch.float64) for _ in range(2)]
    if ragged:
        base[1] = base[1][: max(n - 1, 0)] if n else torch.randn(1, dim, generator=g, dtype=torch.float64)
    queue = torch.randn(5, dim, generator=g, dtype=torch.float64) if layout == "queue" else None
    z_in = [(x * scale).to(dtype) for x in base]
    z1, z2 = (x.clone().requires_grad_() for x in z_in)
    try:
        value, grads = _call(loss_fn.to(dtype), z1, z2, None if queue is None else queue.to(dtype))
    except (ValueError, TypeError) as err:
        assert "\n" not in str(err).strip(), str(err)
        underflow = dtype == torch.float32 and scale == 1e-40 and name != "amcl"
        assert ragged or n < 2 or underflow or (layout == "grace" and n < 2), f"refused a valid case: {err}"
        return
    assert not ragged and n >= 1, "a ragged or empty batch was accepted"
    assert torch.isfinite(value) and all(g is None or torch.isfinite(g).all() for g in grads)
    if _degenerate(name, dtype, scale, dim):
        return
    # the same inputs in float64 (AMCL's heads make it scale-dependent; every other strategy is scale-invariant)
    ref_value, ref_grads = _call(loss_fn.double(), *(x.to(dtype).double().requires_grad_() for x in z_in),
                                 None if queue is None else queue.to(dtype).double())  # fmt: skip
    tol = 1e-9 if dtype == torch.float64 else 2e-4
    torch.testing.assert_close(value.double(), ref_value, rtol=tol, atol=tol)
    # temperature-free's 2 atanh(s) has derivative 2 / (1 - s^2): float32's rounding of s near 1 costs gradient
    # digits in proportion (up to 1.6% of the largest entry here, with D = 2 making near-parallel rows common)
    gtol = tol * (100 if name == "temperature_free" and dtype == torch.float32 else 10)
    for got, ref in zip(grads, ref_grads, strict=True):
        if ref is not None:
            torch.testing.assert_close(got.double(), ref, rtol=gtol, atol=gtol * float(ref.abs().max()))
