"""Adapters that put cl-plugins losses into existing codebases, frameworks and command lines.

Every adapter imports in one line from here, and nothing heavy loads until a name is used (PEP 562)::

    from cl_plugins.integrations import patch_simcse           # a research codebase's seam (docs/patching.md)
    from cl_plugins.integrations import StrategyClipLoss       # a framework's loss (docs/frameworks.md)
    from cl_plugins.integrations import run_simcse_train       # a command's entry: run_simcse_train(["--help"])

The names: each host's patch module exports (its ``__all__``, else its patch functions), each framework
package's ``__all__`` (classes and functions), and ``run_<command>`` for each ``cl-plugins`` subcommand (its
``main(argv)``). Where they live: ``hosts/`` (one package per research codebase, declared in its ``host.py``),
``frameworks/`` (one per training framework), ``modalities/`` (what hosts of one modality share), ``evaluation/``,
``runs/`` (the training loop and its files), ``data/`` (the catalogue and downloads); below them ``command_line.py``
and ``patching.py`` (the contract of every patch).

In the repository this package is the top-level folder ``integrations/``, beside the core ``cl_plugins/``;
``setup.py`` installs it under the core's name, so an install (a wheel or ``pip install -e .``) has one import
name, ``cl_plugins``.
"""

from __future__ import annotations

import ast
import functools
import importlib
from typing import Any

from cl_plugins.integrations import hosts as _hosts  # noqa: F401 - declares every host's datasets into the catalogue

#: the framework packages whose ``__all__`` this package re-exports
FRAMEWORKS = ("hf_trainer", "lightning", "open_clip", "sentence_transformers")


def _declared_all(module: str) -> list[str] | None:
    """A module's ``__all__``, read from its source without importing it (None: it declares none)."""
    from cl_plugins.integrations.command_line import module_tree

    for node in module_tree(module).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


@functools.cache
def exports() -> dict[str, tuple[str, str]]:
    """Every short name -> (module, attribute), read from the hosts' declarations and the frameworks' ``__all__``
    (nothing heavy imported); a name two adapters would export is an error."""
    from cl_plugins.integrations.hosts import hosts

    found: dict[str, tuple[str, str]] = {}

    def add(name: str, module: str, attribute: str) -> None:
        if name in found and found[name] != (module, attribute):
            raise ValueError(f"cl_plugins.integrations: {name} is exported by {found[name][0]} and {module}")
        found[name] = (module, attribute)

    for host in hosts().values():
        if host.patches:
            module = f"{__name__}.hosts.{host.name}.patch"
            for name in _declared_all(module) or list(host.patches.values()):
                add(name, module, name)
        for command in host.commands:
            add(f"run_{command.name.replace('-', '_')}", command.module, "main")
    for framework in FRAMEWORKS:
        module = f"{__name__}.frameworks.{framework}"
        for name in _declared_all(module) or []:
            if not name.isupper():  # a framework's constants (its poolers, its views) stay in its package
                add(name, module, name)
    return found


def __getattr__(name: str) -> Any:
    where = exports().get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *exports()})
