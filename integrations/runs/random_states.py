"""Each process's random states in a checkpoint, as JSON and safetensors, never as a pickle.

``random_states_<rank>.json`` holds Python's and NumPy's generators and Accelerate's step counter (plain values),
``random_states_<rank>.safetensors`` torch's CPU and CUDA generators, both written through
:mod:`cl_plugins.integrations.runs.plain_state` with the checkpoint's identity and the process's rank.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_plugins.integrations.runs import plain_state

PREFIX = "random_states"


def stem(folder: Path, rank: int) -> Path:
    """Where process ``rank``'s random states live in a checkpoint folder (without suffix)."""
    return folder / f"{PREFIX}_{rank}"


def save(accelerator: Any, folder: Path, identity: dict[str, str]) -> None:
    """This process's random states into ``folder``."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"step": accelerator.step, "python": random.getstate(), "numpy": [kind, keys.tolist(), pos, has_gauss,
             cached], "torch": torch.get_rng_state(), "cuda": list(torch.cuda.get_rng_state_all())
             if torch.cuda.is_available() else []}  # fmt: skip
    plain_state.write(stem(folder, accelerator.process_index), state, identity)


def restore(accelerator: Any, folder: Path) -> None:
    """The random states :func:`save` wrote for this process (the caller has checked the file's identity)."""
    path = stem(folder, accelerator.process_index)
    state = plain_state.read(path)
    try:
        random.setstate(state["python"])
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(state["torch"])
        if state["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
        accelerator.step = int(state["step"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise plain_state.StateFileError(f"{path}.json is not a process's random states ({type(exc).__name__}: "
                                         f"{plain_state.first_line(exc)})") from None  # fmt: skip
