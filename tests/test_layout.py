"""The tree's layout: the tests mirror the package, and the benchmarks and examples use the package's API only."""

from __future__ import annotations

import ast

from tests import ROOT

#: test folders with no package folder of their own: shared data, the verification reports, the benchmarks' tests
NOT_MIRRORED = {"fixtures", "reports", "benchmarks"}


def test_every_test_folder_mirrors_a_package_folder():
    for folder in (ROOT / "tests").rglob("*"):
        relative = folder.relative_to(ROOT / "tests")
        if not folder.is_dir() or relative.parts[0] in NOT_MIRRORED or "__pycache__" in relative.parts:
            continue
        assert (ROOT / "cl_plugins" / relative / "__init__.py").is_file(), f"tests/{relative} mirrors no package"


def test_benchmarks_and_examples_import_nothing_from_tests():
    for path in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "examples").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path.relative_to(ROOT)
