"""The tree's layout: the tests mirror the package, and the benchmarks and examples use the package's API only."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import ROOT

#: test folders with no package folder of their own: shared data, the verification reports, the benchmarks' tests
NOT_MIRRORED = {"fixtures", "reports", "benchmarks"}


def test_every_test_folder_mirrors_a_package_folder():
    for folder in (ROOT / "tests").rglob("*"):
        relative = folder.relative_to(ROOT / "tests")
        if not folder.is_dir() or relative.parts[0] in NOT_MIRRORED or "__pycache__" in relative.parts:
            continue
        assert (ROOT / "cl_plugins" / relative / "__init__.py").is_file(), f"tests/{relative} mirrors no package"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, and for ``from M import x`` also ``M.x`` (x may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_benchmarks_and_examples_import_nothing_from_tests():
    for path in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "examples").glob("*.py")]:
        names = imported_modules(path)
        assert not any(n == "tests" or n.startswith("tests.") for n in names), path.relative_to(ROOT)
