"""One run per output folder: a manifest of its configuration, a lock, and checks before anything is written.

``OUTPUT/cl_plugins_run.json`` records a run's id and configuration. A new run refuses a folder
that holds anything unless ``--overwrite``; ``--resume`` continues only the run recorded there, with
the same configuration except :data:`MAY_CHANGE` (more epochs or steps, evaluation and checkpoint
periods, more seeds, a new learning rate from the resume on: applied, and recorded in the manifest);
anything else that differs (loss, model, data, shapes) is refused with the list of differences.
``OUTPUT/.cl_plugins.lock`` (an ``flock``, released by the kernel the moment its process dies) keeps a
second process out while a run writes there. Every trainer's ``run`` is wrapped with :func:`guarded`.

Nothing is decided on disk before the run has passed its own checks (arguments, data, checkpoint, and the loss
called once on the run's first batch): :func:`guarded` hands the run its :class:`~cl_plugins.integrations.runs.layout.
RunLayout` carrying the :class:`Claim`, and the claim is *committed* (:meth:`Claim.commit`, called by the training
loop once a resume is loaded and the loss has run, or when the run returns) and only then is the manifest written
or extended. The claim is *settled* (:meth:`Claim.settle`) once the run's first checkpoint is complete, or when it
returns:
until then ``--overwrite`` has only moved the previous run aside (``OUTPUT/.cl_plugins_replaced``), a run that
fails puts it back and removes what it wrote (a resume's manifest is restored as it was), and a run killed before
it is rolled back by the next command in the folder, or by a reader (:func:`restore_interrupted`). The moves are
journaled (``OUTPUT/.cl_plugins_overwrite.json``, written before the first one), so a stop between any two file
operations leaves a state :func:`restore` undoes exactly.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from cl_plugins.integrations.runs import atomic, bounded_json
from cl_plugins.integrations.runs.layout import MANIFEST, RunLayout

LOCK = ".cl_plugins.lock"
#: settings a resumed run may change (they extend or observe the run, or set the learning rate from the resume
#: on); each is applied, and the change is recorded in the manifest's ``resumes``
MAY_CHANGE = frozenset({"epochs", "max_steps", "stop_after_epochs", "eval_every", "eval_steps", "save_steps",
                        "checkpoint_every", "seeds", "lr", "learning_rate"})  # fmt: skip
#: the settings of :data:`MAY_CHANGE` that list a run's seeds: a resume may add to them, never drop one
SEED_LISTS = frozenset({"seeds"})
#: settings that do not describe the run itself
NOT_COMPARED = frozenset({"resume", "overwrite", "progress", "log_with", "output_dir", "keep_checkpoints"})
#: where ``--overwrite`` keeps the previous run until the new one settles (its first checkpoint, or its end)
REPLACED = ".cl_plugins_replaced"
#: the journal of an ``--overwrite``: the previous run's entries, written before any of them moves, and whether the
#: new run has settled (then what was set aside is deleted; before, a restore puts it back)
JOURNAL = ".cl_plugins_overwrite.json"
#: what the guard itself keeps in a folder (never part of a run)
OWN = frozenset({".cl_plugins.lock", REPLACED, JOURNAL})

F = TypeVar("F", bound=Callable[..., Any])
_CLAIMED: dict[Path, Claim] = {}  # folders this process runs in now (MABEL's run calls the text trainer's)


class RunConflict(ValueError):
    """The output folder belongs to another run, or a resume would continue a different one."""


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def _lock(out: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``OUTPUT/.cl_plugins.lock`` (the kernel drops it when its holder dies)."""
    path = out / LOCK
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunConflict(f"another process (pid {owner}) is running in {out}; wait for it or use another "
                              "--output_dir") from None  # fmt: skip
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break  # not a file its last holder unlinked after we opened it
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def may_change(config: Any) -> frozenset[str]:
    """:data:`MAY_CHANGE` and what the trainer's config adds (``RESUME_MAY_CHANGE``: e.g. its own epoch count)."""
    return MAY_CHANGE | frozenset(getattr(config, "RESUME_MAY_CHANGE", ()))


