"""Where data lives: ``$CL_PLUGINS_DATA`` first, then the canonical default, else a clear error.

Every loader names its files relative to the data root in their canonical layout (the layout
the original projects download to), so the same code works online and offline.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "CL_PLUGINS_DATA"
DEFAULT_ROOT = Path.home() / ".cache" / "cl_plugins" / "data"


def data_root() -> Path:
    """``$CL_PLUGINS_DATA`` if set, else ``~/.cache/cl_plugins/data``."""
    return Path(os.environ.get(ENV, DEFAULT_ROOT)).expanduser()


def cache_root() -> Path:
    """``$CL_PLUGINS_CACHE``, else ``~/.cache/cl_plugins``."""
    return Path(os.environ.get("CL_PLUGINS_CACHE", Path.home() / ".cache" / "cl_plugins")).expanduser()


def cache_dir(name: str) -> Path:
    """A writable cache folder (the data root may be read-only)."""
    path = cache_root() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def fingerprint(files: list[Path], version: int = 1) -> str:
    """What a cache was built from: each file's name, size and modification time, and the loader's ``version``
    (raise it when the processing changes). A changed source gives another fingerprint, so the cache rebuilds."""
    import hashlib

    digest = hashlib.sha1(f"v{version}".encode())
    for f in sorted(files, key=lambda p: p.name):
        stat = f.stat()
        digest.update(f"{f.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:12]
