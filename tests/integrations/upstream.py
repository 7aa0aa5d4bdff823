"""Import the real upstream seam files from ``../shared/upstream/`` (pinned commits, see its README).

The research repositories import their own files by top-level name (``model``, ``losses``, ``aug``)
and several of them are called ``model.py``; :func:`load` imports one folder's files with that
folder first on ``sys.path`` and takes their names out of ``sys.modules`` again afterwards, so
GRACE's ``model`` never shadows MABEL's. Every shim is written here, minimal, with its reason.
Tests skip with a clear message only when the folder is absent.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT

#: ``CL_PLUGINS_UPSTREAM`` points elsewhere (the GPU check's bundle carries the files it needs)
UPSTREAM = Path(os.environ.get("CL_PLUGINS_UPSTREAM", ROOT.parent / "shared" / "upstream"))


def folder(relative: str) -> Path:
    path = UPSTREAM / relative
    if not path.is_dir():
        pytest.skip(f"upstream code not found at {path} (the ../shared/upstream fixtures sit beside the checkout)")
    return path


@contextlib.contextmanager
def _isolated(path: Path, stubs: dict[str, types.ModuleType]) -> Iterator[None]:
    local = {p.stem for p in path.glob("*.py")} | {p.name for p in path.iterdir() if (p / "__init__.py").exists()}
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in local or k in stubs}
    for k in saved:
        del sys.modules[k]
    sys.modules.update(stubs)
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))
        for k in [k for k in sys.modules if k.split(".")[0] in local or k in stubs]:
            del sys.modules[k]
        sys.modules.update(saved)


def load(relative: str, name: str, stubs: dict[str, types.ModuleType] | None = None, **globals_: Any) -> Any:
    """Import ``name`` from the upstream folder ``relative``; ``globals_`` are set on it first
    (module globals that upstream sets under ``__main__``)."""
    path = folder(relative)
    # a unique name that stays in sys.modules, as an imported module's would (patches find a model's module)
    alias = "upstream_" + "_".join(Path(relative).parts + (name,))
    with _isolated(path, stubs or {}):
        spec = importlib.util.spec_from_file_location(alias, path / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        vars(module).update(globals_)
        sys.modules[alias] = module
        spec.loader.exec_module(module)
    sys.modules[alias] = module
    return module


def stub(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(attrs)
    return module


# ---------------------------------------------------------------------------- per repository
@functools.lru_cache(maxsize=1)
def simcse_github() -> Any:
    """SimCSE's ``simcse/models.py`` at the pinned commit (loaded alone: its package ``__init__``
    imports ``tool.py``, which is not among the seam files)."""
    return load("SimCSE/simcse", "models")


def _logging_stubs() -> dict[str, types.ModuleType]:
    # GraphCL imports pandas / seaborn / matplotlib only to print and plot evaluation results
    plt = stub("matplotlib.pyplot")
    return {"pandas": stub("pandas"), "seaborn": stub("seaborn"), "matplotlib": stub("matplotlib", pyplot=plt),
            "matplotlib.pyplot": plt}  # fmt: skip


@functools.lru_cache(maxsize=1)
def graphcl_tu() -> Any:
    """GraphCL's ``unsupervised_TU/gsimclr.py``: ``args`` and ``dataset_num_features`` are set under
    ``__main__`` upstream; PyG 2.x moved ``DataLoader`` to ``torch_geometric.loader``."""
    import torch_geometric.data
    import torch_geometric.loader

    if not hasattr(torch_geometric.data, "DataLoader"):
        torch_geometric.data.DataLoader = torch_geometric.loader.DataLoader
    return load("GraphCL/unsupervised_TU", "gsimclr", _logging_stubs(),
                args=types.SimpleNamespace(prior=False), dataset_num_features=5)  # fmt: skip


@functools.lru_cache(maxsize=1)
def graphcl_transfer() -> Any:
    """GraphCL's ``chem/pretrain_graphcl.py``; tensorboardX, pandas (logging) and torch_scatter (a
    compiled extension without wheels here; Hu et al.'s GNN uses ``scatter_add``) are stubbed."""
    import torch_geometric.data
    import torch_geometric.loader
    from torch_geometric.utils import scatter

    if not hasattr(torch_geometric.data, "DataLoader"):
        torch_geometric.data.DataLoader = torch_geometric.loader.DataLoader

    def scatter_add(src: Any, index: Any, dim: int = 0, dim_size: int | None = None) -> Any:
        return scatter(src, index, dim=dim, dim_size=dim_size, reduce="sum")

    stubs = {**_logging_stubs(), "tensorboardX": stub("tensorboardX", SummaryWriter=object),
             "torch_scatter": stub("torch_scatter", scatter_add=scatter_add, scatter=scatter)}  # fmt: skip
    return load("GraphCL/transferLearning_MoleculeNet_PPI/chem", "pretrain_graphcl", stubs)


@functools.lru_cache(maxsize=1)
def grace() -> Any:
    """GRACE's ``model.py`` (imports as is)."""
    return load("GRACE", "model")


@functools.lru_cache(maxsize=1)
def mabel() -> Any:
    """MABEL's ``training/model.py`` (imports as is on transformers 5; its ``cl_init`` needs
    :func:`cl_plugins.integrations.modalities.text.cl_forward.enable_modern_transformers`)."""
    return load("MABEL/training", "model")


@functools.lru_cache(maxsize=1)
def mabel_model_arguments() -> type:
    """MABEL's real ``ModelArguments`` dataclass, taken from ``training/train.py`` by its source: the
    file itself imports ``datasets`` and MABEL's ``trainer.py``, which are not among the seam files."""
    source = (folder("MABEL/training") / "train.py").read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "ModelArguments")
    module = stub("upstream_MABEL_training_train", dataclass=dataclass, field=field, Optional=Any,
                  MODEL_TYPES=())  # MODEL_TYPES: only in a help string  # fmt: skip
    sys.modules[module.__name__] = module  # dataclasses looks the class's module up
    exec(compile(ast.Module([node], []), "MABEL/training/train.py", "exec"), vars(module))
    return module.ModelArguments


@functools.lru_cache(maxsize=1)
def dcrec_layers() -> Any:
    """DCRec's ``recbole/model/layers.py`` (needs the ``recbole`` package folder on the path; its
    ``recbole.utils`` imports colorlog / colorama for console colours, stubbed when absent)."""
    path = folder("DCRec")
    stubs = {}
    for name in ("colorlog", "colorama"):
        if importlib.util.find_spec(name) is None:
            stubs[name] = stub(name, ColoredFormatter=object, init=lambda **k: None, Fore=types.SimpleNamespace(),
                               Style=types.SimpleNamespace())  # fmt: skip
    with _isolated(path, stubs):
        return importlib.import_module("recbole.model.layers")


@functools.lru_cache(maxsize=1)
def open_clip_loss() -> Any:
    """open_clip's ``src/open_clip/loss.py`` (imports on its own; the package needs torchvision)."""
    return load("open_clip/src/open_clip", "loss")
