"""The core never returns a silently wrong number: seeded property search over strategies × layouts × dtypes ×
input scales (finite, fused = unfused, invariant to the scale of the embeddings), and the refusals."""

from __future__ import annotations

import random

import pytest
import torch

import cl_plugins as clp

# AMCL's heads (with biases) act on the backbone features, so scaling those changes its projections' directions;
# scaling its projections changes nothing (tests/losses/test_amcl.py, property b)
INVARIANT = [n for n in clp.available_losses() if clp.get_loss_class(n).feature_dim_arg is None]
LAYOUTS = ["simclr", "cross_view", "queue"]
SCALES = {torch.float64: [1e-150, 1e-14, 1.0, 1e20, 1e150], torch.float32: [1e-30, 1e-13, 1.0, 1e18, 1e30]}


def _cases(count: int = 40, seed: int = 1234) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        dtype = rng.choice([torch.float64, torch.float32])
        out.append((rng.choice(INVARIANT), rng.choice(LAYOUTS), dtype, rng.choice(SCALES[dtype]), rng.randint(2, 9),
                    rng.randint(1, 6), rng.randrange(10**6)))  # fmt: skip
    return out


def _loss(name, layout, dtype, z1, z2, queue, kernel="auto"):
    loss_fn = clp.build_host_loss(name, host_tau=0.1, layout=layout, kernel=kernel).to(dtype)
    value = loss_fn(z1, z2, **({"queue": queue} if layout == "queue" else {}))
    return value, torch.autograd.grad(value, (z1, z2), allow_unused=True)


@pytest.mark.parametrize("name,layout,dtype,scale,n,d,seed", _cases())
def test_finite_equal_to_the_unfused_path_and_scale_invariant(name, layout, dtype, scale, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    base = [torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(2)]
    queue = torch.randn(7, d, generator=g, dtype=dtype)
    rtol = 1e-10 if dtype == torch.float64 else 2e-4
    ref_value, ref_grads = _loss(name, layout, dtype, *(x.to(dtype).requires_grad_() for x in base), queue)
    z1, z2 = ((x * scale).to(dtype).requires_grad_() for x in base)
    for kernel in ("auto", "dense"):
        value, grads = _loss(name, layout, dtype, z1, z2, queue, kernel)
        assert torch.isfinite(value)
        torch.testing.assert_close(value, ref_value, rtol=rtol, atol=rtol)
        for got, ref in zip(grads, ref_grads, strict=True):
            if ref is not None:  # d loss / d z scales as 1 / scale
                atol = rtol * float(ref.abs().max())
                torch.testing.assert_close(got * scale, ref.to(got.dtype), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", [n for n in clp.available_losses() if clp.get_loss_class(n).scalar_temperature])
def test_second_derivatives_are_refused_on_the_fused_path_and_finite_without_it(name):
    z1, z2 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True), torch.randn(5, 4, dtype=torch.float64)
    fused = clp.build_host_loss(name, host_tau=0.2).double()
    with pytest.raises(RuntimeError, match="second derivative"):
        torch.autograd.grad(fused(z1, z2), z1, create_graph=True)
    plain = clp.build_host_loss(name, host_tau=0.2, kernel="dense").double()
    (g,) = torch.autograd.grad(plain(z1, z2), z1, create_graph=True)
    (gg,) = torch.autograd.grad(g.square().sum(), z1)  # a gradient penalty
    assert torch.isfinite(gg).all() and gg.abs().sum() > 0


def test_amcl_projects_its_hard_negatives():
    """Two hard-negative sets that the head maps to the same projections must give the same loss, even when
    dim == proj_dim (the unprojected features differ)."""
    torch.manual_seed(0)
    loss_fn = clp.build_loss("amcl", dim=4, heads=1, proj_dim=4, hidden=4, layout="cross_view").double()
    head = loss_fn.heads[0]
    with torch.no_grad():
        head[0].weight.copy_(torch.eye(4))
        head[0].bias.zero_()
        head[2].bias.fill_(1.0)
    z1, z2 = torch.randn(6, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    hard_a, hard_b = -torch.rand(6, 4, dtype=torch.float64) - 0.1, -torch.rand(6, 4, dtype=torch.float64) - 0.1
    torch.testing.assert_close(loss_fn(z1, z2, hard_negatives=hard_a), loss_fn(z1, z2, hard_negatives=hard_b))
    with pytest.raises(ValueError, match="hard_negatives must have 4 features"):
        loss_fn(z1, z2, hard_negatives=torch.randn(6, 3, dtype=torch.float64))


def test_queue_refuses_non_finite_and_zero_keys_and_accepts_tiny_ones():
    queue = clp.FeatureQueue(8, 4, gather_distributed=False)
    for bad, match in ((torch.full((2, 4), float("nan")), "NaN"), (torch.zeros(2, 4), "all-zero rows")):
        with pytest.raises(ValueError, match=match):
            queue.enqueue(bad)
    keys = torch.randn(3, 4)
    queue.enqueue(keys * 1e-30)
    torch.testing.assert_close(queue.queue[:3], torch.nn.functional.normalize(keys, dim=1))


@pytest.mark.parametrize("value", [1e-40, 1e300, float("nan"), float("inf")])
@pytest.mark.parametrize("name", [n for n in clp.available_losses() if clp.get_loss_class(n).host_temperature(1.0)])
def test_temperatures_outside_the_usable_range_are_refused(name, value):
    with pytest.raises(ValueError, match="must be a"):
        clp.build_host_loss(name, host_tau=value, feature_dim=8)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300])
