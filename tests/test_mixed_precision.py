"""fp16 / bf16 autocast: no NaN or inf at tau = 0.02 or with atanh at s = +-1; fp32 internals."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.losses.amcl import FORMS

DTYPES = [torch.bfloat16, torch.float16]
# every registered strategy at a host τ of 0.02, and at each of its papers' presets (AMCL, whose heads need
# the feature width, has its own test below)
CONFIGS = [
    (name, dict(host_tau=0.02, **({"preset": preset} if preset else {})))
    for name in clp.available_losses()
    if clp.get_loss_class(name).feature_dim_arg is None
    for preset in (None, *clp.get_loss_class(name).presets)
]


def _model_and_views(dtype):
    torch.manual_seed(0)
    enc = torch.nn.Linear(16, 8)
    x = torch.randn(32, 16)
    return enc, x, x + 1e-3 * torch.randn_like(x)  # near-duplicate positives: P_pos -> 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
@pytest.mark.parametrize("layout", ["simclr", "cross_view"])
def test_autocast_is_finite(dtype, name, kwargs, layout):
    enc, x1, x2 = _model_and_views(dtype)
    loss_fn = clp.build_host_loss(name, layout=layout, **kwargs)
    clp.set_epoch_length(loss_fn, 10)  # the trainer's part (cosine_schedule's vision preset counts epochs)
    with torch.autocast("cpu", dtype=dtype):
        z1, z2 = enc(x1), enc(x2)
        assert z1.dtype == dtype
        loss = loss_fn(z1, z2)
    assert loss.dtype == torch.float32
    loss.backward()
    assert torch.isfinite(loss)
    for p in list(enc.parameters()) + list(loss_fn.parameters()):
        assert torch.isfinite(p.grad).all()
    assert all(v == v for v in loss_fn.stats.values())  # no NaN diagnostics


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.filterwarnings("ignore:amcl form")
def test_amcl_autocast_is_finite(dtype, form):
    torch.manual_seed(0)
    loss_fn = clp.build_loss("amcl", dim=16, heads=2, proj_dim=8, hidden=16, form=form)
    x = torch.randn(16, 16)
    with torch.autocast("cpu", dtype=dtype):
        loss = loss_fn(x, x + 1e-3 * torch.randn_like(x))
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in loss_fn.parameters())


@pytest.mark.parametrize("dtype", DTYPES + [torch.float32], ids=str)
def test_temperature_free_at_exact_plus_minus_one(dtype):
    """Identical positives (s = 1), antipodal negatives (s = -1) and self-pairs (s_ii = 1)."""
    z = torch.nn.functional.normalize(torch.randn(4, 8), dim=1)
    z1 = torch.cat([z, -z]).to(dtype).requires_grad_()
    z2 = z1.detach().clone().requires_grad_()
    loss_fn = clp.build_loss("temperature_free")
    for layout in ("simclr", "cross_view"):
        loss_fn.layout = layout
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = loss_fn(z1, z2)
        (g1, g2) = torch.autograd.grad(loss, (z1, z2))
        assert torch.isfinite(loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()


def test_half_inputs_computed_in_float32():
    """Similarity and logits are computed in float32 even for half inputs (bf16 quantises 1/tau)."""
    torch.manual_seed(1)
    z1, z2 = torch.randn(16, 8), torch.randn(16, 8)
    loss_fn = clp.build_loss("infonce", tau=0.02)
    ref = loss_fn(z1.bfloat16().float(), z2.bfloat16().float())
    ours = loss_fn(z1.bfloat16(), z2.bfloat16())
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
