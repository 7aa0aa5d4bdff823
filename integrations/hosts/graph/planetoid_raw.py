"""Planetoid's raw ``ind.<name>.*`` files, read by an allow-list before torch-geometric unpickles them.

Planetoid ships its features, labels and graph as Python pickles, and PyG's ``Planetoid`` reads them with
``pickle.load``: a crafted file in a folder a user names (``--data_root``) would run code. :func:`check` reads every
pickled file first with an unpickler that builds only NumPy arrays, SciPy CSR matrices and the graph's dict of lists
(any other class or function is refused) and checks what each file must hold; a file that passed it holds nothing
else, whichever way it is read afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cl_plugins.integrations.data import allow_list


def _csr_matrix() -> Any:
    import scipy.sparse  # scipy.sparse.csr, the module the files name, is deprecated (a warning) and will go

    return scipy.sparse.csr_matrix


#: the only globals a Planetoid file may name: what NumPy, SciPy (its old and new module names) and Python 2's
#: pickles of them refer to
ALLOWED: allow_list.Allowed = {
    **dict.fromkeys([("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                     ("numpy._core.multiarray", "_reconstruct"), ("collections", "defaultdict"),
                     ("__builtin__", "list"), ("builtins", "list")]),
    ("scipy.sparse.csr", "csr_matrix"): _csr_matrix, ("scipy.sparse._csr", "csr_matrix"): _csr_matrix,
}  # fmt: skip

#: what each file holds: sparse (feature) matrices, dense (label) arrays, the adjacency dict
KINDS = {"x": "matrix", "tx": "matrix", "allx": "matrix", "y": "array", "ty": "array", "ally": "array",
         "graph": "graph"}  # fmt: skip


def load(path: Path) -> Any:
    """The object a Planetoid file holds, built from allowed classes only (``UnpicklingError`` otherwise)."""
    return allow_list.load(path, ALLOWED, "a Planetoid file never does", encoding="latin1")


def check(raw: Path, name: str) -> None:
    """Refuse, in one line naming the file, any of ``raw``'s ``ind.<name>.*`` pickles that holds anything but what
    Planetoid's files hold."""
    for part, kind in KINDS.items():
        path = raw / f"ind.{name.lower()}.{part}"
        if not path.is_file():
            continue  # PyG names a missing file itself
        try:
            problem = _wrong_kind(load(path), kind)
        except Exception as exc:  # noqa: BLE001 - refused classes, garbled or cut-short files alike
            problem = f"it is not a readable pickle of NumPy / SciPy data ({type(exc).__name__}: {exc})"
        if problem:
            raise ValueError(f"{path} is not a Planetoid file: {problem.splitlines()[0]}; nothing of it was run. "
                             "Fetch the dataset again")  # fmt: skip


def _wrong_kind(obj: Any, kind: str) -> str | None:
    import numpy as np
    import scipy.sparse as sp

    if kind == "matrix" and not (sp.issparse(obj) or isinstance(obj, np.ndarray)):
        return f"a {type(obj).__name__} where a feature matrix belongs"
    if kind == "array" and not isinstance(obj, np.ndarray):
        return f"a {type(obj).__name__} where a label array belongs"
    if kind in ("matrix", "array") and getattr(obj, "dtype", np.dtype(object)).kind not in "biuf":
        return f"its values are of dtype {obj.dtype}, not numbers"
    if kind == "graph" and not (isinstance(obj, dict) and all(
            isinstance(k, int) and isinstance(v, list) and all(isinstance(n, int) for n in v)
            for k, v in obj.items())):  # fmt: skip
        return "not a dict of node -> list of neighbour ids"
    return None