def _differences(stored: dict[str, Any], given: dict[str, Any], allowed: frozenset[str] = MAY_CHANGE) -> list[str]:
    keys = sorted((set(stored) | set(given)) - allowed - NOT_COMPARED)
    changed = [f"{k}: {stored.get(k)!r} -> {given.get(k)!r}" for k in keys if stored.get(k) != given.get(k)]
    for key in sorted(allowed & SEED_LISTS & set(stored)):
        if not set(_as_list(stored[key])) <= set(_as_list(given.get(key))):  # more seeds extend the run; others
            changed.append(f"{key}: {stored[key]!r} -> {given.get(key)!r} (a resume may add seeds, not drop "
                           "any: the results would be another run's)")  # fmt: skip
    return changed


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _settings(config: Any) -> dict[str, Any]:
    # through JSON, as the manifest stores them (tuples become lists, paths strings)
    return json.loads(json.dumps(asdict(config), default=str))


@dataclass
class Claim:
    """What a run may do in its folder, decided before it runs and written only at :func:`commit`."""

    out: Path
    config: dict[str, Any]
    manifest: dict[str, Any] | None  # the stored run a resume continues (None: a new run)
    before: frozenset[str]  # the folder's entries when the run started (a rollback removes the others)
    committed: bool = False  # the manifest is written
    settled: bool = False  # the run has a checkpoint (or returned): what --overwrite set aside is gone
    may_change: frozenset[str] = MAY_CHANGE  # the settings a resume may change (:func:`may_change`)
    #: the run's id: the stored one a resume continues, a new one otherwise (each checkpoint file carries it)
    run_id: str = ""

    def __post_init__(self) -> None:
        self.run_id = str(self.manifest["run_id"]) if self.manifest is not None else uuid.uuid4().hex[:12]

    def commit(self) -> None:
        """The run passed its checks: write (or extend) its manifest. Called by the training loop once a resume
        is loaded and the loss has run, and when the run returns; idempotent."""
        if self.committed:
            return
        now = time.strftime("%Y-%m-%d %H:%M:%S")
        if self.manifest is None:
            manifest, extended = {"run_id": self.run_id, "created": now, "config": self.config}, {}
        else:
            manifest, stored = self.manifest, self.manifest["config"]
            extended = {k: [stored.get(k), self.config[k]] for k in sorted(self.may_change & set(self.config))
                        if stored.get(k) != self.config[k]}  # fmt: skip
            if extended:
                manifest.setdefault("resumes", []).append({"time": now, "changed": extended})
                stored.update({k: new for k, (_, new) in extended.items()})
        if self.manifest is None or extended:
            atomic.write_json(self.out / MANIFEST, manifest)
        self.committed = True

    def settle(self) -> None:
        """The committed run has a complete checkpoint (or returned): what ``--overwrite`` set aside goes now, and
        a failure no longer rolls it back. Called by the training loop after each save."""
        if self.committed and not self.settled:
            journal = _journal(self.out)
            if journal is not None:
                _step()
                atomic.write_json(self.out / JOURNAL, {**journal, "state": "settled"})
            _finish_settle(self.out)
            self.settled = True


def _check(out: Path, config: Any) -> dict[str, Any] | None:
    """Raise when ``config`` may not run in ``out``; the stored manifest a resume continues (see the module doc)."""
    resuming, overwrite = bool(getattr(config, "resume", False)), bool(getattr(config, "overwrite", False))
    manifest = out / MANIFEST
    if resuming and overwrite:
        raise RunConflict("--resume continues the run in --output_dir and --overwrite replaces it; pass one of them")
    if manifest.is_file() and resuming:
        stored = _read_manifest(manifest)
        changed = _differences(stored["config"], _settings(config), may_change(config))
        if changed:
            raise RunConflict(f"--resume would continue run {stored['run_id']} in {out} with other settings ("
                              + "; ".join(changed) + "); resume with its settings, or start a new run with "
                              "another --output_dir (or --overwrite)")  # fmt: skip
        return stored
    if resuming:
        raise RunConflict(f"--resume: {out} holds no run to resume ({MANIFEST} is missing); start without --resume")
    occupied = [p.name for p in out.iterdir() if p.name not in OWN]
    if occupied and not overwrite:
        what = "another run" if manifest.is_file() else "files of something else"
        raise RunConflict(f"--output_dir {out} holds {what} ({', '.join(sorted(occupied)[:4])}); pass --resume to "
                          "continue it, --overwrite to replace it, or choose another --output_dir")  # fmt: skip
    return None


