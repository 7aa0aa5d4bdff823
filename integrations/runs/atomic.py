"""Files and folders that a kill never leaves half-written.

Everything a run writes for later (checkpoints, ``best/``, ``model/``, results, caches) is written
to a temporary sibling and renamed into place; a folder gets a completion marker as its last file,
and a previous complete folder of the same name stays until the new one is complete. Readers use
only complete folders (:func:`is_complete`, :func:`latest_complete`).

``CL_PLUGINS_FAULT=<point>[:<n>]`` kills the process (SIGKILL) the n-th time it reaches ``point``
(:func:`fault_point`), so tests can interrupt a save at every stage.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from . import bounded_json

MARKER = ".cl_plugins_complete"
_REACHED: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Kill this process here when ``CL_PLUGINS_FAULT`` names this point (test hook)."""
    spec = os.environ.get("CL_PLUGINS_FAULT", "")
    point, _, nth = spec.rpartition(":")
    if not nth.isdigit():
        point, nth = spec, "1"
    if point != name:
        return
    _REACHED[name] = _REACHED.get(name, 0) + 1
    if _REACHED[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_with(path: Path, write: Callable[[Path], Any]) -> None:
    """``write(tmp)`` into a temporary sibling of ``path``, then rename it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    write(tmp)
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    """``path.write_text(text)``, atomically."""
    write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, default=str))


def save_npz(path: Path, **arrays: Any) -> None:
    """``numpy.savez(path, **arrays)``, atomically (through a file object: ``savez`` would rename a path)."""
    import numpy as np

    def write(tmp: Path) -> None:
        with tmp.open("wb") as f:
            np.savez(f, **arrays)

    write_with(path, write)


def torch_save(obj: Any, path: Path) -> None:
    """``torch.save(obj, path)``, atomically."""
    import torch

    write_with(path, lambda tmp: torch.save(obj, tmp))


def staging(folder: Path, per_process: bool = False) -> Path:
    """The temporary sibling a folder is written into (one per process where several may write it at once)."""
    return folder.with_name(folder.name + (f".{os.getpid()}" if per_process else "") + ".partial")


def publish(tmp: Path, folder: Path) -> None:
    """Mark the written folder ``tmp`` complete and move it to ``folder``, replacing a previous one only now.

    Two processes publishing the same folder (ranks building one cache) both succeed; the last one wins.
    """
    fault_point("save:written")
    (tmp / MARKER).write_text(json.dumps({"time": time.time(), "files": listing(tmp)}))
    fault_point("save:marked")
    try:
        if folder.exists():
            old = folder.with_name(f"{folder.name}.{os.getpid()}.old")
            folder.rename(old)
            fault_point("save:swapped")
            tmp.rename(folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(folder)
    except OSError:
        if not (folder / MARKER).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # another process published a complete copy in between


@contextlib.contextmanager
def folder(final: Path) -> Iterator[Path]:
    """Write a folder's files into the yielded temporary folder; it becomes ``final`` when the block ends."""
    tmp = staging(final, per_process=True)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    yield tmp
    publish(tmp, final)


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def listing(folder: Path) -> dict[str, list[int | str]]:
    """Every file under ``folder`` (its marker aside) with its size and SHA-256: what the marker records."""
    files = (p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MARKER)
    return {p.relative_to(folder).as_posix(): [p.stat().st_size, sha256(p)] for p in files}


def damage(folder: Path) -> str | None:
    """What differs between a complete folder and the files its marker lists (missing, added, changed), in a few
    words naming the file; None when every file is the one that was written."""
    try:  # bounded: a forged marker nested a million levels deep is unreadable, not a RecursionError
        listed = bounded_json.read(folder / MARKER)["files"]
        if not isinstance(listed, dict):
            raise TypeError(type(listed).__name__)
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MARKER} (its list of files) is missing or unreadable"
    found = listing(folder)
    for name in sorted(set(listed) | set(found)):
        if name not in found:
            return f"{name} is missing"
        if name not in listed:
            return f"{name} was not written with it"
        if found[name] != listed[name]:  # [size, SHA-256], as the marker holds them
            return f"{name} is not the file that was written (its size or SHA-256 differs)"
    return None


def is_complete(path: Path) -> bool:
    """A folder written through this module and finished (its marker is there)."""
    recover(path)
    return (path / MARKER).is_file()


