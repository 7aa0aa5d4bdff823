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


def _code_words(path: Path) -> set[str]:
    """The identifiers and string constants of a module's code (docstrings and comments are prose, left out)."""
    tree = ast.parse(path.read_text())
    scopes = [node for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    docstrings = {id(node.body[0].value) for node in scopes if ast.get_docstring(node)}
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.add(node.value)
        elif isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
    return words


def test_no_kernel_names_a_strategy():
    """A kernel takes a strategy's map as given (FlexAttention's score_mod): adding a strategy edits no kernel."""
    import cl_plugins as clp

    names = set(clp.available_losses()) - {"infonce"}  # InfoNCE is the kernels' own subject
    for path in (ROOT / "cl_plugins" / "kernels").glob("*.py"):
        named = names & _code_words(path)
        assert not named, f"{path.relative_to(ROOT)} names {sorted(named)} in its code"
