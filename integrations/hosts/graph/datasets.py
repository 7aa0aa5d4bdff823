"""TU and Planetoid datasets from the data root, processed into a writable cache.

The data root holds the canonical raw layouts (``graphs/tu/<NAME>/raw/<NAME>_A.txt`` ...,
``graphs/planetoid/<Name>/raw/ind.<name>.x`` ...), which may be read-only; the raw files are
copied into ``$CL_PLUGINS_CACHE/<kind>/<NAME>/raw`` and torch-geometric writes ``processed/``
there. Without a local copy, torch-geometric downloads from its canonical URL into the cache.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from cl_plugins.arguments import strict_flags
from cl_plugins.integrations.data.downloads import OFFLINE_VARS, offline
from cl_plugins.integrations.data.paths import ENV, cache_dir, data_root, fingerprint
from cl_plugins.integrations.hosts.graph import planetoid_raw
from cl_plugins.integrations.runs.atomic import first_line

TU_SUBDIR = "graphs/tu"
PLANETOID_SUBDIR = "graphs/planetoid"
FEATURES = ("auto", "labels", "degree", "constant")


#: raise when the processing of the raw files changes: every cached processed copy is then rebuilt
LOADER_VERSION = 1


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file (byte {exc.start} is not UTF-8); fetch it again") from None
    if text and not text.endswith("\n"):
        raise ValueError(f"{path}: the last line has no newline; the file looks truncated (fetch it again)")
    return text.splitlines()


def _ints(path: Path, width: int) -> list[list[int]]:
    """Each line as ``width`` comma-separated integers; the first bad line is named."""
    rows = []
    for lineno, line in enumerate(_lines(path), start=1):
        parts = line.split(",")
        try:
            row = [int(p) for p in parts]
        except ValueError:
            row = []
        if len(row) != width:
            raise ValueError(f"{path}:{lineno}: expected {width} integer(s), got {line!r}")
        rows.append(row)
    return rows


def check_tu_raw(raw: Path, name: str) -> None:
    """Cross-check a TU dataset's raw files (counts, id ranges, truncation) before PyG processes them.

    PyG reads a cut ``A.txt`` or ``graph_indicator.txt`` without complaint and builds fewer or different graphs.
    """
    indicator = [r[0] for r in _ints(raw / f"{name}_graph_indicator.txt", 1)]
    n_nodes, n_graphs = len(indicator), max(indicator, default=0)
    if sorted(set(indicator)) != list(range(1, n_graphs + 1)) or indicator != sorted(indicator):
        raise ValueError(f"{raw / f'{name}_graph_indicator.txt'}: graph ids must run 1..G in order")
    labels = _ints(raw / f"{name}_graph_labels.txt", 1)
    if len(labels) != n_graphs:
        raise ValueError(f"{raw / f'{name}_graph_labels.txt'} has {len(labels)} lines for {n_graphs} graphs")
    edges = _ints(raw / f"{name}_A.txt", 2)
    for lineno, (a, b) in enumerate(edges, start=1):
        if not (1 <= a <= n_nodes and 1 <= b <= n_nodes):
            raise ValueError(f"{raw / f'{name}_A.txt'}:{lineno}: node id out of 1..{n_nodes} ({a}, {b})")
    for suffix, expected in (("node_labels", n_nodes), ("node_attributes", n_nodes), ("edge_labels", len(edges)),
                             ("edge_attributes", len(edges))):  # fmt: skip
        path = raw / f"{name}_{suffix}.txt"
        if path.is_file() and len(_lines(path)) != expected:
            raise ValueError(f"{path} has {len(_lines(path))} lines for {expected} {suffix.split('_')[0]}s")


def _stage_raw(kind: str, subdir: str, name: str, root: str | Path | None) -> Path:
    """Copy ``<root>/<subdir>/<name>/raw`` into a cache folder keyed by the raw files' fingerprint (name, size,
    modification time, :data:`LOADER_VERSION`); return that folder, the root PyG processes into. Changed raw
    files (fixed, or corrupted) get a new folder, so stale processed data is never used."""
    src = Path(root).expanduser() / name / "raw" if root is not None else _registered_raw(subdir, name)
    if not src.is_dir():
        if root is not None:  # the folder the user named, not the data root
            raise FileNotFoundError(f"--data_root {root}: no {name}/raw folder there ({src} is missing); pass the "
                                    f"folder that holds {name}/raw, or leave --data_root out to use {ENV}")  # fmt: skip
        if offline():
            off = " / ".join(OFFLINE_VARS)
            raise FileNotFoundError(f"{name}: no raw files under {src}, and downloads are off ({off}); set {ENV} to "
                                    f"the data root that holds {subdir}/{name}/raw")  # fmt: skip
        return cache_dir(kind)  # an unregistered dataset: PyG downloads into the plain cache
    files = [f for f in src.iterdir() if f.is_file()]
    cache = cache_dir(kind) / fingerprint(files, LOADER_VERSION)
    dst = cache / name / "raw"
    if not dst.is_dir():
        if root is None:  # the data root's files are the registered ones; a folder the user names holds their own
            from cl_plugins.integrations.data import catalogue  # (Planetoid's pickles: read by planetoid_raw first)

            catalogue.refuse_unpublished(files, f"{subdir}/{name}/raw")
        if kind == "tu":
            check_tu_raw(src, name)
        tmp = dst.with_name(f"raw.{os.getpid()}.tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, tmp / f.name)
        try:
            tmp.rename(dst)
        except OSError:  # another process (a second rank) staged the same files first
            if not dst.is_dir():
                raise
            shutil.rmtree(tmp)
    return cache


def _registered_raw(subdir: str, name: str) -> Path:
    """``<data root>/<subdir>/<name>/raw``, downloaded (checksummed) first when the registry has it."""
    from cl_plugins.integrations.data import catalogue

    relative = f"{subdir}/{name}/raw"
    found = catalogue.ensure(relative)
    return found if found is not None else data_root() / relative


def _download_error(name: str, subdir: str, err: Exception) -> FileNotFoundError:
    return FileNotFoundError(
        f"{name}: no raw files under {data_root() / subdir / name / 'raw'} and the download failed ({err}). "
        f"Set {ENV} to the data root that holds {subdir}/{name}/raw"
    )


def _degree_features(data: Any, max_degree: int) -> torch.Tensor:
    from torch_geometric.utils import degree

    deg = degree(data.edge_index[0], data.num_nodes, dtype=torch.long).clamp(max=max_degree)
    return torch.nn.functional.one_hot(deg, max_degree + 1).float()


class _AddFeatures:
    """Node features for graphs without node labels: one-hot degree (capped) or a constant 1."""

    def __init__(self, kind: str, max_degree: int) -> None:
        self.kind, self.max_degree = kind, max_degree

    def __call__(self, data: Any) -> Any:
        data = data.clone()
        if self.kind == "degree":
            data.x = _degree_features(data, self.max_degree)
        else:
            data.x = torch.ones(data.num_nodes, 1)
        return data


def pyg_data_classes() -> tuple[type, ...]:
    """The classes a pickled list of PyG ``Data`` is made of (allowed when a cache is read)."""
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    return Data, DataEdgeAttr, DataTensorAttr, GlobalStorage


#: what PyG writes into ``processed/``: the pre-transform's and pre-filter's repr, and the collated data
PROCESSED_TYPES: dict[str, type] = {"pre_transform.pt": str, "pre_filter.pt": str, "data.pt": tuple}


def _checked_processed(folder: Path) -> None:
    """Remove ``folder`` (PyG's ``processed/``; it is rebuilt from the raw files) unless every file in it loads with
    ``weights_only=True`` and only PyG's data classes. PyG itself reads ``pre_transform.pt`` with full unpickling
    and falls back to it for ``data.pt``, so a file planted there could run code; once a file passed this check,
    it holds nothing but tensors, plain values and those classes, whichever way it is read."""
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        try:
            with torch.serialization.safe_globals(list(pyg_data_classes())):
                saved = torch.load(path, map_location="cpu", weights_only=True)
            expected = PROCESSED_TYPES.get(path.name, object)
            if not isinstance(saved, expected):
                raise TypeError(f"a {type(saved).__name__}, where PyG writes a {expected.__name__}")
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with it, the processed copy is rebuilt
            warnings.warn(f"rebuilding the graph cache {folder}: {path.name} is unreadable or holds other objects "
                          f"({type(exc).__name__}: {first_line(exc)})", stacklevel=3)  # fmt: skip
            shutil.rmtree(folder)
            return


def _open_cached(build: Callable[[], Any], folder: Path) -> Any:
    """``build()`` (a PyG dataset over the cache) after :func:`_checked_processed`; a processed copy that PyG
    still cannot read (other objects of the allowed kinds) is removed and rebuilt once from the raw files."""
    _checked_processed(folder)
    with torch.serialization.safe_globals(list(pyg_data_classes())):
        try:
            return build()
        except Exception as exc:  # noqa: BLE001
            if not folder.is_dir():
                raise
            warnings.warn(f"rebuilding the graph cache {folder} ({type(exc).__name__}: {first_line(exc)})",
                          stacklevel=3)  # fmt: skip
            shutil.rmtree(folder)
            return build()


def load_tu(name: str, *, root: str | Path | None = None, features: str = "auto", max_degree: int = 64) -> Any:
    """A torch-geometric ``TUDataset`` ready for GIN.

    Args:
        name: TU dataset name (MUTAG, PROTEINS, NCI1, IMDB-BINARY, any other in the raw format).
        root: folder holding ``<name>/raw``; default ``$CL_PLUGINS_DATA/graphs/tu``.
        features: ``"auto"`` uses the node labels (one-hot) where the dataset has them and a
            constant feature otherwise (GraphCL's choice); ``"labels"`` requires node labels;
            ``"degree"`` / ``"constant"`` replace the features by a capped one-hot degree / a 1.
        max_degree: cap of the one-hot degree.
    """
    from torch_geometric.datasets import TUDataset

    if features not in FEATURES:
        raise ValueError(f"features must be one of {FEATURES}, got {features!r}")
    cache = _stage_raw("tu", TU_SUBDIR, name, root)
    try:
        dataset = _open_cached(lambda: TUDataset(str(cache), name), cache / name / "processed")
    except Exception as err:  # noqa: BLE001 - a failed download surfaces as many error types
        if (cache / name / "raw" / f"{name}_A.txt").exists():
            raise
        raise _download_error(name, TU_SUBDIR, err) from err
    has_labels = dataset.num_node_features > 0
    if features == "labels" and not has_labels:
        raise ValueError(f"{name} has no node labels; pass features='degree' or 'constant'")
    if features in ("degree", "constant") or (features == "auto" and not has_labels):
        kind = "degree" if features == "degree" else "constant"
        dataset.transform = _AddFeatures(kind, max_degree)
    return dataset


@strict_flags
def load_planetoid(name: str, *, root: str | Path | None = None, normalize_features: bool = True) -> Any:
    """Planetoid Cora / CiteSeer / PubMed (one graph with the public split masks).

    ``root`` is the folder holding ``<name>/raw``; default ``$CL_PLUGINS_DATA/graphs/planetoid``.
    Features are row-normalised as GRACE does (``T.NormalizeFeatures``).
    """
    import torch_geometric.transforms as T
    from torch_geometric.datasets import Planetoid

    cache = _stage_raw("planetoid", PLANETOID_SUBDIR, name, root)
    if (cache / name / "raw").is_dir():  # whoever put them there: PyG unpickles them
        planetoid_raw.check(cache / name / "raw", name)
    try:
        transform = T.NormalizeFeatures() if normalize_features else None
        return _open_cached(lambda: Planetoid(str(cache), name, transform=transform), cache / name / "processed")
    except Exception as err:  # noqa: BLE001
        if (cache / name / "raw").is_dir() and any((cache / name / "raw").iterdir()):
            raise
        raise _download_error(name, PLANETOID_SUBDIR, err) from err