def recover(path: Path) -> None:
    """Finish a replacement a kill interrupted between its two renames (the complete new folder is staged)."""
    if path.exists():
        return
    for tmp in sorted(path.parent.glob(f"{path.name}*.partial")):
        if (tmp / MARKER).is_file():
            with contextlib.suppress(OSError):  # another reader may finish it first
                tmp.rename(path)
            for old in path.parent.glob(f"{path.name}.*.old"):
                shutil.rmtree(old, ignore_errors=True)
            return


def recover_tree(root: Path, depth: int = 4) -> None:
    """Finish or clear every save a kill interrupted under ``root``: a complete staged folder whose target is
    missing is moved into place, an incomplete one is removed, and so is a replaced ``*.old`` folder whose
    successor is complete. Only for a folder no other process writes now (a run's, under its lock)."""
    if depth < 0 or not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.is_symlink():
            continue
        staged = re.fullmatch(r"(.+?)(?:\.\d+)?\.partial", entry.name)
        replaced = re.fullmatch(r"(.+)\.\d+\.old", entry.name)
        if staged:
            target = entry.with_name(staged.group(1))
            if (entry / MARKER).is_file() and not target.exists():
                entry.rename(target)
            else:
                shutil.rmtree(entry, ignore_errors=True)
        elif replaced and (entry.with_name(replaced.group(1)) / MARKER).is_file():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            recover_tree(entry, depth - 1)
    for entry in root.glob(".*.tmp"):  # a file a kill left half-written beside its target
        if re.fullmatch(r"\..+\.\d+\.tmp", entry.name) and entry.is_file():
            entry.unlink()
    for entry in root.glob("*.old"):  # a replaced folder whose successor was staged in the loop above
        target = entry.with_name(entry.name.rsplit(".", 2)[0])
        if (target / MARKER).is_file():
            shutil.rmtree(entry, ignore_errors=True)


def latest_complete(parent: Path, prefix: str) -> Path | None:
    """The complete ``<prefix>_<N>`` sub-folder of ``parent`` with the largest N; incomplete ones are skipped
    with a warning (a run was killed while writing them)."""
    found = [p for p in parent.glob(f"{prefix}_*") if re.fullmatch(rf"{re.escape(prefix)}_\d+", p.name)]
    for path in sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]), reverse=True):
        if is_complete(path):
            return path
        warnings.warn(f"skipping {path}: incomplete (the run was interrupted while writing it)", stacklevel=2)
    return None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none), for one-line errors."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # terminal colours some libraries put in messages
    return text.splitlines()[0] if text else type(exc).__name__


def load_torch(path: Path, what: str, keys: tuple[str, ...] = ()) -> Any:
    """A torch file written by a run (on any device), or a one-line error naming the file and what is wrong.

    Read with ``weights_only=True``: tensors and plain values only, so a crafted file cannot run code."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated (EOFError), not a torch file (UnpicklingError), corrupt zip (RuntimeError)
        why = first_line(exc)
        if "weights_only" in str(exc) or "Unsupported global" in str(exc):
            raise ValueError(f"{path} is not a {what}: it holds Python objects other than tensors and plain values, "
                             "which are never unpickled (they could run code)") from None  # fmt: skip
        raise ValueError(f"{path} is not a readable {what} ({type(exc).__name__}: {why}); was it cut short "
                         "while being written or downloaded?") from None  # fmt: skip
    missing = [k for k in keys if not isinstance(saved, dict) or k not in saved]
    if missing:
        raise ValueError(f"{path} is not a {what}: it lacks {', '.join(missing)}")
    return saved


def load_cache(path: Path, classes: Sequence[type] = ()) -> Any | None:
    """A cached torch file, or None (after a warning, the file removed) when it cannot be read: caches rebuild.

    Read with ``weights_only=True``: tensors, plain values and the ``classes`` the caller names (its own
    data classes) only, so a file planted in the cache folder cannot run code."""
    import torch

    if not path.is_file():
        return None
    try:
        with torch.serialization.safe_globals(list(classes)):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        warnings.warn(f"rebuilding the unreadable cache {path} ({type(exc).__name__}: {first_line(exc)})", stacklevel=2)
        path.unlink(missing_ok=True)
        return None
