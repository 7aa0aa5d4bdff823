"""A run's training checkpoint: written and read without pickle, and knowing whose it is.

A checkpoint folder (``<unit>/checkpoints/step_<n>/``) holds exactly:

=================================================  ==============================================================
file                                               what
=================================================  ==============================================================
``model.safetensors`` (``model_<i>`` after one)    the weights of each trained model (unwrapped)
``state.json`` + ``state.safetensors``             optimizers, schedulers, the gradient scaler and the trainer's
                                                   own objects (the run's records, early stopping)
``random_states_<rank>.json`` + ``.safetensors``   each process's random generators
=================================================  ==============================================================

Every file carries the checkpoint's :class:`Identity` (the run's id, its unit, the step, the world size; the random
states their rank too). Before anything of a checkpoint is read, :func:`problem` checks that its files are exactly
the ones the run needs (a function of the run, not of the folder's completion marker, which anyone who can write the
folder could rewrite) and that each belongs to this run, unit, step and rank. A checkpoint that still holds pickles
(written by an earlier version through Accelerate's ``save_state``) is never read (:func:`pickles`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cl_plugins.integrations.runs import atomic, plain_state, random_states
from cl_plugins.integrations.runs.atomic import MARKER

STATE = "state"
#: suffixes of the files Accelerate pickled into checkpoints written before this format
PICKLED = (".pkl", ".bin", ".pt", ".pth")


@dataclass(frozen=True)
class Identity:
    """Whose a checkpoint is.

    Args:
        run: the run's id (its manifest's ``run_id``; "" for a loop run without the guard)
        unit: the run's unit the checkpoint belongs to (``seed_0``, ...; "" for the run folder itself)
        world_size: the processes that trained it
    """

    run: str
    unit: str
    world_size: int

    def at(self, step: int, rank: int | None = None) -> dict[str, str]:
        """The identity a file of the checkpoint at ``step`` carries (a process's file: with its ``rank``)."""
        own = {"run": self.run, "unit": self.unit, "step": str(step), "world_size": str(self.world_size)}
        return own if rank is None else {**own, "rank": str(rank)}


@dataclass(frozen=True)
class Contents:
    """What a run checkpoints: its models, optimizers, schedulers and objects with a ``state_dict`` (the gradient
    scaler comes from the accelerator)."""

    models: tuple[Any, ...]
    optimizers: tuple[Any, ...] = ()
    schedulers: tuple[Any, ...] = ()
    objects: tuple[Any, ...] = ()

    def model_files(self) -> list[str]:
        return ["model.safetensors" if i == 0 else f"model_{i}.safetensors" for i in range(len(self.models))]

    def files(self, identity: Identity, step: int) -> dict[str, dict[str, str]]:
        """Every file the checkpoint of this run at ``step`` holds, with the identity it carries."""
        shared = identity.at(step)
        stems = {STATE: shared} | {random_states.stem(Path(), r).name: identity.at(step, r)
                                   for r in range(identity.world_size)}  # fmt: skip
        return {**dict.fromkeys(self.model_files(), shared),
                **{f"{stem}.{ext}": carried for stem, carried in stems.items() for ext in ("json", "safetensors")}}


def step_of(path: Path) -> int:
    return int(path.name.rsplit("_", 1)[1])


def save(accelerator: Any, path: Path, contents: Contents, identity: Identity) -> None:
    """The run's checkpoint at ``path`` (a ``step_<n>`` folder), staged and published atomically, on every process."""
    from safetensors.torch import save_model

    tmp, step = atomic.staging(path), step_of(path)
    if accelerator.is_main_process:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for name, model in zip(contents.model_files(), contents.models, strict=True):
            save_model(accelerator.unwrap_model(model), str(tmp / name), identity.at(step), force_contiguous=True)
        plain_state.write(tmp / STATE, _state(accelerator, contents), identity.at(step))
    accelerator.wait_for_everyone()
    random_states.save(accelerator, tmp, identity.at(step, accelerator.process_index))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic.publish(tmp, path)
        atomic.fault_point("save:published")
    accelerator.wait_for_everyone()


def _state(accelerator: Any, contents: Contents) -> dict[str, Any]:
    scaler = accelerator.scaler
    return {"optimizers": [o.state_dict() for o in contents.optimizers],
            "schedulers": [s.state_dict() for s in contents.schedulers],
            "scaler": None if scaler is None else scaler.state_dict(),
            "objects": [o.state_dict() for o in contents.objects]}  # fmt: skip


def pickles(path: Path) -> list[str]:
    """The pickled files of a checkpoint an earlier version wrote (never read)."""
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file() and p.suffix in PICKLED)


