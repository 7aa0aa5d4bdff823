"""A MoCo-style ring buffer of negative features (and, optionally, their labels).

The buffer and its pointer are persistent buffers, so they are saved in ``state_dict`` and a
resumed run sees exactly the same negatives. ``get()`` returns a copy taken *before* the
current batch is enqueued (lightly #564: a symmetric loss must not see its own keys as
negatives). Under ``torch.distributed`` the keys of all ranks are enqueued (as MoCo does), so
every rank holds the same queue.

Policy: the queue keeps the *last* ``size`` keys, first in, first out, wrapping around (MoCo's queue). lightly's
``MemoryBankModule`` keeps the first ``size`` and then starts over from the beginning once it is full; both keep
``size`` recent-ish keys, but after a wrap the two hold different ones. Until ``size`` keys have been enqueued the
buffer still holds its random unit initial vectors (MoCo's initialisation), labelled -1.

With ``labels=True`` it also stores each key's label, for a loss with a ``label_policy``
(``queue_labels=get_labels()``).

Example::

    queue = FeatureQueue(size=4096, dim=128)
    loss = loss_fn(q, k, queue=queue.get())          # loss_fn built with layout="queue"
    queue.enqueue(k)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .distributed import gather_no_grad
from .layouts import unit_rows
from .validation import check_count, check_embeddings, check_flag, check_integer_labels, check_state_fits

#: the label of the initial random keys (no key of a real batch should carry it)
NO_LABEL = -1
NO_LABELS = "this FeatureQueue stores no labels; build it with FeatureQueue(..., labels=True)"


class FeatureQueue(nn.Module):
    """Ring buffer of ``size`` feature vectors of dimension ``dim`` (and their labels, with ``labels=True``).

    Shapes:
        get() -> [size, dim]; get_labels() -> [size]; enqueue(keys [n, dim], labels [n]).
    """

    queue: torch.Tensor
    ptr: torch.Tensor

    def __init__(self, size: int, dim: int, gather_distributed: bool = True, labels: bool = False) -> None:
        super().__init__()
        size, dim = check_count("size", size), check_count("dim", dim)
        gather_distributed, labels = check_flag("gather_distributed", gather_distributed), check_flag("labels", labels)
        # MoCo initialises with random unit vectors; they are replaced within size / batch steps
        self.register_buffer("queue", F.normalize(torch.randn(size, dim), dim=1))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))
        self.register_buffer("labels", torch.full((size,), NO_LABEL, dtype=torch.long) if labels else None)
        self.gather_distributed = gather_distributed

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """``nn.Module.load_state_dict``; a queue of another size, width or label setting is refused in one line."""
        if strict:
            size, dim = self.queue.shape
            check_state_fits(self, state_dict, f"a FeatureQueue({size}, {dim}, labels={self.labels is not None})'s",
                             "a FeatureQueue of the size, dim and labels")  # fmt: skip
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def get(self) -> torch.Tensor:
        return self.queue.clone()

    def get_labels(self) -> torch.Tensor:
        """The stored keys' labels [size] (``NO_LABEL`` for the initial random keys)."""
        if self.labels is None:
            raise ValueError(NO_LABELS)
        return self.labels.clone()

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor, labels: torch.Tensor | None = None) -> None:
        # gathered before the local checks: every process then raises the same error, none waits in the gather
        keys = gather_no_grad(keys) if self.gather_distributed else keys.detach()
        labels = self._gathered_labels(labels)
        if keys.dim() != 2 or keys.shape[1] != self.queue.shape[1]:
            raise ValueError(f"keys must have shape [n, {self.queue.shape[1]}], got {tuple(keys.shape)}")
        check_embeddings(keys, "keys")  # a NaN or zero key would stay in the queue for `size` steps
        if labels is not None and (labels.dim() != 1 or labels.shape[0] != keys.shape[0]):
            raise ValueError(f"labels must have one label per key ({keys.shape[0]}), got shape {tuple(labels.shape)}")
        keys = unit_rows(keys).to(self.queue.dtype)
        size = self.queue.shape[0]
        if keys.shape[0] >= size:
            idx = torch.arange(size, device=keys.device)
            keys, labels = keys[-size:], None if labels is None else labels[-size:]
            self.ptr.zero_()
        else:
            idx = (int(self.ptr) + torch.arange(keys.shape[0], device=keys.device)) % size
            self.ptr.fill_((int(self.ptr) + keys.shape[0]) % size)
        self.queue[idx] = keys
        if labels is not None:
            self.labels[idx] = labels.to(self.labels)

    def _gathered_labels(self, labels: torch.Tensor | None) -> torch.Tensor | None:
        """Every process's labels of its keys (a process that passes none where the queue stores labels makes
        every process raise the same line in the gather), or None when the queue stores none."""
        if self.labels is None:
            if labels is not None:
                raise ValueError(NO_LABELS)
            return None
        given = labels if isinstance(labels, torch.Tensor) else self.labels.new_empty(0)
        gathered = gather_no_grad(given, 0 if labels is not None else 1) if self.gather_distributed else given
        if labels is None:
            raise ValueError("this FeatureQueue stores labels: pass enqueue(keys, labels=...)")
        check_integer_labels(gathered, "labels")
        return gathered
