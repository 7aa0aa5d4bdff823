"""Write the documentation site's API reference (``docs/api/*.md``): one entry per public name of ``cl_plugins``
(its ``__all__``) and of ``cl_plugins.integrations`` (its short names), each pointing mkdocstrings at the object's
home. ``python scripts/api_pages.py`` rewrites them; ``tests/test_docs_site.py`` checks they are current.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "api"


def home(obj: Any, name: str, package: ModuleType) -> str:
    """The dotted path where ``obj`` (exported as ``name``) is defined."""
    if isinstance(obj, ModuleType):
        return obj.__name__
    if hasattr(obj, "__qualname__") and hasattr(obj, "__module__"):
        return f"{obj.__module__}.{obj.__qualname__}"
    for module in sorted(m for m in sys.modules if m.startswith(package.__name__ + ".")):  # a constant
        source = getattr(sys.modules[module], "__file__", None)
        if source and f"\n{name} = " in Path(source).read_text(encoding="utf-8"):
            return f"{module}.{name}"
    raise LookupError(f"{package.__name__}.{name}: no module defines it")


def entry(name: str, path: str, module: bool) -> str:
    options = "\n    options:\n      show_root_heading: false\n" + ("      members: false\n" if module else "")
    return f"## `{name}`\n\n::: {path}{options}"


def core_page() -> str:
    import cl_plugins

    intro = ("# `cl_plugins`\n\nEvery name `import cl_plugins` offers (its `__all__`): the registry, the strategies, "
             "the optimizer and distributed helpers, the queue, and what a strategy author needs.\n")
    parts = [entry(n, home(getattr(cl_plugins, n), n, cl_plugins), isinstance(getattr(cl_plugins, n), ModuleType))
             for n in sorted(cl_plugins.__all__, key=str.lower)]  # fmt: skip
    return "\n".join([intro, *parts])


def integrations_page() -> str:
    import cl_plugins.integrations as integrations

    intro = ("# `cl_plugins.integrations`\n\nEvery adapter under its short name (`from cl_plugins.integrations import "
             "NAME`): each host's patches, each framework's classes, and `run_<command>`, the entry of each "
             "`cl-plugins` subcommand (called with its command line as a list).\n")
    parts = []
    for name in sorted(integrations.exports(), key=str.lower):
        obj = getattr(integrations, name)
        parts.append(entry(name, home(obj, name, integrations), False))
    return "\n".join([intro, *parts])


def pages() -> dict[str, str]:
    return {"cl_plugins.md": core_page(), "integrations.md": integrations_page()}


def main() -> None:
    PAGES.mkdir(exist_ok=True)
    for name, text in pages().items():
        (PAGES / name).write_text(text, encoding="utf-8")
        print(f"wrote {PAGES / name}")


if __name__ == "__main__":
    main()
