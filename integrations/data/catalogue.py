"""Every dataset the adapters read: where it lives under the data root, where it comes from, what it must be.

One :class:`Dataset` per entry of :func:`registry`, declared by the host that reads it (its ``host.py``,
:mod:`cl_plugins.integrations.hosts`; this module keeps only the download-and-verify machinery): the files the
loaders read (paths relative to the data root, in the layout the original projects download to), each with
its expected size and sha256 or md5 where known, the download sources with how to unpack them, the licence,
and where the checksums come from. Per-file sizes and hashes of the entries the offline data pack holds live
in ``data_files.json``, computed from the pack by ``python scripts/data_checksums.py``.

:func:`ensure` is what loaders call (through :func:`data_path`): a missing file
of a registered dataset is downloaded (unless :func:`~cl_plugins.integrations.data.downloads.offline`) into the data
root, or into ``$CL_PLUGINS_CACHE/data`` when the data root is read-only, then verified.
"""

from __future__ import annotations

import functools
import json
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cl_plugins.integrations.data.downloads import ChecksumError, DownloadError, Expected, download, mismatch, offline
from cl_plugins.integrations.data.paths import ENV, cache_root, data_root

FILES_JSON = Path(__file__).with_name("data_files.json")
SIMCSE_HF = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
SENTEVAL = "sentence/SentEval/data/downstream"


@dataclass(frozen=True)
class Source:
    """One download: ``url`` into ``target`` (a file, or with ``kind="archive"`` a folder).

    ``kind``: ``"file"`` (saved as ``target``), ``"head"`` (the first ``expect.size`` bytes of ``url``,
    fetched with an HTTP range), ``"archive"`` (tar or zip: the folder that holds ``anchor``, a member path
    relative to ``target``, becomes ``target``). ``expect`` checks the downloaded bytes themselves.
    """

    url: str
    target: str
    kind: str = "file"
    anchor: str = ""
    expect: Expected = Expected()


@dataclass(frozen=True)
class Dataset:
    name: str
    what: str
    files: dict[str, Expected]
    sources: tuple[Source, ...]
    licence: str
    checksums: str
    origin: str = ""
    note: str = field(default="", compare=False)

    @property
    def size(self) -> int | None:
        sizes = [e.size for e in self.files.values()]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]


@functools.lru_cache(maxsize=1)
def _pack_files() -> dict[str, dict[str, list]]:
    return json.loads(FILES_JSON.read_text()) if FILES_JSON.is_file() else {}


def pack(name: str, *, repack: bool = False) -> dict[str, Expected]:
    """The files of entry ``name`` as recorded from the data pack (sha256 dropped for a repack)."""
    rows = _pack_files().get(name, {})
    return {path: Expected(size=size, sha256=None if repack else sha) for path, (size, sha) in rows.items()}


def github(repo: str, commit: str, files: dict[str, Expected], origin: Callable[[str], str]) -> tuple[Source, ...]:
    """One source per file: ``origin(target)`` is the file's path in ``repo`` at ``commit``."""
    return tuple(Source(f"https://github.com/{repo}/raw/{commit}/{origin(t)}", t, expect=e) for t, e in files.items())


def after(prefix: str, new: str = "") -> Callable[[str], str]:
    """A source path from a target path: what follows ``prefix`` in it, after ``new``."""
    return lambda target: new + target.split(prefix, 1)[1]


#: where the entries come from: functions returning datasets, added by whoever declares them (the hosts' registry
#: adds every host's when ``cl_plugins.integrations`` is imported); read once, when the catalogue is first read
_SOURCES: list[Callable[[], list[Dataset]]] = []


def declare(source: Callable[[], list[Dataset]]) -> None:
    """Add the datasets ``source()`` returns to the catalogue (before it is first read)."""
    if registry.cache_info().currsize:
        raise RuntimeError("the data catalogue was read before a source of datasets was declared into it")
    _SOURCES.append(source)


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Dataset]:
    """Every declared dataset (each host declares its own, :mod:`cl_plugins.integrations.hosts`), by name."""
    entries = [d for source in _SOURCES for d in source()]
    names = [d.name for d in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"two hosts register the same dataset name: {sorted(n for n in names if names.count(n) > 1)}")
    return {d.name: d for d in entries}


def get(name: str) -> Dataset:
    entries = registry()
    if name not in entries:
        raise ValueError(f"unknown dataset {name!r}; `cl-plugins data list` shows the {len(entries)} registered ones")
    return entries[name]


def owners(relative: str | Path) -> list[Dataset]:
    """The entries holding the file ``relative``, or any file under the folder ``relative``."""
    rel = Path(relative).as_posix().rstrip("/")
    return [d for d in registry().values() if any(f == rel or f.startswith(rel + "/") for f in d.files)]


def download_root() -> Path:
    """Where downloads go: the data root when it is writable, else ``$CL_PLUGINS_CACHE/data``."""
    root = data_root()
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return root if os.access(probe, os.W_OK) else cache_root() / "data"


def find(relative: str | Path) -> Path | None:
    """``relative`` under the data root, else under the download root; None when in neither."""
    for base in dict.fromkeys((data_root(), download_root())):
        if (base / relative).exists():
            return base / relative
    return None