def _read_manifest(path: Path) -> dict[str, Any]:
    """The run's manifest, or one line naming it when it is not one (garbled, cut short, edited)."""
    try:
        stored = bounded_json.read(path)
    except ValueError as exc:
        raise RunConflict(f"{exc}: this run's record is damaged, so it cannot be resumed; start a new run "
                          "(--overwrite, or another --output_dir)") from None  # fmt: skip
    if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict) or "run_id" not in stored:
        raise RunConflict(f"{path} is not a run manifest (it needs run_id and config): it was edited or written by "
                          "something else; start a new run (--overwrite, or another --output_dir)")  # fmt: skip
    return stored


def _set_aside(out: Path) -> None:
    """Move the folder's contents into ``REPLACED`` (``--overwrite``: deleted when the run settles, restored if it
    fails before), journaled first: a stop between any two moves leaves a state :func:`restore` undoes exactly."""
    names = sorted(p.name for p in out.iterdir() if p.name not in OWN)
    _step()
    atomic.write_json(out / JOURNAL, {"state": "replacing", "entries": names})
    _step()
    (out / REPLACED).mkdir(exist_ok=True)
    for name in names:
        _step()
        (out / name).rename(out / REPLACED / name)


def _step() -> None:
    """Before each file operation of ``--overwrite``'s set-aside, settle and restore: the test hook's stop."""
    atomic.fault_point("overwrite:step")


