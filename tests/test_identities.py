"""The papers' identities and limits, checked on the library itself."""

from __future__ import annotations

import math

import pytest
import torch

import cl_plugins as clp


def _single_positive(a: int, m: int, seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    sim = (torch.rand(a, m, generator=g, dtype=dtype) * 1.8 - 0.9).requires_grad_()
    pos = torch.zeros(a, m, dtype=torch.bool)
    pos[torch.arange(a), torch.arange(a) % m] = True
    return sim, pos


def _w_from_stats(loss_fn, sim, pos) -> float:
    loss_fn.from_similarity(sim, pos)
    return loss_fn.stats["w_mean"]


def test_macl_reweighting_gives_unit_positive_gradient():
    """With V = sg(1 / (1 - P)), dL/dlogit_pos = -1 and dL/dlogit_neg = q_j (softmax over negatives)."""
    sim, pos = _single_positive(6, 9)
    tau = 0.2
    loss_fn = clp.build_loss("macl", tau0=tau, alpha=0.0, reduction="sum")
    (grad,) = torch.autograd.grad(loss_fn.from_similarity(sim, pos), sim)
    grad_logits = grad * tau  # logit = s / tau with tau detached
    torch.testing.assert_close(grad_logits[pos], -torch.ones(6, dtype=torch.float64))
    q = torch.softmax((sim / tau).masked_fill(pos, -math.inf), dim=1)
    torch.testing.assert_close(grad_logits[~pos], q[~pos].detach())


def test_macl_reweighted_gradient_equals_dcl_and_flatnce():
    sim, pos = _single_positive(5, 8, seed=1)
    grads = []
    for name, kw in [("macl", dict(tau0=0.3, alpha=0.0)), ("dcl", dict(tau=0.3)), ("flatnce", dict(tau=0.3))]:
        loss = clp.build_loss(name, **kw).from_similarity(sim, pos)
        grads.append(torch.autograd.grad(loss, sim)[0])
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(grads[2], grads[1])


def test_flatnce_value_is_one():
    sim, pos = _single_positive(5, 8, seed=2)
    loss_fn = clp.build_loss("flatnce", tau=0.2)
    assert loss_fn.from_similarity(sim, pos).detach().item() == pytest.approx(1.0)
    expected = clp.build_loss("infonce", tau=0.2).from_similarity(sim, pos)
    assert loss_fn.stats["infonce"] == pytest.approx(expected.detach().item())


def test_gradient_scaling_factor_tends_to_one_as_k_grows():
    """MACL Proposition 1: W_i -> 1 as K -> infinity (W < 1 for every finite K)."""
    ws = []
    for k in (4, 64, 1024, 16384):
        g = torch.Generator().manual_seed(k)
        sim = torch.cat(
            [torch.full((1, 1), 0.9, dtype=torch.float64), torch.rand(1, k, generator=g, dtype=torch.float64) * 2 - 1],
            dim=1,
        )
        pos = torch.zeros_like(sim, dtype=torch.bool)
        pos[0, 0] = True
        ws.append(_w_from_stats(clp.build_loss("infonce", tau=0.2), sim, pos))
    assert all(a < b for a, b in zip(ws, ws[1:])), ws
    assert all(w < 1 for w in ws)
    assert ws[-1] > 0.99


@pytest.mark.parametrize("k", [1, 5, 50])
def test_gradient_scaling_factor_tends_to_k_over_k_plus_one_as_tau_grows(k):
    """MACL Proposition 2: W_i -> K / (K + 1) as tau -> infinity (paper's extreme example too)."""
    sim = torch.cat([torch.ones(1, 1), -torch.ones(1, k)], dim=1).double()
    pos = torch.zeros_like(sim, dtype=torch.bool)
    pos[0, 0] = True
    w_large = _w_from_stats(clp.build_loss("infonce", tau=1e6), sim, pos)  # the largest temperature allowed
    assert w_large == pytest.approx(k / (k + 1), rel=1e-5)
    w_small = _w_from_stats(clp.build_loss("infonce", tau=0.1), sim, pos)
    assert w_small < w_large  # monotone in tau for this (well-aligned) batch


def test_dual_temperature_equals_infonce_when_taus_match():
    sim, pos = _single_positive(6, 10, seed=3)
    dual = clp.build_loss("dual_temperature", tau_alpha=0.15, tau_beta=0.15).from_similarity(sim, pos)
    base = clp.build_loss("infonce", tau=0.15).from_similarity(sim, pos)
    torch.testing.assert_close(dual, base)
    torch.testing.assert_close(torch.autograd.grad(dual, sim)[0], torch.autograd.grad(base, sim)[0])


def test_dual_temperature_gradient_structure():
    """dL/dl_pos = -(1 - P(tau_b)); dL/dl_j = (1 - P(tau_b)) q_j(tau_a)."""
    sim, pos = _single_positive(4, 7, seed=4)
    ta, tb = 0.1, 1.0
    loss = clp.build_loss("dual_temperature", tau_alpha=ta, tau_beta=tb, reduction="sum").from_similarity(sim, pos)
    grad_logits = torch.autograd.grad(loss, sim)[0] * ta
    w_b = 1 - torch.softmax(sim.detach() / tb, dim=1)[pos]
    torch.testing.assert_close(grad_logits[pos], -w_b)
    q = torch.softmax((sim.detach() / ta).masked_fill(pos, -math.inf), dim=1)
    torch.testing.assert_close(grad_logits, torch.where(pos, -w_b[:, None], w_b[:, None] * q))


def test_temperature_free_gradient_vanishes_at_the_optimum():
    norms = []
    for delta in (0.5, 0.1, 1e-2, 1e-3, 1e-4):
        sim = torch.tensor([[1 - delta, -1 + delta, -1 + delta, -1 + delta]], dtype=torch.float64, requires_grad=True)
        pos = torch.tensor([[True, False, False, False]])
        loss = clp.build_loss("temperature_free").from_similarity(sim, pos)
        norms.append(float(torch.autograd.grad(loss, sim)[0].norm()))
    assert all(a > b for a, b in zip(norms, norms[1:])), norms
    assert norms[-1] < 1e-3
    # a fixed small temperature instead saturates far from the optimum (vanishing gradient)
    sim = torch.tensor([[0.5, -0.5, -0.5, -0.5]], dtype=torch.float64, requires_grad=True)
    fixed = clp.build_loss("infonce", tau=0.02).from_similarity(sim, torch.tensor([[True, False, False, False]]))
    assert float(torch.autograd.grad(fixed, sim)[0].norm()) < 1e-10


def test_temperature_free_logit_is_twice_atanh():
    sim = torch.tensor([[0.9, 0.0, -0.5]], dtype=torch.float64)
    pos = torch.tensor([[True, False, False]])
    loss = clp.build_loss("temperature_free").from_similarity(sim, pos)
    logits = torch.log((1 + sim) / (1 - sim))[0]
    assert math.exp(float(logits[0])) == pytest.approx(19.0)  # (1 + 0.9) / (1 - 0.9)
    assert float(loss) == pytest.approx(float(torch.logsumexp(logits, 0) - logits[0]))


def test_dystress_cosine_profile_endpoints():
    s = torch.tensor([-1.0, 0.0, 1.0, -0.5, 0.5, 0.9], dtype=torch.float64)
    tau = clp.dystress_temperature(s, 0.07, 0.2)
    torch.testing.assert_close(tau[:3], torch.tensor([0.2, 0.07, 0.2], dtype=torch.float64))
    assert float(tau[3]) == pytest.approx(0.135) and float(tau[4]) == pytest.approx(0.135)
    assert float(tau[5]) == pytest.approx(0.19682, abs=1e-5)


def test_dystress_algorithm2_reproduces_the_cosine_profile_and_its_shifts():
    s = torch.linspace(-1, 1, 201, dtype=torch.float64)
    torch.testing.assert_close(
        clp.dystress_temperature(s, 0.07, 0.2, "shifted", shift=-1.0, scale=1.0),
        clp.dystress_temperature(s, 0.07, 0.2, "cosine"),
    )

    def t(x: float) -> float:
        s = torch.tensor([x], dtype=torch.float64)
        return float(clp.dystress_temperature(s, 0.1, 0.2, "shifted", -0.4, 0.7))

    assert t(-0.3) == pytest.approx(0.1)  # minimum moved to -0.3
    assert t(-1.0) == pytest.approx(0.2) and t(0.4) == pytest.approx(0.2) and t(0.8) == pytest.approx(0.2)


@pytest.mark.parametrize("profile", ["cosine", "linear", "exponential"])
def test_dystress_profiles_are_v_shaped(profile):
    s = torch.linspace(-1, 1, 101, dtype=torch.float64)
    tau = clp.dystress_temperature(s, 0.07, 0.2, profile)
    assert float(tau.min()) == pytest.approx(0.07) and float(tau[50]) == pytest.approx(0.07)
    assert float(tau[0]) == pytest.approx(0.2) and float(tau[-1]) == pytest.approx(0.2)
    assert (tau[:50].diff() <= 1e-12).all() and (tau[50:].diff() >= -1e-12).all()


def test_dystress_monotone_profile():
    s = torch.linspace(-1, 1, 101, dtype=torch.float64)
    tau = clp.dystress_temperature(s, 0.07, 0.2, "monotone")
    assert float(tau[0]) == pytest.approx(0.07) and float(tau[-1]) == pytest.approx(0.2)
    assert (tau.diff() >= 0).all()


def test_dystress_detach_option_changes_only_the_gradient():
    sim, pos = _single_positive(4, 6, seed=5)
    a = clp.build_loss("dystress").from_similarity(sim, pos)
    b = clp.build_loss("dystress", detach=False).from_similarity(sim, pos)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(torch.autograd.grad(a, sim)[0], torch.autograd.grad(b, sim)[0])


def test_macl_temperature_follows_alignment_and_is_clamped():
    loss_fn = clp.build_loss("macl", tau0=0.05, alpha=2.0, a0=0.8, min_tau=0.01)
    high = torch.tensor([[0.9, 0.1], [0.9, 0.2]], dtype=torch.float64)
    pos = torch.tensor([[True, False], [True, False]])
    loss_fn.from_similarity(high, pos)
    assert loss_fn.stats["tau_mean"] == pytest.approx(0.05 * (1 + 2 * (0.9 - 0.8)))
    assert loss_fn.stats["tau_clamped"] == 0.0
    low = torch.tensor([[0.2, 0.1], [0.2, 0.0]], dtype=torch.float64)  # A = 0.2 -> raw tau < 0
    out = loss_fn.from_similarity(low, pos)
    assert torch.isfinite(out)
    assert loss_fn.stats["tau_mean"] == pytest.approx(0.01) and loss_fn.stats["tau_clamped"] == 1.0


def test_cosine_schedule_follows_the_step_and_resumes():
    loss_fn = clp.build_loss("cosine_schedule", tau_min=0.1, tau_max=0.5, period=8)
    assert loss_fn.temperature() == pytest.approx(0.5)
    loss_fn.step(4)
    assert loss_fn.temperature() == pytest.approx(0.1)
    state = loss_fn.state_dict()
    fresh = clp.build_loss("cosine_schedule", tau_min=0.1, tau_max=0.5, period=8)
    fresh.load_state_dict(state)
    assert fresh.temperature() == pytest.approx(0.1)
    loss_fn.step(2)
    assert loss_fn.temperature() == pytest.approx(0.3)


def test_learnable_temperature_learns_and_is_clamped():
    loss_fn = clp.build_loss("learnable", init_tau=0.5, min_tau=0.05)
    z1 = torch.randn(16, 8)
    z2 = z1 + 0.01 * torch.randn(16, 8)  # well aligned: lower tau lowers the loss
    opt = torch.optim.SGD(loss_fn.parameters(), lr=0.5)
    for _ in range(50):
        opt.zero_grad()
        loss_fn(z1, z2).backward()
        opt.step()
        loss_fn.clamp_()
    assert loss_fn.tau.item() < 0.5
    assert loss_fn.tau.item() >= 0.05 - 1e-7
    groups = clp.param_groups(torch.nn.ModuleList([torch.nn.Linear(3, 3), loss_fn]), 0.1)
    no_decay_ids = {id(p) for p in groups[1]["params"]}
    assert id(loss_fn.log_tau) in no_decay_ids


@pytest.mark.parametrize("kernel", ["fused", "stream", "dense"])
def test_infonce_is_exact_when_a_negative_beats_the_positive_by_more_than_20_logits(kernel):
    """F.softplus returns x above x = 20 and drops log1p(e^-x) (2e-9): float64 must not lose it."""
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=torch.float64)
    z2 = torch.tensor([[-0.2, 1.0], [1.0, 0.05], [0.8, 0.6]], dtype=torch.float64)  # rows 0, 1: d ≈ 21, 19
    loss = clp.build_loss("infonce", tau=0.05, layout="cross_view", reduction="none", kernel=kernel)(z1, z2)
    sim = torch.nn.functional.normalize(z1, dim=1) @ torch.nn.functional.normalize(z2, dim=1).T
    expected = torch.nn.functional.cross_entropy(sim / 0.05, torch.arange(3), reduction="none")
    assert float(expected[0]) > 20
    torch.testing.assert_close(loss, expected, rtol=1e-14, atol=0)
