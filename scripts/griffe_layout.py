"""A griffe extension for the documentation site: the adapters' folder ``integrations/`` is read as the package
``cl_plugins.integrations``, the name ``setup.py`` installs it under.

mkdocstrings reads the source statically from the repository (``paths: [.]`` in ``mkdocs.yml``), where
``integrations/`` sits beside ``cl_plugins/`` rather than inside it; this attaches it where users import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe

ADAPTERS = Path(__file__).resolve().parents[1] / "integrations"


class InstalledLayout(griffe.Extension):
    """Loads ``integrations/`` as the member ``integrations`` of the package ``cl_plugins``."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "cl_plugins" or "integrations" in pkg.members:
            return
        # griffe has no public call that loads a folder under another package's name: its own loader does it so
        adapters = loader._load_module("integrations", ADAPTERS / "__init__.py", parent=pkg)
        pkg.set_member("integrations", adapters)
