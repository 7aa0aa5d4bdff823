"""The loss's float32 regions under autocast: :func:`autocast_off`."""

from __future__ import annotations

import contextlib

import torch

_NOTHING = contextlib.nullcontext()


def autocast_off(device_type: str) -> contextlib.AbstractContextManager:
    """``torch.autocast(device_type, enabled=False)`` where autocast is on for that device, else a context that does
    nothing: building and entering an autocast context costs microseconds, a few times per call of a loss."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type=device_type, enabled=False)
    return _NOTHING
