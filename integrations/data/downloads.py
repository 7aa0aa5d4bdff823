"""Fetching one file over HTTP: resumed, retried, checksummed, renamed into place only when whole.

``download(url, dest, expect=...)`` streams into ``dest``'s temporary sibling ``.<name>.part`` (kept
across failures, so the next attempt asks for the rest with an HTTP ``Range``), checks the size and
the checksums it was given, and renames into place. A checksum mismatch deletes the part file and
raises :class:`ChecksumError` naming the file, the expected and the actual hash; nothing wrong is
ever left under the final name.

``CL_PLUGINS_OFFLINE=1`` (or ``HF_HUB_OFFLINE=1``) forbids the network: :func:`offline`.
``CL_PLUGINS_DATA_MIRROR=<base>`` fetches ``https://host/path`` from ``<base>/host/path`` instead (a
local mirror; the tests serve fixtures from 127.0.0.1 this way).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cl_plugins.integrations.command_line import ReportedError

OFFLINE_VARS = ("CL_PLUGINS_OFFLINE", "HF_HUB_OFFLINE")
MIRROR_VAR = "CL_PLUGINS_DATA_MIRROR"
CHUNK = 1 << 20
RETRIES = 3


class ChecksumError(ValueError):
    """A file's content is not what its registry entry says."""


class DownloadError(ReportedError, OSError):
    """The network did not deliver the file (after the retries)."""


@dataclass(frozen=True)
class Expected:
    """What a file must be: any of size (bytes), sha256 and md5 that are known (None: not known)."""

    size: int | None = None
    sha256: str | None = None
    md5: str | None = None

    @property
    def verifiable(self) -> bool:
        return self.sha256 is not None or self.md5 is not None

    @property
    def known(self) -> bool:
        """Anything registered to check the bytes against (a size or a hash)."""
        return self.size is not None or self.verifiable


def offline() -> bool:
    """True when the environment forbids downloads."""
    return any(os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on") for var in OFFLINE_VARS)


def resolve(url: str) -> str:
    """``url``, or its copy under ``$CL_PLUGINS_DATA_MIRROR`` (``<mirror>/<host>/<path>``)."""
    mirror = os.environ.get(MIRROR_VAR, "").rstrip("/")
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f"{mirror}/{parts.netloc}{parts.path}"


def file_hashes(path: Path) -> tuple[str, str]:
    """(sha256, md5) of a file, read once."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            sha.update(block)
            md5.update(block)
    return sha.hexdigest(), md5.hexdigest()


def mismatch(path: Path, expect: Expected, name: str | Path | None = None) -> str | None:
    """Why ``path`` is not what ``expect`` says (None when it is, as far as ``expect`` knows); the message
    names the file as ``name`` (default: ``path``)."""
    name = path if name is None else name
    size = path.stat().st_size
    if expect.size is not None and size != expect.size:
        return f"{name}: size {size} bytes, expected {expect.size}"
    if not expect.verifiable:
        return None
    sha, md5 = file_hashes(path)
    if expect.sha256 is not None and sha != expect.sha256:
        return f"{name}: sha256 {sha}, expected {expect.sha256}"
    if expect.md5 is not None and md5 != expect.md5:
        return f"{name}: md5 {md5}, expected {expect.md5}"
    return None


def not_a_web_page(path: Path, name: str | Path) -> str | None:
    """What can be checked of a file with no registered size or hash: that the server did not send an HTML page
    (an error or login page) in its place. None when it did not."""
    if Path(name).suffix.lower() in (".html", ".htm"):
        return None
    with open(path, "rb") as f:
        head = f.read(512).lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html", b"<head")) or (head.startswith(b"<?xml") and b"<error" in head):
        return f"{name}: the server sent an HTML / XML error page, not the file"
    return None


def _progress(total: int | None, done: int, label: str):  # type: ignore[no-untyped-def]
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=done, unit="B", unit_scale=True, desc=label, file=sys.stderr,
                disable=None)  # fmt: skip


def _transfer(url: str, part: Path, limit: int | None, label: str, timeout: float) -> None:
    """One attempt: append to ``part`` from where it stops (``Range``), up to ``limit`` bytes if given."""
    have = part.stat().st_size if part.exists() else 0
    if limit is not None and have >= limit:
        return
    request = urllib.request.Request(url, headers={"User-Agent": "cl-plugins"})
    if have:
        request.add_header("Range", f"bytes={have}-" if limit is None else f"bytes={have}-{limit - 1}")
    elif limit is not None:
        request.add_header("Range", f"bytes=0-{limit - 1}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        if have and response.status != 206:  # the server ignored the range: start again
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        want = limit if limit is not None else total
        bar = _progress(want, have, label)
        received = have
        with open(part, "ab" if have else "wb") as f:
            while want is None or received < want:
                block = response.read(CHUNK if want is None else min(CHUNK, want - received))
                if not block:
                    break
                f.write(block)
                received += len(block)
                if bar is not None:
                    bar.update(len(block))
        if bar is not None:
            bar.close()
    if want is not None and received < want:
        raise DownloadError(f"{url}: the transfer stopped at {received} of {want} bytes")


def _is_timeout(err: BaseException) -> bool:
    return isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError)


def download(url: str, dest: Path, expect: Expected = Expected(), *, limit: int | None = None,
             retries: int = RETRIES, timeout: float | None = None) -> Path:  # fmt: skip
    """Fetch ``url`` into ``dest`` (only its first ``limit`` bytes if given) and verify it against ``expect``.

    Raises :class:`DownloadError` when the network fails ``retries`` times in a row (the part file stays, so a
    later call resumes) and :class:`ChecksumError` when the bytes are wrong (the part file is deleted). A stall
    is bounded: no data for ``timeout`` seconds (default ``$CL_PLUGINS_DOWNLOAD_TIMEOUT``, else 60) fails an
    attempt. A file with no registered size or hash is checked for what can be checked (not a web page).
    """
    timeout = float(os.environ.get("CL_PLUGINS_DOWNLOAD_TIMEOUT", "60")) if timeout is None else timeout
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")
    source = resolve(url)
    for attempt in range(1, retries + 1):
        try:
            _transfer(source, part, limit, dest.name, timeout)
            break
        except (urllib.error.URLError, OSError, ConnectionError) as err:
            if isinstance(err, urllib.error.HTTPError) and err.code == 416 and part.exists():
                break  # the part already holds everything
            if isinstance(err, urllib.error.HTTPError) and 400 <= err.code < 500:
                raise DownloadError(f"{source}: HTTP {err.code} {err.reason}") from None
            if attempt == retries:
                why = f"stalled, no data for {timeout:g} s" if _is_timeout(err) else str(err)
                raise DownloadError(f"{source}: {why} (after {retries} attempts; run again to resume)") from None
            time.sleep(min(2.0**attempt, 10.0) * float(os.environ.get("CL_PLUGINS_RETRY_SCALE", "1")))
    wrong = mismatch(part, expect, dest) or (None if expect.known else not_a_web_page(part, dest))
    if wrong is not None:
        part.unlink()
        raise ChecksumError(f"downloaded {url} is corrupt or not the registered file — {wrong}; the partial file "
                            "was deleted, run again to download it afresh")  # fmt: skip
    os.replace(part, dest)
    return dest
