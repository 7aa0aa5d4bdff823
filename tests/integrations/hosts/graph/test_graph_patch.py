"""The graph patches on the real upstream code (GraphCL TU and transfer, GRACE) and on the real PyGCL.

Float64: with ``infonce`` at the host's τ, loss and every parameter gradient of the patched model equal
the unpatched model's. GraphCL's transfer GNN (Hu et al.'s, old PyG ``propagate`` API) does not run on
PyG 2.x, so that test puts a small GNN into the real ``graphcl`` host class; the seam is the host's.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch

pytest.importorskip("torch_geometric")

import cl_plugins as clp  # noqa: E402
from cl_plugins.integrations.hosts.graph.patch import (  # noqa: E402
    PyGCLLoss,
    grace_semi_loss,
    patch_grace,
    patch_graphcl_transfer,
    patch_graphcl_tu,
    patch_pygcl,
)
from tests.integrations import upstream  # noqa: E402


def _graphs(num_graphs=4, nodes=5, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = num_graphs * nodes
    x = torch.randn(n, features, generator=g, dtype=torch.float64)
    ring = torch.arange(nodes)
    edges = torch.cat([torch.stack([ring + k * nodes, (ring + 1) % nodes + k * nodes]) for k in range(num_graphs)], 1)
    edge_index = torch.cat([edges, edges.flip(0)], 1)
    batch = torch.arange(num_graphs).repeat_interleave(nodes)
    return x, edge_index, batch


def _grads(model, loss):
    params = [p for n, p in model.named_parameters() if not n.startswith("cl_plugins_loss.")]
    return loss.detach(), torch.autograd.grad(loss, params, allow_unused=True)


def assert_same(a, b, rtol=1e-10):
    torch.testing.assert_close(a[0], b[0], rtol=rtol, atol=1e-12)
    for x, y in zip(a[1], b[1], strict=True):
        assert (x is None) == (y is None)
        if x is not None:
            torch.testing.assert_close(x, y, rtol=rtol, atol=1e-12)


def graphcl_tu_step(model):
    x, ei, batch = _graphs()
    y1 = model(x, ei, batch, 4)
    y2 = model(x + 0.1 * torch.cos(3 * x), ei[:, 2:], batch, 4)  # a feature-perturbed, edge-dropped view
    return model.loss_cal(y1, y2)


def test_graphcl_tu_patch_reproduces_loss_cal():
    gsimclr = upstream.graphcl_tu()
    torch.manual_seed(0)
    model = gsimclr.simclr(hidden_dim=8, num_gc_layers=2).double()
    original = _grads(model, graphcl_tu_step(model))
    with patch_graphcl_tu(model, "infonce") as handle:
        assert model.cl_plugins_loss.tau == 0.2 and model.cl_plugins_loss.decoupled
        assert_same(_grads(model, graphcl_tu_step(model)), original)
        torch.manual_seed(0)
        built_after = gsimclr.simclr(hidden_dim=8, num_gc_layers=2).double()
        assert_same(_grads(built_after, graphcl_tu_step(built_after)), original)
        assert len(handle.losses) == 2
    assert "loss_cal" in vars(gsimclr.simclr) and not hasattr(model, "cl_plugins_loss")
    # GraphCL's loss can be negative (positive out of the denominator, issues #23 / #50)
    x = torch.randn(6, 8, dtype=torch.float64)
    with patch_graphcl_tu(gsimclr.simclr, "infonce"):
        assert float(model.loss_cal(x, x + 1e-3 * torch.randn_like(x))) < 0


class StandInGNN(torch.nn.Module):
    """A GNN of the width GraphCL's transfer head expects (300), for the real ``graphcl`` host class."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(5, 300)

    def forward(self, x, edge_index, edge_attr):
        h = torch.tanh(self.embed(x))
        return h + torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]]) * 0.5


def graphcl_transfer_step(model):
    x, ei, batch = _graphs()
    y1 = model.forward_cl(x, ei, None, batch)
    y2 = model.forward_cl(x * 0.9, ei[:, 3:], None, batch)
    return model.loss_cl(y1, y2)


def test_graphcl_transfer_patch_reproduces_loss_cl():
    pretrain = upstream.graphcl_transfer()
    torch.manual_seed(0)
    model = pretrain.graphcl(StandInGNN()).double()
    original = _grads(model, graphcl_transfer_step(model))
    with patch_graphcl_transfer(model, "infonce"):
        assert model.cl_plugins_loss.tau == 0.1
        assert_same(_grads(model, graphcl_transfer_step(model)), original)


def grace_model(tau=0.4, seed=0):
    grace = upstream.grace()
    torch.manual_seed(seed)
    encoder = grace.Encoder(5, 8, torch.nn.PReLU(), k=2)
    return grace.Model(encoder, num_hidden=8, num_proj_hidden=12, tau=tau).double()


def grace_step(model, mean=True, batch_size=0):
    x, ei, _ = _graphs(num_graphs=2)
    z1 = model(x, ei)
    z2 = model(x * torch.linspace(0.5, 1.5, 5, dtype=torch.float64), ei[:, 4:])
    return model.loss(z1, z2, mean=mean, batch_size=batch_size)


@pytest.mark.parametrize("tau", [0.4, 0.9])
@pytest.mark.parametrize("mean", [True, False])
@pytest.mark.parametrize("batch_size", [0, 3])  # 3: GRACE's batched_semi_loss, blocks of 3 of 10 nodes
def test_grace_patch_reproduces_the_original(tau, mean, batch_size):
    model = grace_model(tau)
    original = _grads(model, grace_step(model, mean, batch_size))
    with patch_grace(model, "infonce"):
        assert model.cl_plugins_loss.tau == tau
        assert_same(_grads(model, grace_step(model, mean, batch_size)), original)
        a, b = torch.randn(7, 8, dtype=torch.float64), torch.randn(7, 8, dtype=torch.float64)
        patched_semi = model.semi_loss(a, b)
    torch.testing.assert_close(patched_semi, model.semi_loss(a, b), rtol=1e-10, atol=1e-12)


