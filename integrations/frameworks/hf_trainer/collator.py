"""Rows of texts -> one batch of every view for the ``Trainer``'s ``compute_loss_func``."""

from __future__ import annotations

from typing import Any

import torch

#: the text columns of a row, in the order the views are stacked
VIEWS = ("anchor", "positive", "negative")


class ViewCollator:
    """Rows of ``anchor`` / ``positive`` (/ ``negative``) texts -> one tokenised batch [V·B, L] + ``labels`` [V·B].

    Args:
        tokenizer: a Hugging Face tokenizer.
        max_length: truncation length (default: 32, SimCSE's).
    """

    def __init__(self, tokenizer: Any, max_length: int = 32) -> None:
        self.tokenizer, self.max_length = tokenizer, max_length

    def __call__(self, rows: list[dict[str, str]]) -> dict[str, torch.Tensor]:
        views = [v for v in VIEWS if v in rows[0]]
        if views[:2] != ["anchor", "positive"]:
            raise ValueError(f"rows need 'anchor' and 'positive' texts (and may have 'negative'), got {list(rows[0])}")
        texts = [row[v] for v in views for row in rows]
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        batch["labels"] = torch.arange(len(views)).repeat_interleave(len(rows))
        return dict(batch)
