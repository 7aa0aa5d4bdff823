"""The test suite; ``ROOT`` is the repository root, wherever a test file sits.

``CORE`` and ``INTEGRATIONS`` are the folders of the two import names, ``cl_plugins`` and ``cl_plugins.integrations``
(``setup.py`` installs the top-level ``integrations/`` folder under the core's name).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "cl_plugins"
INTEGRATIONS = ROOT / "integrations"


def module_name(path: Path) -> str:
    """The import name of a source file of either folder (``integrations/runs/atomic.py`` ->
    ``cl_plugins.integrations.runs.atomic``; a package's ``__init__.py`` -> the package)."""
    path = path.resolve()
    if path.is_relative_to(INTEGRATIONS):
        parts = ("cl_plugins", "integrations", *path.relative_to(INTEGRATIONS).with_suffix("").parts)
    else:
        parts = ("cl_plugins", *path.relative_to(CORE).with_suffix("").parts)
    return ".".join(parts).removesuffix(".__init__")
