"""Properties that separate an AMCL that learns from one its temperatures can game.

(a) with the embeddings frozen, training only the temperatures must not beat the best loss that
    temperatures blind to the candidates reach: each anchor's best constant in the box;
(b) scaling the projections by 100 leaves the loss unchanged;
(c) the loss is >= 0 at any temperatures in the box;
(d) a small encoder trained on a synthetic mixture beats the random encoder, positives closer than
    the hardest negatives.

Each property is checked for every form, with the outcome it must have: the default ``anchor`` has all
four; the paper's forms (and the 2024 default, ``eq2.1`` in [0.05, 1.05], beta 0.1) fail at least one.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn

import cl_plugins as clp
from cl_plugins.losses.amcl import DEGENERATE_FORMS, FORMS

D, PROJ = 16, 8
#: name -> (constructor arguments, outcome of (a), (b), (c))
CASES: dict[str, tuple[dict, tuple[bool, bool, bool]]] = {
    "anchor": (dict(form="anchor"), (True, True, True)),
    "eq2.1": (dict(form="eq2.1"), (False, False, False)),
    "mle": (dict(form="mle"), (False, False, False)),
    "topk": (dict(form="topk"), (True, True, False)),  # normalised input, but -beta/tau of negatives in the box
    "2024-default": (dict(form="eq2.1", eta=0.05, iota=1.0, beta=0.1), (False, False, False)),
}


def test_every_form_has_a_case():
    assert {args["form"] for args, _ in CASES.values()} == set(FORMS)
    assert all(CASES[name][1] != (True, True, True) for name in DEGENERATE_FORMS)


def build(args: dict, **extra) -> clp.ContrastiveLoss:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return clp.build_loss("amcl", dim=D, proj_dim=PROJ, hidden=16, temperature_hidden=32, **args, **extra)


def box(loss_fn) -> tuple[float, float]:
    if loss_fn.form == "anchor":
        return loss_fn.tau / loss_fn.tau_range, loss_fn.tau * loss_fn.tau_range
    return loss_fn.eta, loss_fn.eta + loss_fn.iota


def set_constant_temperature(loss_fn, tau: float) -> None:
    """Every temperature network of ``loss_fn`` outputs ``tau`` for every pair."""
    for net in loss_fn.temperature_nets:
        if loss_fn.form == "anchor":
            net.second.weight.data.zero_()
            x = (math.log(tau) - net.log_tau) / net.log_range
            net.second.bias.data.fill_(math.atanh(min(max(x, -1 + 1e-12), 1 - 1e-12)))
        elif loss_fn.form == "topk":
            net.bound = lambda score, tau=tau: torch.full_like(score, tau)
        else:
            p = min(max((tau - loss_fn.eta) / loss_fn.iota, 1e-12), 1 - 1e-12)
            net.second.weight.data.zero_()
            net.second.bias.data.fill_(math.log(p / (1 - p)))


def views(n: int = 24, noise: float = 0.8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    h1 = torch.randn(n, D, generator=g, dtype=torch.float64)
    return h1, h1 + noise * torch.randn(n, D, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("case", list(CASES))
def test_a_temperatures_alone_cannot_beat_each_anchors_best_constant(case):
    args, (holds, _, _) = CASES[case]
    torch.manual_seed(0)
    loss_fn = build(args, heads=1, reduction="none").double()
    h1, h2 = views()
    lo, hi = box(loss_fn)
    with torch.no_grad():
        per_tau = []
        for tau in torch.exp(torch.linspace(math.log(lo), math.log(hi), 200)).tolist():
            frozen = build(args, heads=1, reduction="none").double()
            frozen.load_state_dict(loss_fn.state_dict())
            set_constant_temperature(frozen, tau)
            per_tau.append(frozen(h1, h2))
        per_tau = torch.stack(per_tau)  # [taus, anchors]
    best_per_anchor = per_tau.min(dim=0).values.mean().item()
    loss_fn.heads.requires_grad_(False)
    opt = torch.optim.Adam(loss_fn.temperature_nets.parameters(), lr=1e-2)
    for _ in range(150):
        loss = loss_fn(h1, h2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = loss_fn(h1, h2).mean().item()
    assert (after >= best_per_anchor - 1e-6) == holds, (after, best_per_anchor, per_tau.mean(dim=1).min().item())


@pytest.mark.parametrize("case", list(CASES))
def test_b_scaling_the_projections_changes_nothing(case):
    args, (_, holds, _) = CASES[case]
    torch.manual_seed(0)
    loss_fn = build(args, heads=2).double()
    h1, h2 = views()
    before = loss_fn(h1, h2)
    with torch.no_grad():
        for head in loss_fn.heads:
            head[-1].weight.mul_(100.0)
            head[-1].bias.mul_(100.0)
    after = loss_fn(h1, h2)
    assert bool(torch.isclose(after, before, rtol=1e-9, atol=1e-9)) == holds, (before.item(), after.item())


@pytest.mark.parametrize("case", list(CASES))
def test_c_the_loss_is_nonnegative_at_any_temperatures_in_the_box(case):
    args, (_, _, holds) = CASES[case]
    h1, _ = views()
    lowest = math.inf
    for seed in range(8):
        torch.manual_seed(seed)
        loss_fn = build(args, heads=1, reduction="none").double()
        with torch.no_grad():
            for net in loss_fn.temperature_nets:  # saturate the temperatures at the box corners, pair by pair
                for p in net.parameters():
                    p.normal_(0.0, 30.0)
            for h2 in (h1, h1 + 0.3 * torch.randn_like(h1)):  # identical views (s_pos = 1) and close ones
                lowest = min(lowest, loss_fn(h1, h2).min().item())
    assert (lowest >= -1e-9) == holds, lowest


def _mixture(seed: int, n_per: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    centres = torch.randn(10, 32, generator=torch.Generator().manual_seed(123))
    y = torch.arange(10).repeat_interleave(n_per)
    return centres[y] + 2.0 * torch.randn(len(y), 32, generator=torch.Generator().manual_seed(seed)), y


def _knn(encoder: nn.Module, train, test, k: int = 5) -> float:
    with torch.no_grad():
        bank = nn.functional.normalize(encoder(train[0]), dim=1)
        query = nn.functional.normalize(encoder(test[0]), dim=1)
        votes = train[1][(query @ bank.T).topk(k, dim=1).indices]
    return (votes.mode(dim=1).values == test[1]).float().mean().item()


def _train(args: dict, seed: int, view_noise: float = 1.4) -> tuple[float, float, float]:
    """(random-encoder kNN, trained kNN, mean s_pos - s_hardest of the trained backbone features)."""
    torch.manual_seed(seed)
    train, test = _mixture(0), _mixture(1)
    encoder = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 64))
    baseline = _knn(encoder, train, test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss_fn = clp.build_loss("amcl", dim=64, heads=3, proj_dim=32, hidden=128, tau=0.2, **args)
    opt = torch.optim.Adam([*encoder.parameters(), *loss_fn.parameters()], lr=1e-3)
    for _ in range(300):
        x = train[0][torch.randint(0, len(train[0]), (128,))]
        loss = loss_fn(encoder(x + view_noise * torch.randn_like(x)), encoder(x + view_noise * torch.randn_like(x)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        x = train[0]
        a = nn.functional.normalize(encoder(x + view_noise * torch.randn_like(x)), dim=1)
        b = nn.functional.normalize(encoder(x + view_noise * torch.randn_like(x)), dim=1)
        sim = a @ b.T
        hardest = sim.masked_fill(torch.eye(len(x), dtype=torch.bool), -2.0).max(dim=1).values
    return baseline, _knn(encoder, train, test), (sim.diag() - hardest).mean().item()


#: kNN accuracy points a trained encoder must add to the random one (InfoNCE adds about 21, a collapse 0)
MARGIN = 0.10


@pytest.mark.parametrize(("case", "seed"), [("anchor", 0), ("anchor", 1), ("2024-default", 0)])
def test_d_a_small_encoder_learns_the_mixture(case, seed):
    baseline, trained, gap = _train(CASES[case][0], seed)
    learns = trained >= baseline + MARGIN and gap > 0
    assert learns == (case == "anchor"), (baseline, trained, gap)


@pytest.mark.parametrize("layout,symmetric", [("simclr", False), ("cross_view", True)])
def test_the_anchor_form_is_the_same_on_every_kernel(layout, symmetric):
    """Per-anchor τ rescales the anchors, so the scalar kernels apply: dense, fused and streaming give one loss and
    one gradient (inputs and heads), and ``auto`` streams from the same size as every other strategy."""
    from cl_plugins.kernels import dispatch

    torch.manual_seed(0)
    z1, z2 = torch.randn(9, 6, dtype=torch.float64), torch.randn(9, 6, dtype=torch.float64)
    results = []
    for kernel in ("dense", "fused", "stream"):
        torch.manual_seed(1)
        loss_fn = clp.build_loss("amcl", dim=6, heads=2, kernel=kernel, layout=layout, symmetric=symmetric).double()
        a = z1.clone().requires_grad_()
        value = loss_fn(a, z2)
        results.append((value.detach(), torch.autograd.grad(value, [a, *loss_fn.parameters()])))
    for value, grads in results[1:]:
        torch.testing.assert_close(value, results[0][0], rtol=1e-12, atol=1e-12)
        for g, ref in zip(grads, results[0][1]):
            torch.testing.assert_close(g, ref, rtol=1e-10, atol=1e-12)
    block = clp.build_loss("infonce").blocks(z1, z2)[0]
    assert dispatch.auto(block.anchors, block.size) == "fused"