def problem(path: Path, contents: Contents, identity: Identity) -> str | None:
    """Why checkpoint ``path`` is not this run's, in a few words naming the file; None when every file is."""
    found = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file() and p.name != MARKER}
    needed = contents.files(identity, step_of(path))
    written_by = _world_size(path / contents.model_files()[0])
    if written_by not in (None, identity.world_size):
        return (f"it was written by {written_by} processes and this run has {identity.world_size}; resume with "
                f"{written_by} (accelerate launch --num_processes {written_by})")
    for name in sorted(needed.keys() - found):
        return f"{name} is missing"
    for name in sorted(found - needed.keys()):
        return f"{name} does not belong in a checkpoint of this run"
    try:
        for name, expected in sorted(needed.items()):
            carried = {k: v for k, v in plain_state.identity_of(path / name).items() if k in expected}
            if carried != expected:
                return f"{name} belongs to {_describe(carried)}, not to this checkpoint ({_describe(expected)})"
    except plain_state.StateFileError as exc:
        return str(exc)
    return None


def _world_size(model_file: Path) -> int | None:
    try:
        written_by = plain_state.identity_of(model_file).get("world_size", "")
    except plain_state.StateFileError:
        return None
    return int(written_by) if written_by.isdigit() else None


def _describe(identity: dict[str, str | None]) -> str:
    parts = [f"run {identity.get('run') or '-'}", f"unit {identity.get('unit') or '-'}",
             f"step {identity.get('step')}", f"{identity.get('world_size')} processes"]  # fmt: skip
    return ", ".join(parts + ([f"rank {identity['rank']}"] if "rank" in identity else []))


def load(accelerator: Any, path: Path, contents: Contents) -> None:
    """Every state of checkpoint ``path`` into the run (which :func:`problem` found to be its own)."""
    from safetensors.torch import load_model

    for name, model in zip(contents.model_files(), contents.models, strict=True):
        # read on the CPU: load_state_dict copies into the parameters wherever they are (a device name such as
        # "cpu:0", which a CPU process group gives, is one safetensors refuses)
        _fit(path / name, "model", lambda m=model, n=name: load_model(accelerator.unwrap_model(m), str(path / n)))
    state = plain_state.read(path / STATE)
    _fit(path / f"{STATE}.json", "training state", lambda: _load_state(accelerator, contents, state))
    random_states.restore(accelerator, path)


def _load_state(accelerator: Any, contents: Contents, state: dict[str, Any]) -> None:
    for key, owners in (("optimizers", contents.optimizers), ("schedulers", contents.schedulers),
                        ("objects", contents.objects)):  # fmt: skip
        if len(state[key]) != len(owners):
            raise ValueError(f"{len(state[key])} {key}, the run has {len(owners)}")
        for owner, saved in zip(owners, state[key], strict=True):
            owner.load_state_dict(saved)
    if (state["scaler"] is None) != (accelerator.scaler is None):
        raise ValueError("a gradient scaler's state where the run has none, or none where it has one")
    if accelerator.scaler is not None:
        accelerator.scaler.load_state_dict(state["scaler"])


def _fit(file: Path, what: str, load: Any) -> None:
    try:
        load()
    except plain_state.StateFileError:
        raise
    except Exception as exc:  # shapes, names or structure other than the run's (KeyError, RuntimeError, ...)
        raise plain_state.StateFileError(f"{file} does not fit this run's {what} ({type(exc).__name__}: "
                                         f"{atomic.first_line(exc)})") from None  # fmt: skip
