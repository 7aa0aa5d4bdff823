"""The host registry: every host package declares itself, and what it declares is real."""

from __future__ import annotations

import dataclasses
import importlib

from cl_plugins.integrations.data import catalogue
from cl_plugins.integrations.hosts import commands, hosts
from cl_plugins.integrations.runs.config import RunConfig
from tests import INTEGRATIONS, ROOT
from tests.test_layout import imported_modules


def test_every_host_package_declares_itself():
    packages = {p.parent.name for p in INTEGRATIONS.glob("hosts/*/host.py")}
    assert set(hosts()) == packages >= {"simcse", "mabel", "graph", "msc", "vision", "dcrec"}
    for host in hosts().values():
        assert host.docs and (ROOT / "docs" / host.docs).is_file(), host.name


def test_declared_commands_configs_and_datasets_are_real():
    for command in commands().values():
        assert callable(importlib.import_module(command.module).main), command.name
    for host in hosts().values():
        for config in host.run_configs():
            assert issubclass(config, RunConfig) and dataclasses.is_dataclass(config), config
    declared = [(d.name, h.name) for h in hosts().values() if h.datasets for d in h.datasets()]
    owners = dict(declared)
    assert len(owners) == len(declared), "a dataset declared by two hosts"
    assert set(owners) == set(catalogue.registry())
    assert owners["senteval"] == "simcse" and owners["cifar10"] == "vision" and owners["tu-mutag"] == "graph"


def test_host_declarations_import_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys; from cl_plugins.integrations.hosts import hosts; hosts(); "
            "print(sorted(m for m in ('torch', 'transformers', 'torch_geometric') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_names_every_host_and_its_docs_page():
    """The README's layout section is checked against the registry, not kept by hand: a new host fails here until
    the README names it and links its page."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout of the repository") :]
    for host in hosts().values():
        assert f"`{host.name}`" in layout, f"README's layout section does not name the host {host.name!r}"
        assert f"(docs/{host.docs})" in layout, f"README's layout section does not link docs/{host.docs}"


def test_no_host_imports_another_and_only_hosts_import_hosts():
    """What two hosts share lives in ``modalities/``, their evaluation in ``evaluation/``: a host package imports
    the registry and the patch kit of ``hosts/``, and no other host; nothing outside ``hosts/`` imports a host."""
    package = INTEGRATIONS
    names = set(hosts())
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).parts
        own = parts[1] if parts[0] == "hosts" and len(parts) > 2 else None
        for module in imported_modules(path):
            pieces = module.split(".")
            if pieces[:3] == ["cl_plugins", "integrations", "hosts"] and len(pieces) > 3 and pieces[3] in names:
                assert pieces[3] == own, f"{path.relative_to(ROOT)} imports the host module {module}"


def test_the_integrations_are_sorted_by_role():
    """From paths alone: hosts, framework adapters, evaluation harnesses, the run core, the data layer and the
    modules several hosts share, each a package of its own; beside them the console, the command-line helpers and
    the patch kit (the layers below every package, ``tests/test_layout.py``)."""
    package = INTEGRATIONS
    folders = {p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {"hosts", "frameworks", "evaluation", "runs", "data", "modalities"}
    assert {p.name for p in package.glob("*.py")} == {"__init__.py", "console.py", "command_line.py", "patching.py"}
    for folder in folders:
        assert (package / folder / "__init__.py").read_text().startswith('"""'), f"{folder}/ says what it holds"
