"""Parity of the graph patches with the original loss formulas, and of PyGCLLoss with the real PyGCL."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("torch_geometric")

from integrations.graph.patch import (  # noqa: E402
    PyGCLLoss,
    grace_semi_loss,
    patch_grace,
    patch_graphcl_transfer,
    patch_graphcl_tu,
)


def graphcl_reference(x: torch.Tensor, x_aug: torch.Tensor, tau: float) -> torch.Tensor:
    """GraphCL's loss_cal / loss_cl, written from the formula: -log(pos / (rowsum - pos)), mean."""
    sim = (x / x.norm(dim=1, keepdim=True)) @ (x_aug / x_aug.norm(dim=1, keepdim=True)).T
    e = torch.exp(sim / tau)
    pos = e.diagonal()
    return -torch.log(pos / (e.sum(1) - pos)).mean()


def grace_semi_reference(h1: torch.Tensor, h2: torch.Tensor, tau: float) -> torch.Tensor:
    """GRACE's semi_loss from the formula: f(s12)_ii / (sum f(s11)_i. + sum f(s12)_i. - f(s11)_ii)."""
    a, b = F.normalize(h1), F.normalize(h2)
    refl, between = torch.exp(a @ a.T / tau), torch.exp(a @ b.T / tau)
    return -torch.log(between.diagonal() / (refl.sum(1) + between.sum(1) - refl.diagonal()))


def _pair(n: int = 12, d: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, d, generator=g, dtype=torch.float64).requires_grad_(),
        torch.randn(n, d, generator=g, dtype=torch.float64).requires_grad_(),
    )


def _check(ours: torch.Tensor, ref: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> None:
    g_ours = torch.autograd.grad(ours, inputs)
    g_ref = torch.autograd.grad(ref, inputs)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "patch, method, tau", [(patch_graphcl_tu, "loss_cal", 0.2), (patch_graphcl_transfer, "loss_cl", 0.1)]
)
def test_graphcl_patches_match_the_original_formula(patch, method, tau):
    host = type("Host", (), {})
    patch(host, "infonce")
    x, x_aug = _pair()
    ours = getattr(host(), method)(x, x_aug)
    _check(ours, graphcl_reference(x, x_aug, tau), (x, x_aug))
    # GraphCL's loss can be negative (positive out of the denominator, issues #23 / #50)
    close = x.detach() + 1e-3 * torch.randn_like(x)
    assert float(getattr(host(), method)(x.detach(), close)) < 0


def test_graphcl_patch_runs_other_strategies():
    host = type("Host", (), {})
    loss_fn = patch_graphcl_tu(host, "macl", alpha=0.5, a0=0.0)
    x, x_aug = _pair()
    value = host().loss_cal(x, x_aug)
    alignment = float(F.cosine_similarity(x, x_aug).mean())
    assert torch.isfinite(value)
    assert loss_fn.stats["tau_mean"] == pytest.approx(0.2 * (1 + 0.5 * alignment))  # τ0 = GraphCL's 0.2


class GraceModel(torch.nn.Module):
    """The shape of GRACE's Model seen by the patch: tau, projection (fc1 -> ELU -> fc2)."""

    def __init__(self, tau: float) -> None:
        super().__init__()
        self.tau = tau
        self.fc1, self.fc2 = torch.nn.Linear(8, 16).double(), torch.nn.Linear(16, 8).double()

    def projection(self, z: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.elu(self.fc1(z)))


@pytest.mark.parametrize("mean", [True, False])
def test_grace_patch_matches_the_original_formula(mean):
    class Model(GraceModel):
        pass

    patch_grace(Model, "infonce")
    model = Model(tau=0.4)
    z1, z2 = _pair(10)
    h1, h2 = model.projection(z1), model.projection(z2)
    ref = (grace_semi_reference(h1, h2, 0.4) + grace_semi_reference(h2, h1, 0.4)) * 0.5
    ref = ref.mean() if mean else ref.sum()
    _check(model.loss(z1, z2, mean=mean), ref, (z1, z2))
    a, b = _pair(10, seed=3)
    _check(model.semi_loss(a, b).sum(), grace_semi_reference(a, b, 0.4).sum(), (a, b))


def test_grace_patch_follows_self_tau_and_temperature_free_is_finite():
    class Model(GraceModel):
        pass

    factory = patch_grace(Model, "infonce")
    z1, z2 = _pair(10)
    for tau in (0.4, 0.9):
        model = Model(tau)
        h1, h2 = model.projection(z1), model.projection(z2)
        ref = ((grace_semi_reference(h1, h2, tau) + grace_semi_reference(h2, h1, tau)) * 0.5).mean()
        torch.testing.assert_close(model.loss(z1, z2), ref, rtol=1e-10, atol=1e-12)
    assert set(factory.modules) == {0.4, 0.9}

    class Free(GraceModel):
        pass

    patch_grace(Free, "temperature_free")
    value = Free(0.4).loss(z1, z2)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(z1.grad).all()


def test_grace_semi_loss_equals_half_of_the_grace_layout():
    import cl_plugins as clp

    loss_fn = clp.build_loss("macl", layout="grace", reduction="none", tau0=0.4, gather_distributed=False)
    a, b = _pair(9, seed=5)
    full = loss_fn(a, b)
    one_way = clp.build_loss("infonce", tau=0.4, reduction="none")
    torch.testing.assert_close(grace_semi_loss(one_way, a, b), grace_semi_reference(a, b, 0.4))
    assert full.shape == (18,)


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
