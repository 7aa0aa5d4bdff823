"""The shared training loop (``cl_plugins.integrations.runs.training.fit``) tells the strategy the length of an
epoch."""

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

    from cl_plugins.integrations.runs.training import Plan, Run, fit

    torch.manual_seed(0)
    model = TwoViews(clp.build_loss("cosine_schedule", tau_min=0.1, tau_max=0.5, period=2, period_unit="epoch"))
    loader = DataLoader(TensorDataset(torch.randn(20, 4)), batch_size=8)  # 3 batches, the last one short
    fit(Accelerator(cpu=True), model, torch.optim.SGD(model.parameters(), lr=0.1), loader, Plan(3), Run(progress=False))
    assert model.loss_fn.steps_per_epoch == 3 and int(model.loss_fn.step_count) == 9
    assert model.taus == pytest.approx([0.5] * 3 + [0.1] * 3 + [0.5] * 3)  # τ held for an epoch, period 2 epochs


def test_random_states_are_saved_as_json_and_safetensors_and_restored(tmp_path):
    """A checkpoint's random states are plain values and tensors (never a pickle), restored exactly."""
    import random
    from types import SimpleNamespace

    import numpy as np

    from cl_plugins.integrations.runs import random_states

    saved = SimpleNamespace(process_index=0, step=5)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    random_states.save(saved, tmp_path, {"run": "r", "rank": "0"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["random_states_0.json", "random_states_0.safetensors"]
    expected = (random.random(), np.random.rand(), torch.rand(3))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    loaded = SimpleNamespace(process_index=0, step=0)
    random_states.restore(loaded, tmp_path)
    assert (random.random(), np.random.rand()) == expected[:2] and torch.equal(torch.rand(3), expected[2])
    assert loaded.step == 5
