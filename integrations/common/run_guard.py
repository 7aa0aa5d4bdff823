"""One run per output folder: a manifest of its configuration, a lock, and checks before anything trains.

``OUTPUT/cl_plugins_run.json`` records a run's id and configuration. A new run refuses a folder
that holds anything unless ``--overwrite``; ``--resume`` continues only the run recorded there, with
the same configuration except :data:`MAY_CHANGE` (more epochs or steps, evaluation and checkpoint
periods, more seeds, a new learning rate from the resume on: applied, and recorded in the manifest);
anything else that differs (loss, model, data, shapes) is refused with the list of differences.
``OUTPUT/.cl_plugins.lock`` keeps a second process out while
a run writes there. Every trainer's ``run`` is wrapped with :func:`guarded`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from . import atomic

MANIFEST = "cl_plugins_run.json"
LOCK = ".cl_plugins.lock"
#: settings a resumed run may change (they extend or observe the run, or set the learning rate from the resume
#: on); each is applied, and the change is recorded in the manifest's ``resumes``
MAY_CHANGE = frozenset({"epochs", "max_steps", "stop_after_epochs", "eval_every", "eval_steps", "save_steps", "seeds",
                        "lr", "learning_rate"})  # fmt: skip
#: settings that do not describe the run itself
NOT_COMPARED = frozenset({"resume", "overwrite", "progress", "log_with", "output_dir"})

F = TypeVar("F", bound=Callable[..., Any])
_CLAIMED: set[Path] = set()  # folders this process runs in now (MABEL's run calls SimCSE's guarded loop)


class RunConflict(ValueError):
    """The output folder belongs to another run, or a resume would continue a different one."""


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _lock(out: Path) -> Iterator[None]:
    path = out / LOCK
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            owner = int(path.read_text() or 0) if path.is_file() else 0
            if owner and _alive(owner):
                raise RunConflict(f"another process (pid {owner}) is running in {out}; wait for it or use another "
                                  "--output_dir") from None  # fmt: skip
            path.unlink(missing_ok=True)  # left by a process that died
    else:
        raise RunConflict(f"could not take the lock {path}")
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _differences(stored: dict[str, Any], given: dict[str, Any]) -> list[str]:
    keys = sorted((set(stored) | set(given)) - MAY_CHANGE - NOT_COMPARED)
    return [f"{k}: {stored.get(k)!r} -> {given.get(k)!r}" for k in keys if stored.get(k) != given.get(k)]


def _settings(config: Any) -> dict[str, Any]:
    # through JSON, as the manifest stores them (tuples become lists, paths strings)
    return json.loads(json.dumps(asdict(config), default=str))


def _claim(out: Path, config: Any, record: bool = True) -> None:
    """Check (and, with ``record``, record) that ``config`` may run in ``out``; see the module docstring."""
    resuming, overwrite = bool(getattr(config, "resume", False)), bool(getattr(config, "overwrite", False))
    manifest = out / MANIFEST
    if manifest.is_file() and resuming:
        stored = json.loads(manifest.read_text())
        given = _settings(config)
        changed = _differences(stored["config"], given)
        if changed:
            raise RunConflict(f"--resume would continue run {stored['run_id']} in {out} with other settings ("
                              + "; ".join(changed) + "); resume with its settings, or start a new run with "
                              "another --output_dir (or --overwrite)")  # fmt: skip
        extended = {k: [stored["config"].get(k), given[k]] for k in MAY_CHANGE & set(given)
                    if stored["config"].get(k) != given[k]}  # fmt: skip
        if extended and record:
            stored.setdefault("resumes", []).append({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "changed": extended})
            stored["config"].update({k: new for k, (_, new) in extended.items()})
            atomic.write_json(manifest, stored)
        return
    if resuming:
        raise RunConflict(f"--resume: {out} holds no run to resume ({MANIFEST} is missing); start without --resume")
    occupied = [p.name for p in out.iterdir() if p.name != LOCK]
    if occupied and not overwrite:
        what = "another run" if manifest.is_file() else "files of something else"
        raise RunConflict(f"--output_dir {out} holds {what} ({', '.join(sorted(occupied)[:4])}); pass --resume to "
                          "continue it, --overwrite to replace it, or choose another --output_dir")  # fmt: skip
    if not record:
        return
    for name in occupied:
        target = out / name
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
    atomic.write_json(manifest, {"run_id": uuid.uuid4().hex[:12], "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                                 "config": _settings(config)})  # fmt: skip


def _prepare(out: Path) -> None:
    """The output folder exists and is writable, before anything trains."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--output_dir {out} is a file; choose a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise PermissionError(f"--output_dir {out} is not writable ({exc.strerror}); choose another folder") from None


def preflight(config: Any) -> None:
    """Raise now what :func:`guarded` would raise when the run starts (before a long evaluation, say)."""
    out = Path(config.output_dir)
    _prepare(out)
    _claim(out, config, record=False)


def guarded(run: F) -> F:
    """Wrap a trainer's ``run(config, ...)``: output folder checked, claimed and locked for the run's duration."""

    @functools.wraps(run)
    def wrapper(config: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_main_process():  # rank 0 claims the folder for the whole job
            return run(config, *args, **kwargs)
        out = Path(config.output_dir).resolve()
        if out in _CLAIMED:
            return run(config, *args, **kwargs)
        _prepare(out)
        with _lock(out):
            _claim(out, config)
            _CLAIMED.add(out)
            try:
                return run(config, *args, **kwargs)
            finally:
                _CLAIMED.discard(out)

    return wrapper  # type: ignore[return-value]