def status(dataset: Dataset, deep: bool = True) -> tuple[str, list[str]]:
    """("present" | "missing" | "corrupt", the problems): every file found, and (``deep``) its size and hash."""
    problems = []
    for rel, expect in dataset.files.items():
        path = find(rel)
        if path is None:
            problems.append(f"{rel}: missing")
        elif deep and (wrong := mismatch(path, expect)) is not None:
            problems.append(wrong)
    if not problems:
        return "present", []
    return ("missing" if all(p.endswith(": missing") for p in problems) else "corrupt"), problems


def refuse_unpublished(files: list[Path], relative: str) -> None:
    """Each of ``files`` (under ``<data root>/<relative>``) whose size or hash the registry knows is checked against
    them before anything reads it: one line naming a file that is not the published one."""
    expected = {rel: (d.name, e) for d in owners(relative) for rel, e in d.files.items()}
    for path in files:
        name, expect = expected.get(f"{relative}/{path.name}", (None, None))
        if expect is not None and expect.known and (wrong := mismatch(path, expect)) is not None:
            raise ValueError(f"{wrong}: not the published file (damaged or replaced), never read; fetch it again "
                             f"(cl-plugins data download {name} --force)")  # fmt: skip


def _unpack(archive: Path, source: Source, root: Path, expected: dict[str, Expected]) -> None:
    """Extract ``archive`` beside it, check its members against ``expected``, then move the folder that holds
    ``source.anchor`` to ``source.target``: a wrong member is refused before anything is moved into place."""
    with tempfile.TemporaryDirectory(dir=archive.parent, prefix=".unpack-") as tmp:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise ValueError(f"{archive}: unsafe member path {member!r}")
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")
        hits = sorted(Path(tmp).rglob(Path(source.anchor).name))
        hits = [h for h in hits if h.as_posix().endswith(source.anchor)]
        if not hits:
            raise ValueError(f"{source.url}: the archive holds no {source.anchor}; the registry entry is outdated")
        folder = hits[0]
        for _ in Path(source.anchor).parts:
            folder = folder.parent
        moves = [(item, f"{source.target}/{item.relative_to(folder).as_posix()}")
                 for item in sorted(folder.rglob("*")) if item.is_file()]  # fmt: skip
        for item, rel in moves:
            wrong = mismatch(item, expected[rel], rel) if rel in expected else None
            if wrong is not None:
                raise ChecksumError(f"{source.url} holds a corrupt or unregistered file — {wrong}; nothing was moved "
                                    "into the data root")  # fmt: skip
        for item, rel in moves:
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(item, dest)


def fetch(dataset: Dataset, *, force: bool = False) -> Path:
    """Download ``dataset``'s missing files (all with ``force``) and verify them; returns the root they are in."""
    if not dataset.sources:
        raise FileNotFoundError(f"{dataset.name} has no download source ({dataset.checksums}); copy its files "
                                f"into {data_root()}")  # fmt: skip
    root = download_root()
    for source in dataset.sources:
        covered = [rel for rel in dataset.files if rel == source.target or rel.startswith(source.target + "/")]
        if not force and covered and all(find(rel) is not None for rel in covered):
            continue
        if source.kind == "archive":
            archive = root / ".downloads" / Path(source.url).name
            if force or not archive.exists():
                download(source.url, archive, source.expect)
            try:
                _unpack(archive, source, root, dataset.files)
            finally:  # a bad archive is fetched afresh next time, not unpacked again
                archive.unlink(missing_ok=True)
        else:
            download(source.url, root / source.target, source.expect,
                     limit=source.expect.size if source.kind == "head" else None)  # fmt: skip
    state, problems = status(dataset)
    if state != "present":
        raise ValueError(f"{dataset.name} after download: " + "; ".join(problems[:3])
                         + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""))  # fmt: skip
    return root


def ensure(relative: str | Path, hint: str = "") -> Path | None:
    """``relative`` under the data or download root, downloading its datasets when allowed; None if it
    stays missing because no registered dataset holds it or downloads are off."""
    found = find(relative)
    if found is not None:
        return found
    entries = [d for d in owners(relative) if d.sources]
    if not entries or offline():
        return None
    for dataset in entries:
        fetch(dataset)
    return find(relative)


def data_path(relative: str | Path, *, hint: str = "", root: str | Path | None = None) -> Path:
    """Absolute path of ``relative`` under the data root; raises if it does not exist.

    Without an explicit ``root``, a file of a registered dataset that is missing is downloaded first
    (:func:`cl_plugins.integrations.data.catalogue.ensure`) unless downloads are off. ``hint`` says where the
    file comes from (a download script, a URL) for the error message.
    """
    if root is not None:
        path = Path(root).expanduser() / relative
        if not path.exists():
            raise FileNotFoundError(f"{relative} was not found under the data root {root}" + _comes_from(hint))
        return path
    try:
        found = ensure(relative)
    except DownloadError as err:
        message = f"{relative} is not under the data root {data_root()} and downloading it failed ({err})"
        raise FileNotFoundError(f"{message}; set {ENV} to a folder that holds it" + _comes_from(hint)) from None
    if found is not None:
        return found
    names = [d.name for d in owners(relative)]
    fetch = f"; `cl-plugins data download {' '.join(names)}` fetches it" if names else ""
    raise FileNotFoundError(f"{relative} was not found under the data root {data_root()} "
                            f"(${ENV}={os.environ.get(ENV, '<unset>')}). Set {ENV} to the folder that holds it"
                            + _comes_from(hint) + fetch)  # fmt: skip


def _comes_from(hint: str) -> str:
    return f"; it comes from {hint}" if hint else ""