def test_grace_built_after_the_patch_and_temperature_free_is_finite():
    grace = upstream.grace()
    with patch_grace(grace.Model, "temperature_free"):
        model = grace_model()
        value = grace_step(model)
        value.backward()
        assert isinstance(model.cl_plugins_loss, clp.TemperatureFreeLoss) and torch.isfinite(value)
    with pytest.raises(ValueError, match="reduction"):
        patch_grace(grace.Model, clp.build_loss("infonce", layout="grace"))


def test_grace_semi_loss_equals_half_of_the_grace_layout():
    loss_fn = clp.build_loss("infonce", tau=0.4, reduction="none")
    a, b = torch.randn(9, 4, dtype=torch.float64), torch.randn(9, 4, dtype=torch.float64)
    full = clp.build_loss("infonce", tau=0.4, layout="grace", reduction="none")(a, b)
    torch.testing.assert_close(grace_semi_loss(loss_fn, a, b), full[:9])
    torch.testing.assert_close(grace_semi_loss(loss_fn, a, b, slice(3, 6)), full[3:6])


def _pair(n: int = 12, d: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randn(n, d, generator=g, dtype=torch.float64)


# ---------------------------------------------------------------------------- the real PyGCL
@functools.lru_cache(maxsize=1)
def _import_pygcl():
    """PyGCL 0.1.2's loss and contrast modules, without its package __init__ (which imports dgl)."""
    spec = importlib.util.find_spec("GCL")
    if spec is None or spec.submodule_search_locations is None:
        pytest.skip("PyGCL is not installed (scripts/setup.sh installs pygcl==0.1.2 --no-deps)")
    saved = {k: v for k, v in sys.modules.items() if k == "GCL" or k.startswith("GCL.")}
    for k in saved:
        del sys.modules[k]
    package = types.ModuleType("GCL")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["GCL"] = package
    if "torch_scatter" not in sys.modules:  # compiled extension without wheels here; samplers import scatter
        from torch_geometric.utils import scatter

        shim = types.ModuleType("torch_scatter")
        shim.scatter = scatter
        sys.modules["torch_scatter"] = shim
    losses = importlib.import_module("GCL.losses.infonce")
    models = importlib.import_module("GCL.models.contrast_model")
    assert Path(losses.__file__).name == "infonce.py"
    return losses, models


@pytest.mark.parametrize("mode, intraview_negs", [("L2L", True), ("L2L", False), ("G2G", False)])
def test_pygcl_loss_object_matches_pygcl_infonce(mode, intraview_negs):
    losses, models = _import_pygcl()
    h1, h2 = (t.float() for t in _pair(16))
    keys = ("h1", "h2") if mode == "L2L" else ("g1", "g2")
    theirs = models.DualBranchContrast(losses.InfoNCE(tau=0.2), mode=mode, intraview_negs=intraview_negs)
    ours = models.DualBranchContrast(
        PyGCLLoss("infonce", tau=0.2, exclude_self=False), mode=mode, intraview_negs=intraview_negs
    )
    a, b = h1.detach().requires_grad_(), h2.detach().requires_grad_()
    ref = theirs(**{keys[0]: a, keys[1]: b})
    ga = torch.autograd.grad(ref, (a, b))
    c, d = h1.detach().requires_grad_(), h2.detach().requires_grad_()
    val = ours(**{keys[0]: c, keys[1]: d})
    gb = torch.autograd.grad(val, (c, d))
    torch.testing.assert_close(val, ref, rtol=1e-5, atol=1e-6)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_pygcl_exclude_self_gives_grace():
    import cl_plugins as clp

    _, models = _import_pygcl()
    h1, h2 = (t.float() for t in _pair(16))
    contrast = models.DualBranchContrast(PyGCLLoss("temperature_free"), mode="L2L", intraview_negs=True)
    value = contrast(h1=h1, h2=h2)
    grace = clp.build_loss("temperature_free", layout="grace")(h1, h2)
    torch.testing.assert_close(value, grace, rtol=1e-5, atol=1e-6)
    with_self = models.DualBranchContrast(PyGCLLoss("infonce", tau=0.2), mode="L2L", intraview_negs=True)
    torch.testing.assert_close(with_self(h1=h1, h2=h2), clp.build_loss("infonce", tau=0.2, layout="grace")(h1, h2))


def test_patch_pygcl_replaces_the_loss_object_and_undoes():
    losses, models = _import_pygcl()
    original = losses.InfoNCE(tau=0.2)
    contrast = models.DualBranchContrast(original, mode="L2L", intraview_negs=False)
    h1, h2 = (t.float() for t in _pair(16))
    ref = contrast(h1=h1, h2=h2)
    with patch_pygcl(contrast, "learnable") as handle:
        assert contrast.cl_plugins_loss.tau.item() == pytest.approx(0.2)  # PyGCL's tau is the host τ
        assert any(n.startswith("cl_plugins_loss.") for n, _ in contrast.named_parameters())
        torch.testing.assert_close(contrast(h1=h1, h2=h2), ref, rtol=1e-5, atol=1e-6)
        assert handle.losses == [contrast.cl_plugins_loss]
    assert contrast.loss is original and not hasattr(contrast, "cl_plugins_loss") and not list(contrast.parameters())