def _journal(out: Path) -> dict[str, Any] | None:
    """The folder's ``--overwrite`` journal (None: none); one that is unreadable is refused in one line."""
    try:
        journal = json.loads((out / JOURNAL).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunConflict(f"{out / JOURNAL} is unreadable ({exc}); the previous run is in {out / REPLACED}: move "
                          "its entries back by hand and delete the journal") from None  # fmt: skip
    if not (isinstance(journal, dict) and journal.get("state") in ("replacing", "settled")
            and isinstance(journal.get("entries"), list) and all(isinstance(n, str) for n in journal["entries"])):
        raise RunConflict(f"{out / JOURNAL} is not an --overwrite journal; the previous run is in {out / REPLACED}: "
                          "move its entries back by hand and delete the journal")  # fmt: skip
    return journal


def restore(out: Path) -> None:
    """Finish what an interrupted ``--overwrite`` left (under the folder's lock): before the new run settled, the
    previous run comes back exactly (the new run's entries go); after, what was set aside goes. Idempotent: a stop
    inside it is finished by the next call. A set-aside without a journal (an earlier version's) comes back with
    nothing deleted but the new run's copies of its entries."""
    aside, journal = out / REPLACED, _journal(out)
    if journal is not None and journal["state"] == "settled":
        _finish_settle(out)
        return
    if journal is None and not aside.is_dir():
        return
    entries = set(journal["entries"]) if journal is not None else \
        {p.name for p in out.iterdir()} | {p.name for p in aside.iterdir()}  # fmt: skip
    for entry in sorted(out.iterdir()):
        if entry.name not in OWN and entry.name not in entries:
            _step()
            _remove(entry)
    for name in sorted(entries):
        if (aside / name).exists() or (aside / name).is_symlink():
            if (out / name).exists() or (out / name).is_symlink():
                _step()
                _remove(out / name)
            _step()
            (aside / name).rename(out / name)
    if aside.is_dir():
        _step()
        aside.rmdir()
    _step()
    (out / JOURNAL).unlink(missing_ok=True)


def _finish_settle(out: Path) -> None:
    _step()
    shutil.rmtree(out / REPLACED, ignore_errors=True)
    _step()
    (out / JOURNAL).unlink(missing_ok=True)


def _remove(entry: Path) -> None:
    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


def _roll_back(out: Path, before: frozenset[str] = frozenset()) -> None:
    """Undo an uncommitted run: what ``--overwrite`` set aside comes back (:func:`restore`); without one, every
    entry not in ``before`` goes."""
    if (out / JOURNAL).is_file() or (out / REPLACED).is_dir():
        restore(out)
        return
    for entry in list(out.iterdir()):
        if entry.name not in OWN | before:
            _remove(entry)


def restore_interrupted(path: Path) -> None:
    """For readers: when ``path`` lies in a run folder an interrupted ``--overwrite`` left, restore it (see
    :func:`restore`) before reading; one line when a running command holds the folder."""
    for out in (path, *list(path.parents)[:3]):
        if out.resolve() in _CLAIMED:
            return  # this process runs there: what is set aside is its own to settle
        if (out / JOURNAL).is_file() or (out / REPLACED).is_dir():
            try:
                with _lock(out):
                    restore(out)
            except RunConflict as exc:
                raise RunConflict(f"{out} is being replaced by a running --overwrite ({exc}); its previous run "
                                  f"is in {out / REPLACED} until the new run's first checkpoint") from None  # fmt: skip
            return


def _prepare(out: Path) -> bool:
    """The output folder exists and is writable, before anything trains; whether it was created now."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--output_dir {out} is a file; choose a folder")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise PermissionError(f"--output_dir {out} is not writable ({exc.strerror}); choose another folder") from None
    return created


def preflight(config: Any) -> None:
    """Raise now what :func:`guarded` would raise when the run starts (before a long evaluation, say)."""
    out = Path(config.output_dir)
    if out.is_dir():
        _check(out, config)
    elif out.exists():
        raise NotADirectoryError(f"--output_dir {out} is a file; choose a folder")


def guarded(run: F) -> F:
    """Wrap a trainer's ``run(config, ..., layout)``: output folder checked, locked for the run's duration, and
    claimed; ``run`` gets the folder's :class:`~cl_plugins.integrations.runs.layout.RunLayout` with the claim,
    which the training loop commits (or the wrapper, when ``run`` returns); rolled back when it raises before."""

    @functools.wraps(run)
    def wrapper(config: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_main_process():  # rank 0 claims the folder for the whole job
            return run(config, *args, layout=RunLayout.of(config), **kwargs)
        out = Path(config.output_dir).resolve()
        if out in _CLAIMED:
            return run(config, *args, layout=RunLayout.of(config, _CLAIMED[out]), **kwargs)
        created = _prepare(out)
        claim = None
        try:
            with _lock(out):
                restore(out)  # a command stopped inside --overwrite: its journal says what comes back
                atomic.recover_tree(out)
                claim = Claim(out, _settings(config), _check(out, config), frozenset(p.name for p in out.iterdir()),
                              may_change=may_change(config))  # fmt: skip
                if claim.manifest is None and not claim.before <= OWN:
                    _set_aside(out)
                atomic.fault_point("run:claimed")
                return _run_claimed(claim, run, config, *args, **kwargs)
        finally:
            if created and (claim is None or not claim.settled):
                with contextlib.suppress(OSError):
                    out.rmdir()

    return wrapper  # type: ignore[return-value]


def _run_claimed(claim: Claim, run: Callable[..., Any], config: Any, *args: Any, **kwargs: Any) -> Any:
    _CLAIMED[claim.out] = claim
    stored = (claim.out / MANIFEST).read_bytes() if claim.manifest is not None else None
    try:
        result = run(config, *args, layout=RunLayout.of(config, claim), **kwargs)
        claim.commit()
        claim.settle()
        return result
    except BaseException:
        if not claim.settled:
            _roll_back(claim.out, claim.before)
            if stored is not None:  # a failed resume leaves no trace in the run's record
                atomic.write_with(claim.out / MANIFEST, lambda tmp: tmp.write_bytes(stored))
        raise
    finally:
        del _CLAIMED[claim.out]
