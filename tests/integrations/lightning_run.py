"""Tiny Lightning runs of ``ContrastiveModule`` (one or several CPU processes), one per strategy in turn; rank 0
saves each run's final weights, keyed by strategy (one launch for all strategies: the start-up is most of a run).

    python tests/integrations/lightning_run.py OUT LOSS[,LOSS...] DEVICES STEPS
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from lightning.pytorch import Trainer  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import cl_plugins as clp  # noqa: E402
from cl_plugins.integrations.command_line import leave_process_group  # noqa: E402
from cl_plugins.integrations.frameworks.lightning import ContrastiveModule, StrategyLightningCallback  # noqa: E402

GLOBAL_BATCH, D = 8, 6


class RankRows(Dataset):
    """Rank r of W reads rows r, r + W, r + 2W, ...: at every step the ranks' batches together are the one-process
    batch of that step (Lightning's own DistributedSampler would shuffle)."""

    def __init__(self, x: torch.Tensor, devices: int) -> None:
        self.x, self.y, self.devices = x, x + 0.3 * torch.randn_like(x), devices

    def __len__(self) -> int:
        return len(self.x) // self.devices

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        row = i * self.devices + rank
        return self.x[row], self.y[row]


def fit(loss: str, devices: int, steps: int) -> dict[str, torch.Tensor] | None:
    """One run; rank 0 returns its final weights."""
    torch.manual_seed(0)
    data = RankRows(torch.randn(GLOBAL_BATCH * steps, D, dtype=torch.float64), devices)
    loader = DataLoader(data, batch_size=GLOBAL_BATCH // devices, shuffle=False)
    encoder = torch.nn.Linear(D, 4).double()
    loss_fn = clp.build_host_loss(loss, host_tau=0.2, feature_dim=4).double()  # feature_dim: AMCL's heads
    module = ContrastiveModule(encoder, loss_fn, lr=0.5, weight_decay=0.1, optimizer="sgd")
    trainer = Trainer(max_epochs=1, accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                      callbacks=[StrategyLightningCallback()], logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False)  # fmt: skip
    trainer.fit(module, loader)
    weights = {k: v.detach().cpu() for k, v in module.state_dict().items()} if trainer.is_global_zero else None
    del trainer, module, encoder, loss_fn  # DDP's reducer holds the process group: it goes first
    leave_process_group(opened_for_us=True)  # Lightning leaves it open (the next run opens its own)
    return weights


def main(out: str, losses: str, devices: int, steps: int) -> None:
    warnings.filterwarnings("ignore")
    weights = {loss: fit(loss, devices, steps) for loss in losses.split(",")}
    if None not in weights.values():  # rank 0
        torch.save(weights, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
