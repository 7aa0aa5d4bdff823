"""Rows of texts -> one batch of every view for the ``Trainer``'s ``compute_loss_func``."""

from __future__ import annotations

from typing import Any

import torch

#: the text columns of a row, in the order the views are stacked
VIEWS = ("anchor", "positive", "negative")


class ViewCollator:
    """Rows of ``anchor`` / ``positive`` (/ ``negative``) texts -> one tokenised batch [V·B, L] + ``labels`` [V·B]
    (each row's view); rows with an integer ``label`` (a class, for a loss with a ``label_policy``) give ``labels``
    [2, V·B]: the views, then each row's class.

    Args:
        tokenizer: a Hugging Face tokenizer.
        max_length: truncation length (default: 32, SimCSE's).
    """

    def __init__(self, tokenizer: Any, max_length: int = 32) -> None:
        self.tokenizer, self.max_length = tokenizer, max_length

    def __call__(self, rows: list[dict[str, str]]) -> dict[str, torch.Tensor]:
        if not rows or not all(isinstance(row, dict) for row in rows):
            raise ValueError("the collator takes a non-empty list of rows, each a dict of texts")
        views = [v for v in VIEWS if v in rows[0]]
        if views[:2] != ["anchor", "positive"]:
            raise ValueError(f"rows need 'anchor' and 'positive' texts (and may have 'negative'), got {list(rows[0])}")
        # a batch is one layout: rows with and without a hard negative cannot be stacked view by view
        differ = [i for i, row in enumerate(rows) if [v for v in VIEWS if v in row] != views]
        if differ:
            raise ValueError(f"rows {differ[:5]} of the batch do not have the views of row 0 ({views}): give every "
                             "row a 'negative' or none")  # fmt: skip
        texts = [row[v] for v in views for row in rows]
        if not all(isinstance(t, str) for t in texts):
            bad = next(type(t).__name__ for t in texts if not isinstance(t, str))
            raise ValueError(f"every view of a row must be a text (str), got a {bad}")
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        batch["labels"] = torch.arange(len(views)).repeat_interleave(len(rows))
        if any("label" in row for row in rows):
            classes = [row.get("label") for row in rows]
            bad = [c for c in classes if not isinstance(c, int) or isinstance(c, bool)]
            if bad:
                raise ValueError(f"a batch with a 'label' column needs an integer label in every row, got {bad[:3]}")
            batch["labels"] = torch.stack([batch["labels"], torch.tensor(classes).repeat(len(views))])
        return dict(batch)
