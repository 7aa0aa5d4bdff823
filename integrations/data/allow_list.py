"""Pickled data formats read without running code: an unpickler that builds only the globals a format names.

CIFAR-10's python batches and Planetoid's ``ind.*`` files are pickles. :func:`load` reads one with an unpickler
that resolves only the ``(module, name)`` pairs the format's files refer to (NumPy's array reconstruction, SciPy's
CSR matrix, ...); any other class or function a file names is refused before it is called, so a crafted file cannot
run code, whichever way it is read afterwards.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: what a format may name: ``(module, name)`` -> None (Python's own lookup) or a function giving the object to use
Allowed = Mapping[tuple[str, str], Callable[[], Any] | None]


class _AllowList(pickle.Unpickler):
    def __init__(self, file: Any, allowed: Allowed, never: str, encoding: str) -> None:
        super().__init__(file, encoding=encoding)
        self.allowed, self.never = allowed, never

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.allowed:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which {self.never}")
        resolve = self.allowed[(module, name)]
        return super().find_class(module, name) if resolve is None else resolve()


def load(path: Path, allowed: Allowed, never: str, encoding: str = "ASCII") -> Any:
    """The object the pickle ``path`` holds, built from ``allowed`` globals only; a refused one raises
    ``UnpicklingError`` saying it names what ``never`` (e.g. "a CIFAR-10 batch never holds")."""
    with path.open("rb") as f:
        return _AllowList(f, allowed, never, encoding).load()
