"""The Lightning recipe: a learned temperature trains without weight decay, the per-step hook runs once per
optimizer step (also under gradient accumulation), and two CPU processes under ``strategy="ddp"`` end with the
weights of one process on the global batch, for every registered strategy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cl_plugins as clp
from tests import ROOT

pytest.importorskip("lightning")

SCRIPT = ROOT / "tests" / "integrations" / "lightning_run.py"


def _fit(loss: str, accumulate: int = 1, steps: int = 4, batches: int | None = None, **loss_args):
    from lightning.pytorch import Trainer
    from torch.utils.data import DataLoader, TensorDataset

    from cl_plugins.integrations.frameworks.lightning import ContrastiveModule, StrategyLightningCallback

    torch.manual_seed(0)
    x = torch.randn(8 * (batches or steps * accumulate), 6)
    loader = DataLoader(TensorDataset(x, x + 0.3 * torch.randn_like(x)), batch_size=8)
    module = ContrastiveModule(torch.nn.Linear(6, 4), clp.build_loss(loss, **loss_args), lr=1e-2, weight_decay=0.1)
    trainer = Trainer(max_epochs=1, accelerator="cpu", devices=1, accumulate_grad_batches=accumulate, logger=False,
                      callbacks=[StrategyLightningCallback()], enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False)  # fmt: skip
    trainer.fit(module, loader)
    return module, trainer


@pytest.mark.filterwarnings("ignore")
def test_a_learned_temperature_trains_without_weight_decay():
    module, trainer = _fit("learnable")
    group = next(g for g in trainer.optimizers[0].param_groups if any(p is module.loss_fn.log_tau for p in g["params"]))
    assert group["weight_decay"] == 0.0
    assert float(module.loss_fn.log_tau.detach()) != pytest.approx(float(torch.log(torch.tensor(0.07))))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("accumulate", [1, 2])
def test_the_hook_runs_once_per_optimizer_step(accumulate):
    module, trainer = _fit("cosine_schedule", accumulate=accumulate, steps=3)
    assert trainer.global_step == 3
    assert int(module.loss_fn.step_count) == 3


@pytest.mark.filterwarnings("ignore")
def test_a_schedule_in_epochs_learns_the_optimizer_steps_of_an_epoch():
    # 5 batches, 2 per step: Lightning steps after batches 2, 4 and the short last one
    module, trainer = _fit("cosine_schedule", accumulate=2, batches=5, period=4, period_unit="epoch")
    assert trainer.global_step == 3 and module.loss_fn.steps_per_epoch == 3
    assert module.loss_fn.temperature() == pytest.approx(module.loss_fn.tau_min + 0.5 * (1.0 - 0.1))  # epoch 1 of 4


def _run(tmp_path: Path, losses: list[str], devices: int) -> dict[str, dict[str, torch.Tensor]]:
    out = tmp_path / f"weights_{devices}.pt"
    result = subprocess.run([sys.executable, str(SCRIPT), str(out), ",".join(losses), str(devices), "2"],
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return torch.load(out)


@pytest.mark.distributed
def test_two_processes_train_like_one_on_the_global_batch(tmp_path):
    losses = clp.available_losses()
    one, two = _run(tmp_path, losses, 1), _run(tmp_path, losses, 2)
    assert list(one) == list(two) == losses
    for loss in losses:
        assert one[loss].keys() == two[loss].keys()
        for key in one[loss]:
            where = f"{loss} {key}"
            torch.testing.assert_close(two[loss][key], one[loss][key], rtol=1e-9, atol=1e-12,
                                       msg=lambda m, where=where: f"{where}: {m}")  # fmt: skip


def _trainer(epochs: int, callback, **kwargs):  # noqa: ANN001, ANN202
    from lightning.pytorch import Trainer

    return Trainer(max_epochs=epochs, accelerator="cpu", devices=1, accumulate_grad_batches=2, logger=False,
                   callbacks=[callback], enable_progress_bar=False, enable_model_summary=False, **kwargs)  # fmt: skip


@pytest.mark.filterwarnings("ignore")
def test_the_hook_counts_from_where_a_fit_starts(tmp_path):
    """A fit resumed from a checkpoint, and a second fit with the same callback, count every optimizer step once."""
    from torch.utils.data import DataLoader, TensorDataset

    from cl_plugins.integrations.frameworks.lightning import ContrastiveModule, StrategyLightningCallback

    torch.manual_seed(0)
    x = torch.randn(48, 6)
    loader = DataLoader(TensorDataset(x, x + 0.3 * torch.randn_like(x)), batch_size=8)  # 6 batches: 3 steps/epoch

    def module() -> ContrastiveModule:
        torch.manual_seed(1)
        return ContrastiveModule(torch.nn.Linear(6, 4), clp.build_loss("cosine_schedule"), lr=1e-2)

    straight = module()
    _trainer(2, StrategyLightningCallback(), enable_checkpointing=False).fit(straight, loader)
    assert int(straight.loss_fn.step_count) == 6
    first = module()
    _trainer(1, StrategyLightningCallback(), default_root_dir=tmp_path).fit(first, loader)
    checkpoint = next(tmp_path.rglob("*.ckpt"))
    resumed = module()
    _trainer(2, StrategyLightningCallback(), enable_checkpointing=False).fit(resumed, loader, ckpt_path=checkpoint)
    assert int(resumed.loss_fn.step_count) == 6
    shared, twice = StrategyLightningCallback(), module()
    for _ in range(2):
        _trainer(1, shared, enable_checkpointing=False).fit(twice, loader)
    assert int(twice.loss_fn.step_count) == 6


@pytest.mark.parametrize("option", [{"label_policy": "exclude"}, {"label_policy": "positives_out"}])
def test_a_batch_with_labels_passes_them_to_the_loss(option):
    """``(x1, x2, y)`` batches for a loss built with ``label_policy="exclude"`` or ``"positives_out"``: the step's
    loss is the loss with ``labels=y``; malformed batches get one line."""
    from cl_plugins.integrations.frameworks.lightning import ContrastiveModule

    torch.manual_seed(0)
    x1, x2, y = torch.randn(8, 6), torch.randn(8, 6), torch.tensor([0, 1, 0, 2, 1, 3, 3, 0])
    loss_fn = clp.build_loss("macl", **option)
    module = ContrastiveModule(torch.nn.Linear(6, 4), loss_fn)
    module.log = lambda *args, **kwargs: None  # outside a Trainer
    expected = loss_fn(module.encoder(x1), module.encoder(x2), labels=y)
    torch.testing.assert_close(module.training_step((x1, x2, y), 0), expected)
    with pytest.raises(ValueError, match="every call of such a loss passes labels="):
        module.training_step((x1, x2), 0)
    with pytest.raises(ValueError, match="a batch is \\(x1, x2\\) or \\(x1, x2, labels\\)"):
        module.training_step((x1,), 0)
