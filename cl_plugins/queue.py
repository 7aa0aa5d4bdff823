"""A MoCo-style ring buffer of negative features.

The buffer and its pointer are persistent buffers, so they are saved in ``state_dict`` and a
resumed run sees exactly the same negatives. ``get()`` returns a copy taken *before* the
current batch is enqueued (lightly #564: a symmetric loss must not see its own keys as
negatives). Under ``torch.distributed`` the keys of all ranks are enqueued (as MoCo does), so
every rank holds the same queue.

Example::

    queue = FeatureQueue(size=4096, dim=128)
    loss = loss_fn(q, k, queue=queue.get())          # loss_fn built with layout="queue"
    queue.enqueue(k)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .distributed import gather_no_grad
from .layouts import unit_rows
from .validation import check_count, check_embeddings


class FeatureQueue(nn.Module):
    """Ring buffer of ``size`` feature vectors of dimension ``dim``.

    Shapes:
        get() -> [size, dim]; enqueue(keys [n, dim]).
    """

    queue: torch.Tensor
    ptr: torch.Tensor

    def __init__(self, size: int, dim: int, gather_distributed: bool = True) -> None:
        super().__init__()
        size, dim = check_count("size", size), check_count("dim", dim)
        # MoCo initialises with random unit vectors; they are replaced within size / batch steps
        self.register_buffer("queue", F.normalize(torch.randn(size, dim), dim=1))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))
        self.gather_distributed = gather_distributed

    def get(self) -> torch.Tensor:
        return self.queue.clone()

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        # gathered before the local checks: every process then raises the same error, none waits in the gather
        keys = gather_no_grad(keys) if self.gather_distributed else keys.detach()
        if keys.dim() != 2 or keys.shape[1] != self.queue.shape[1]:
            raise ValueError(f"keys must have shape [n, {self.queue.shape[1]}], got {tuple(keys.shape)}")
        check_embeddings(keys, "keys")  # a NaN or zero key would stay in the queue for `size` steps
        keys = unit_rows(keys).to(self.queue.dtype)
        size = self.queue.shape[0]
        if keys.shape[0] >= size:
            self.queue.copy_(keys[-size:])
            self.ptr.zero_()
            return
        idx = (int(self.ptr) + torch.arange(keys.shape[0], device=keys.device)) % size
        self.queue[idx] = keys
        self.ptr.fill_((int(self.ptr) + keys.shape[0]) % size)
