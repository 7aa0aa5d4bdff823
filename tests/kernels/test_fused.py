"""The fused scalar-temperature path equals the dense path (values and gradients)."""

from __future__ import annotations

import pytest
import torch

import cl_plugins as clp
from cl_plugins.kernels import fused

# every registered strategy that only divides the cosine matrix by a scalar, at a host τ of 0.2
SCALAR = [(n, {}) for n in clp.available_losses() if clp.get_loss_class(n).scalar_temperature]
LAYOUTS = [("simclr", {}), ("cross_view", {"symmetric": True}), ("queue", {})]


@pytest.mark.parametrize("chunk", [7, 1 << 18], ids=["many-chunks", "one-chunk"])
@pytest.mark.parametrize("layout,extra", LAYOUTS, ids=[x[0] for x in LAYOUTS])
@pytest.mark.parametrize("name,kwargs", SCALAR, ids=[x[0] for x in SCALAR])
def test_fused_equals_dense(name, kwargs, layout, extra, chunk, monkeypatch):
    monkeypatch.setattr(fused, "CHUNK_ELEMENTS", chunk)
    torch.manual_seed(0)
    z1 = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    call = {"queue": torch.randn(9, 5, dtype=torch.float64)} if layout == "queue" else {}
    outs = []
    for kernel in ("fused", "dense"):
        loss_fn = clp.build_host_loss(name, host_tau=0.2, layout=layout, kernel=kernel, **extra, **kwargs).double()
        loss = loss_fn(z1, z2, **call)
        params = [z1, z2, *loss_fn.parameters()]
        outs.append((loss.detach(), torch.autograd.grad(loss, params), loss_fn.stats))
    (l1, g1, s1), (l2, g2, s2) = outs
    torch.testing.assert_close(l1, l2, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert s1.keys() == s2.keys()
    for k in s1:
        assert s1[k] == pytest.approx(s2[k], rel=1e-9, abs=1e-12), k


def test_fused_backward_twice_is_refused():
    loss = clp.build_loss("infonce")(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="kernel='dense'"):
        loss.backward()
    dense = clp.build_loss("infonce", kernel="dense")(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3))
    dense.backward(retain_graph=True)
    dense.backward()


def test_non_scalar_strategies_do_not_use_the_fused_path():
    for name in ("dystress", "temperature_free", "amcl"):
        assert not clp.get_loss_class(name).scalar_temperature
