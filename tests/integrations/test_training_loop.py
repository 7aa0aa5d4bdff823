"""The shared training loop (``integrations.common.training.fit``) tells the strategy the length of an epoch."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import cl_plugins as clp


class TwoViews(nn.Module):
    def __init__(self, loss_fn: nn.Module) -> None:
        super().__init__()
        self.encoder, self.loss_fn = nn.Linear(4, 4), loss_fn
        self.taus: list[float] = []

    def forward(self, batch: list[torch.Tensor]) -> torch.Tensor:
        (x,) = batch
        self.taus.append(self.loss_fn.temperature())
        return self.loss_fn(self.encoder(x), self.encoder(x + 0.1 * torch.randn_like(x)))


def test_fit_gives_a_schedule_in_epochs_the_steps_of_an_epoch():
    from accelerate import Accelerator

    from integrations.common.training import Plan, Run, fit

    torch.manual_seed(0)
    model = TwoViews(clp.build_loss("cosine_schedule", tau_min=0.1, tau_max=0.5, period=2, period_unit="epoch"))
    loader = DataLoader(TensorDataset(torch.randn(20, 4)), batch_size=8)  # 3 batches, the last one short
    fit(Accelerator(cpu=True), model, torch.optim.SGD(model.parameters(), lr=0.1), loader, Plan(3), Run(progress=False))
    assert model.loss_fn.steps_per_epoch == 3 and int(model.loss_fn.step_count) == 9
    assert model.taus == pytest.approx([0.5] * 3 + [0.1] * 3 + [0.5] * 3)  # τ held for an epoch, period 2 epochs
