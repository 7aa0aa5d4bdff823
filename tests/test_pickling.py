"""Every strategy can be pickled (``torch.save(model)``, multiprocessing) and deep-copied (momentum encoders) at any
point of training: built, after a forward and backward, with its statistics read or not."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch

import cl_plugins as clp

NAMES = clp.available_losses()


def _views(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(6, 8, generator=g, dtype=torch.float64), torch.randn(6, 8, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("layout", ["simclr", "cross_view"])
@pytest.mark.parametrize("name", NAMES)
def test_pickled_and_copied_after_a_training_step_computes_the_same_loss(name, layout):
    torch.manual_seed(0)
    loss_fn = clp.build_host_loss(name, host_tau=0.2, layout=layout, feature_dim=8).double()
    z1, z2 = _views()
    loss_fn(z1.requires_grad_(), z2).backward()
    clp.after_optimizer_step(loss_fn)
    stats = dict(loss_fn.stats)
    buffer = io.BytesIO()
    torch.save(loss_fn, buffer)  # a whole model, as users save one
    buffer.seek(0)
    copies = [pickle.loads(pickle.dumps(loss_fn)), copy.deepcopy(loss_fn),
              torch.load(buffer, weights_only=False)]  # fmt: skip
    for other in copies:
        assert other.stats == pytest.approx(stats)
        a, b = _views(1)
        torch.testing.assert_close(other(a, b), loss_fn(a, b), rtol=0, atol=0)
        assert other.hyperparameters() == loss_fn.hyperparameters()
