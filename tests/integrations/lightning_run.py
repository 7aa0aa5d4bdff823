"""A tiny Lightning run of ``ContrastiveModule`` (one or several CPU processes); rank 0 saves the final weights.

    python tests/integrations/lightning_run.py OUT LOSS DEVICES STEPS
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
from integrations.common.cli import leave_process_group  # noqa: E402
from integrations.lightning_adapter import ContrastiveModule, StrategyCallback  # noqa: E402

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


def main(out: str, loss: str, devices: int, steps: int) -> None:
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    data = RankRows(torch.randn(GLOBAL_BATCH * steps, D, dtype=torch.float64), devices)
    loader = DataLoader(data, batch_size=GLOBAL_BATCH // devices, shuffle=False)
    encoder = torch.nn.Linear(D, 4).double()
    loss_fn = clp.build_loss(loss, **({"init_tau": 0.2} if loss == "learnable" else {})).double()
    module = ContrastiveModule(encoder, loss_fn, lr=0.5, weight_decay=0.1, optimizer="sgd")
    trainer = Trainer(max_epochs=1, accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                      callbacks=[StrategyCallback()], logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False)  # fmt: skip
    trainer.fit(module, loader)
    if trainer.is_global_zero:
        torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, out)
    del trainer, module, encoder, loss_fn  # DDP's reducer holds the process group: it goes first
    leave_process_group(opened_for_us=True)  # Lightning leaves it open; gloo may abort at exit


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
