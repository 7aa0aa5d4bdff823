"""Log-probabilities of tokens under a masked language model, one masked position per input row."""

from __future__ import annotations

from typing import Any

import torch


@torch.no_grad()
def masked_log_probs(
    model: Any,
    inputs: list[list[int]],
    positions: list[int],
    targets: list[int],
    *,
    batch_size: int = 64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``log p(targets[i] | inputs[i])`` at ``positions[i]`` (already masked in ``inputs[i]``): [N] float64.

    ``inputs`` are token ids with the special tokens included; rows are padded per batch with
    the model's ``pad_token_id`` and an attention mask.
    """
    if not len(inputs) == len(positions) == len(targets):
        raise ValueError("inputs, positions and targets must have the same length")
    device = device or next(model.parameters()).device
    pad = getattr(model.config, "pad_token_id", 0) or 0
    was_training = model.training
    model.eval()
    out = []
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        width = max(len(inputs[i]) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, : len(inputs[i])] = torch.tensor(inputs[i])
            mask[row, : len(inputs[i])] = 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.double()
        pos = torch.tensor([positions[i] for i in idx], device=device)
        tgt = torch.tensor([targets[i] for i in idx], device=device)
        rows = torch.arange(len(idx), device=device)
        out.append(torch.log_softmax(logits[rows, pos], dim=-1)[rows, tgt].cpu())
    model.train(was_training)
    if not out:
        return torch.empty(0, dtype=torch.float64)
    scores = torch.cat(out)
    return scores[torch.argsort(torch.tensor(order))]