def test_hard_negative_weight_must_be_finite(value):
    with pytest.raises(ValueError, match="hard_negative_weight must be a finite number"):
        clp.build_loss("infonce", layout="cross_view", hard_negative_weight=value)


def test_amcl_takes_all_zero_backbone_rows():
    """A ReLU encoder (GRACE's GCN) can output an all-zero row: AMCL's heads (with biases) still project it."""
    loss_fn = clp.build_loss("amcl", dim=4, heads=1, proj_dim=4, hidden=4)
    h1, h2 = torch.randn(5, 4), torch.randn(5, 4)
    h2[2] = 0.0
    assert torch.isfinite(loss_fn(h1, h2))
    with pytest.raises(ValueError, match="NaN or inf"):
        loss_fn(h1, h2 * float("nan"))


def test_normalisation_has_the_exact_second_derivative():
    """The custom unit-rows function against F.normalize, through a gradient penalty (double backward)."""
    from cl_plugins.layouts import unit_rows

    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, dtype=torch.float64)

    def penalty(f):  # type: ignore[no-untyped-def]
        (g,) = torch.autograd.grad((f(x) * w).sum() ** 2, x, create_graph=True)
        return torch.autograd.grad(g.pow(2).sum(), x)[0]

    ref = penalty(lambda t: torch.nn.functional.normalize(t, dim=1))
    torch.testing.assert_close(penalty(unit_rows), ref, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(unit_rows, (x,)) and torch.autograd.gradgradcheck(unit_rows, (x,))


@pytest.mark.parametrize("name", clp.available_losses())
def test_rows_below_the_smallest_normal_number_are_refused_in_one_line(name):
    """float32 rows of subnormal entries: a direction of a few bits and a gradient of 1 / |row| that overflows."""
    from cl_plugins.layouts import unit_rows

    z1, z2 = torch.randn(6, 8), torch.randn(6, 8)
    z1[3] *= 1e-39
    loss_fn = clp.build_host_loss(name, host_tau=0.2, feature_dim=8)
    if name == "amcl":  # its heads project the backbone rows first (biases map a tiny row somewhere)
        assert torch.isfinite(loss_fn(z1, z2))
        return
    with pytest.raises(ValueError, match=r"rows \[3\] whose largest \|entry\| is below float32's smallest normal"):
        loss_fn(z1, z2)
    torch.testing.assert_close(unit_rows(z1).norm(dim=1), torch.ones(6))  # unchecked rows still get unit norm
    assert torch.isfinite(loss_fn(z1.double(), z2.double()))  # float64 holds them as normal numbers
