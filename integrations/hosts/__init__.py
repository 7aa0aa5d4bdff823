"""The hosts: one package per research codebase (``simcse``, ``mabel``, ``graph``, ``msc``, ``vision``, ``dcrec``),
and their registry: every host package declares itself, and the console, the data catalogue and the patch tests
discover it (as :mod:`cl_plugins.registry` does for strategies). Hosts never import each other: what two share
lives in :mod:`cl_plugins.integrations.modalities`, their evaluation in :mod:`cl_plugins.integrations.evaluation`.

A host is a package ``integrations/hosts/<name>/`` whose ``host.py`` defines ``HOST = Host(...)``: its
command-line subcommands, its datasets (catalogue entries of :mod:`cl_plugins.integrations.data.catalogue`), its
patch targets (each a recipe of ``docs/patching.md`` and a function of its ``patch.py``), its run configurations
and its docs page. ``host.py`` imports nothing heavy: ``cl-plugins --help`` reads every one.

Adding a host is: its package with its ``host.py``, its docs page, its tests.
"""

from __future__ import annotations

import functools
import importlib
import operator
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cl_plugins.integrations.data import catalogue


@dataclass(frozen=True)
class Command:
    """A ``cl-plugins`` subcommand: ``module.main(argv)`` runs it. ``line`` builds its command line without importing
    ``module``, so that ``--help`` answers before torch loads: ``"module:Class"`` of a run configuration (one flag
    per field) or ``"module:function"`` taking the description, in a module that imports nothing heavy
    (:func:`cl_plugins.integrations.command_line.command_line`)."""

    name: str
    module: str
    what: str
    line: str = ""


@dataclass(frozen=True)
class Host:
    """What a host package declares (see the module docstring).

    Args:
        name: the package's name under ``cl_plugins.integrations.hosts``.
        what: one line.
        commands: its ``cl-plugins`` subcommands (default: none).
        datasets: returns its catalogue entries (default: none); called once, when the catalogue is first read.
        patches: patch target -> the function of ``cl_plugins.integrations.hosts.<name>.patch`` that applies it; each
            target has a ``# recipe: <target>`` block in ``docs/patching.md`` (default: none).
        configs: its run configurations, ``"module:Class"`` (default: none).
        docs: its page under ``docs/`` (default: "").
    """

    name: str
    what: str
    commands: tuple[Command, ...] = ()
    datasets: Callable[[], list[Any]] | None = None
    patches: dict[str, str] | None = None
    configs: tuple[str, ...] = ()
    docs: str = ""

    def run_configs(self) -> list[type]:
        """The run configuration classes (imports the modules that define them)."""
        out = []
        for spec in self.configs:
            module, _, name = spec.partition(":")
            out.append(getattr(importlib.import_module(module), name))
        return out


@functools.lru_cache(maxsize=1)
def hosts() -> dict[str, Host]:
    """Every host package's declaration, by name (the packages of ``cl_plugins.integrations.hosts``, each with
    its ``host.py``)."""
    found: dict[str, Host] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=operator.attrgetter("name")):
        if not info.ispkg:
            continue
        host = importlib.import_module(f"{__name__}.{info.name}.host").HOST
        if host.name != info.name:
            raise ValueError(f"integrations/hosts/{info.name}/host.py declares the host {host.name!r}; "
                             f"name it {info.name!r}")  # fmt: skip
        found[host.name] = host
    return found


def commands() -> dict[str, Command]:
    """Every host's subcommands, by name; a name two hosts declare is an error."""
    out: dict[str, Command] = {}
    for host in hosts().values():
        for command in host.commands:
            if command.name in out:
                raise ValueError(f"two hosts declare the command {command.name!r}")
            out[command.name] = command
    return out


def patch_targets() -> dict[str, tuple[str, str]]:
    """Patch target -> (host name, patch function) over every host."""
    return {target: (host.name, function) for host in hosts().values()
            for target, function in (host.patches or {}).items()}  # fmt: skip


def _datasets() -> list[Any]:
    return [d for host in hosts().values() if host.datasets is not None for d in host.datasets()]


catalogue.declare(_datasets)  # hosts declare their datasets into the catalogue, which never imports them
