"""The tree's layout: the tests mirror the package, and the benchmarks and examples use the package's API only."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import CORE, INTEGRATIONS, ROOT, module_name

#: test folders with no package folder of their own: shared data, the verification reports, the benchmarks' tests
NOT_MIRRORED = {"fixtures", "reports", "benchmarks"}


def test_every_test_folder_mirrors_a_package_folder():
    for folder in (ROOT / "tests").rglob("*"):
        relative = folder.relative_to(ROOT / "tests")
        if not folder.is_dir() or relative.parts[0] in NOT_MIRRORED or "__pycache__" in relative.parts:
            continue
        source = INTEGRATIONS.joinpath(*relative.parts[1:]) if relative.parts[0] == "integrations" else CORE / relative
        assert (source / "__init__.py").is_file(), f"tests/{relative} mirrors no package"


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
    for path in (CORE / "kernels").glob("*.py"):
        named = names & _code_words(path)
        assert not named, f"{path.relative_to(ROOT)} names {sorted(named)} in its code"


CORE_FILES = sorted(CORE.rglob("*.py"))
#: the kernels that serve a request (:class:`cl_plugins.kernels.contract.Backend`): only ``kernels/`` names them
BACKENDS = {f"cl_plugins.kernels.{m}"
            for m in ("fused", "pair_network", "streaming", "symmetric", "triton_lse", "triton_bonded")}  # fmt: skip


def module_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports at module level, type-only imports included (under ``if
    TYPE_CHECKING``, ``try``): ``from P import x`` counts as ``P.x`` where that is a module, else as ``P``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                base = ".".join([*parts, *([node.module] if node.module else [])])
                found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)

    visit(ast.parse(path.read_text()).body)
    return {m for m in found if m in modules and m != name}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return cycles


def core_graph() -> dict[str, set[str]]:
    modules = {module_name(p) for p in CORE_FILES}
    return {module_name(p): module_imports(p, modules) for p in CORE_FILES}


def test_the_core_has_no_import_circle():
    """``cl_plugins`` (the core, without the adapters): no module reaches itself through module-level or type-only
    imports (the contract below the kernels, the executor above them, the façade above both)."""
    assert import_cycles(core_graph()) == []
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}  # the check itself finds one
    assert import_cycles(circle) == [["a", "b", "c"]]


def test_nothing_above_the_kernels_names_a_backend():
    """Strategies, layouts, pairs and the façade reach the kernels through the contract, the executor and the
    choice; the contract imports no backend."""
    for module, imported in core_graph().items():
        if not module.startswith("cl_plugins.kernels") or module == "cl_plugins.kernels.contract":
            assert not imported & BACKENDS, f"{module} imports {sorted(imported & BACKENDS)}"


MUTABLE = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def test_no_module_level_mutable_state_in_the_kernels():
    """A kernel's failure, configuration or cache lives with the loss or the context that owns it (per-loss
    :class:`~cl_plugins.kernels.contract.KernelHealth`, ContextVars), never in a module-level dict, list or set."""
    for path in (CORE / "kernels").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["__all__"]:
                continue
            called = isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("dict", "list", "set")
            assert not (isinstance(value, MUTABLE) or called), f"{path.name}:{node.lineno} holds mutable state"


def test_each_package_docstring_names_every_module_it_holds():
    """The package maps of ``cl_plugins.kernels`` (its modules) and ``cl_plugins.integrations`` (its sub-packages)
    stay true as modules come and go."""
    import pkgutil

    import cl_plugins.integrations as integrations
    import cl_plugins.kernels as kernels

    kernel_modules = [m.name for m in pkgutil.iter_modules(kernels.__path__)]
    assert not [m for m in kernel_modules if f":mod:`.{m}`" not in kernels.__doc__]
    packages = [m.name for m in pkgutil.iter_modules(integrations.__path__) if m.ispkg]
    assert not [p for p in packages if f"``{p}/``" not in integrations.__doc__]


#: the layers of ``cl_plugins.integrations``, lowest first: a module imports only from layers below its own (or
#: from its own package); packages of one layer never import each other
INTEGRATION_LAYERS = (("command_line",), ("runs", "data", "patching"), ("evaluation",), ("modalities", "frameworks"),
                      ("hosts",), ("console",), ("__init__",))  # fmt: skip


def _integration_imports() -> dict[str, set[str]]:
    """Each module of ``cl_plugins.integrations`` -> the modules of it that it imports (anywhere in its body)."""
    import ast

    modules = {module_name(p): p for p in INTEGRATIONS.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                found = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            edges[name] |= {t for t in found if t in modules and t != name}
    return edges


def _layer(module: str) -> tuple[int, str]:
    part = (module.split(".") + ["__init__"])[2]
    return next(i for i, names in enumerate(INTEGRATION_LAYERS) if part in names), part


def test_the_integrations_import_downwards_only_and_in_no_circle():
    edges = _integration_imports()
    upward = [f"{a} -> {b}" for a, targets in edges.items() for b in targets
              if _layer(a)[1] != _layer(b)[1] and _layer(a)[0] <= _layer(b)[0]]  # fmt: skip
    assert not upward, upward
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for target in sorted(edges[module]):
            assert seen.get(target) != 1, " -> ".join([*path, module, target])
            if target not in seen:
                visit(target, [*path, module])
        seen[module] = 2

    for module in sorted(edges):
        if module not in seen:
            visit(module, [])
