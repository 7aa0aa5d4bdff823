"""A checkpoint's random states as JSON and safetensors, never as a pickle.

Accelerate's ``save_state`` writes each process's random states as ``random_states_<rank>.pkl`` and its
``load_state`` unpickles them (and skips them without a word when the file is missing). Every checkpoint a run
writes replaces that file with ``random_states_<rank>.json`` (Python's and NumPy's generators, Accelerate's step
counter: plain values) and ``random_states_<rank>.safetensors`` (torch's CPU and CUDA generators: tensors), read
back after ``load_state`` without unpickling anything. Checkpoints written before keep their pickle, which
Accelerate reads once the checkpoint's file list has been verified
(:func:`cl_plugins.integrations.runs.atomic.damage`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

PREFIX = "random_states"


def _names(folder: Path, rank: int) -> tuple[Path, Path, Path]:
    base = folder / f"{PREFIX}_{rank}"
    return base.with_suffix(".json"), base.with_suffix(".safetensors"), base.with_suffix(".pkl")


def save(accelerator: Any, folder: Path) -> None:
    """This process's random states into ``folder`` (just written by ``accelerator.save_state``), its pickle gone."""
    from safetensors.torch import save_file

    plain, tensors, pickled = _names(folder, accelerator.process_index)
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {"step": accelerator.step, "python": [version, list(internal), gauss_next],
             "numpy": [kind, keys.tolist(), pos, has_gauss, cached]}  # fmt: skip
    plain.write_text(json.dumps(state))
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng.update({f"cuda_{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    save_file(rng, str(tensors))
    pickled.unlink(missing_ok=True)


def restore(accelerator: Any, folder: Path) -> None:
    """The random states :func:`save` wrote for this process (nothing when the checkpoint predates them: Accelerate
    has read its pickle)."""
    from safetensors.torch import load_file

    plain, tensors, _ = _names(folder, accelerator.process_index)
    if not plain.is_file():
        return
    state = json.loads(plain.read_text())
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    rng = load_file(str(tensors))
    torch.set_rng_state(rng["torch"])
    cuda = [rng[f"cuda_{i}"] for i in range(len(rng) - 1)]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    accelerator.step = state["step"]
