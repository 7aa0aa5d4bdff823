"""Run with torchrun (or plainly): one SimCSE step's parameter gradients, through our Accelerate setup.

python -m torch.distributed.run --nproc_per_node 2 tests/integrations/simcse_grad_step.py MODEL OUT LOSS
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cl_plugins.integrations.modalities.text.config import TrainConfig
from cl_plugins.integrations.modalities.text.data import (  # noqa: E402
    Collator,
    EpochSampler,
    TokenizedDataset,
    rows_of,
    tokenize_rows,
)
from cl_plugins.integrations.modalities.text.encoder import SimCSEModel  # noqa: E402
from cl_plugins.integrations.modalities.text.trainer import build_strategy  # noqa: E402
from cl_plugins.integrations.runs.accelerate_setup import make_accelerator  # noqa: E402
from tests.integrations.hosts.simcse.test_simcse_train import SENTENCES  # noqa: E402


def main(model_dir: str, out: str, loss: str) -> None:
    from accelerate.utils import set_seed
    from transformers import AutoTokenizer

    # as the SimCSE trainer: BERT's own pooler is unused, and without find_unused_parameters DDP never
    # reduces the bucket that holds it (with a tiny model: every gradient stays local)
    accelerator = make_accelerator(
        Path(out).parent, gradient_accumulation_steps=1, mixed_precision="no", log_with="none",
        find_unused_parameters=True,
    )  # fmt: skip
    set_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dataset = TokenizedDataset(tokenize_rows(rows_of(SENTENCES), tokenizer, 16))
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=4 // accelerator.num_processes,
        sampler=EpochSampler(len(dataset), 0),
        collate_fn=Collator(tokenizer, 16),
        drop_last=True,
        generator=torch.Generator().manual_seed(0),
    )
    strategy = build_strategy(TrainConfig(model=model_dir, train_file="", loss=loss))
    model = SimCSEModel.from_pretrained(model_dir, strategy, pooler="cls")
    model.double()
    model, loader = accelerator.prepare(model, loader)
    accelerator.backward(model(**next(iter(loader))))
    inner = accelerator.unwrap_model(model)
    if accelerator.is_main_process:
        torch.save({n: p.grad for n, p in inner.named_parameters() if p.grad is not None}, out)
    # the DDP reducer must be gone before the gloo group, and the group destroyed before exit: a group
    # torn down by the interpreter's exit aborted rank 1 now and then ("terminate called without an
    # active exception", exit -6)
    del model, loader, inner
    accelerator.free_memory()
    gc.collect()
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main(*sys.argv[1:4])
