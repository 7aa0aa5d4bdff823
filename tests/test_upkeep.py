"""The per-step hook (``clp.after_optimizer_step``) for every registered strategy, and ``clp.scale_gradient``."""

from __future__ import annotations

import math

import pytest
import torch

import cl_plugins as clp


def _build(name: str) -> clp.ContrastiveLoss:
    return clp.build_loss(name, **({"dim": 8} if name == "amcl" else {}))


@pytest.mark.parametrize("name", clp.available_losses())
def test_after_optimizer_step_keeps_stateless_strategies_unchanged(name):
    loss = _build(name)
    with torch.no_grad():
        for p in loss.parameters():
            p.add_(0.01)
    state = {k: v.clone() for k, v in loss.state_dict().items()}
    clp.after_optimizer_step(torch.nn.ModuleList([torch.nn.Linear(2, 2), loss]))  # found inside any model
    changed = {k for k, v in loss.state_dict().items() if not torch.equal(v, state[k])}
    expected = {"cosine_schedule": {"step_count"}}.get(name, set())
    assert changed == expected


def test_learnable_is_clamped_and_cosine_schedule_advances():
    learnable = clp.build_loss("learnable", init_tau=0.1, min_tau=0.05)
    with torch.no_grad():
        learnable.log_tau.fill_(-10.0)
    clp.after_optimizer_step(learnable)
    assert float(learnable.log_tau.detach()) == pytest.approx(math.log(0.05))
    schedule = clp.build_loss("cosine_schedule", tau_min=0.1, tau_max=0.5, period=4)
    taus = []
    for _ in range(3):
        taus.append(schedule.temperature())
        clp.after_optimizer_step(schedule)
    assert taus == pytest.approx([0.5, 0.3, 0.1])


def test_scale_gradient_scales_only_the_gradient():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = clp.scale_gradient(x * 3, 0.25)
    assert torch.equal(y.detach(), torch.tensor([3.0, -6.0]))
    y.sum().backward()
    assert torch.equal(x.grad, torch.tensor([0.75, 0.75]))
    assert clp.scale_gradient(x, 1.0) is x


@pytest.mark.parametrize("name", clp.available_losses())
def test_set_epoch_length_changes_no_state(name):
    loss = _build(name)
    state = {k: v.clone() for k, v in loss.state_dict().items()}
    clp.set_epoch_length(torch.nn.ModuleList([torch.nn.Linear(2, 2), loss]), 7)  # found inside any model
    assert all(torch.equal(v, state[k]) for k, v in loss.state_dict().items())


def test_cosine_schedule_in_epochs_holds_tau_for_an_epoch():
    # period 4 epochs of 3 steps: epochs 0, 1, 2, 3 have tau 0.5, 0.3, 0.1, 0.3 (cos 0, pi/2, pi, 3pi/2)
    schedule = clp.build_loss("cosine_schedule", tau_min=0.1, tau_max=0.5, period=4, period_unit="epoch")
    clp.set_epoch_length(schedule, 3)
    taus = []
    for _ in range(12):
        taus.append(schedule.temperature())
        clp.after_optimizer_step(schedule)
    assert taus == pytest.approx([0.5] * 3 + [0.3] * 3 + [0.1] * 3 + [0.3] * 3)
    assert schedule.temperature() == pytest.approx(0.5)  # a whole period later


def test_cosine_schedule_vision_preset_is_kukleva_et_al():
    # their train_simCLR.py: tau = 0.1 + 0.5 * (1.0 - 0.1) * (1 + cos(pi * epoch / t_max)), t_max 200 (README)
    loss = clp.build_host_loss("cosine_schedule", host_tau=0.1, preset="vision")
    loss.set_epoch_length(10)
    for epoch in (0, 1, 37, 100, 200, 399, 400, 1999):
        expected = 0.1 + 0.5 * 0.9 * (1 + math.cos(math.pi * epoch / 200))
        assert loss.temperature(10 * epoch + 9) == pytest.approx(expected)  # last step of the epoch


def test_cosine_schedule_in_epochs_refuses_to_guess_the_epoch_length():
    schedule = clp.build_loss("cosine_schedule", period=400, period_unit="epoch")
    with pytest.raises(RuntimeError, match="steps_per_epoch=N .* clp.set_epoch_length"):
        schedule(torch.randn(4, 8), torch.randn(4, 8))
    built = clp.build_loss("cosine_schedule", period=2, period_unit="epoch", steps_per_epoch=5)
    assert built.temperature(5) == pytest.approx(built.tau_min)
