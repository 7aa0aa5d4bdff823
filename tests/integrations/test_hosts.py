"""The host registry: every host package declares itself, and what it declares is real."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

from cl_plugins.integrations.common import data_registry
from cl_plugins.integrations.common.hosts import commands, hosts
from cl_plugins.integrations.common.run_config import RunConfig

ROOT = Path(__file__).resolve().parents[2]


def test_every_host_package_declares_itself():
    packages = {p.parent.name for p in (ROOT / "cl_plugins" / "integrations").glob("*/host.py")}
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
    assert set(owners) == set(data_registry.registry())
    assert owners["senteval"] == "senteval" and owners["cifar10"] == "vision" and owners["tu-mutag"] == "graph"


def test_host_declarations_import_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys; from cl_plugins.integrations.common.hosts import hosts; hosts(); "
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
