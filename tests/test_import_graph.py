"""The project's own modules import each other without a cycle.

Two readings of the same sources (parsed, never imported), and neither may have a cycle:
- what Python executes: every import outside ``if TYPE_CHECKING:`` blocks, function-local ones
  included, and importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py`` (unless
  the importer is inside them);
- what a reader follows: every import in the file, type-only ones included, to the file it names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.python_source import parse

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("components", "policies", "automation")


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, *, type_only: bool) -> list[tuple[str, int]]:
    """``(module, line)`` for each import; with ``type_only`` False, ``if TYPE_CHECKING:`` bodies are skipped."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, node.lineno))
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when one exists.
            found.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names
                         if _module_file(f"{node.module}.{alias.name}") is not None)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(*, runtime: bool) -> dict[str, dict[str, int]]:
    """Module -> {imported module of the project: line}, for every module under ``PACKAGES``."""
    graph: dict[str, dict[str, int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = _module_name(path)
            edges = graph.setdefault(source, {})
            for module, line in _imports(parse(path), type_only=not runtime):
                if module.split(".")[0] not in PACKAGES or _module_file(module) is None:
                    continue
                parts = module.split(".")
                targets = [".".join(parts[:i]) for i in range(1, len(parts) + 1)] if runtime else [module]
                for target in targets:
                    # A module's own packages are initialised before it runs: no edge back to them.
                    if target != source and not source.startswith(f"{target}.") and _module_file(target) is not None:
                        edges.setdefault(target, line)
    return graph


def find_cycle(graph: dict[str, dict[str, int]], within: tuple[str, ...] = PACKAGES) -> list[str] | None:
    """One cycle among the modules of ``within``, as a closed path of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in graph.get(node, {}):
            if target.split(".")[0] not in within:
                continue
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node.split(".")[0] in within and node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)) + f" -> {cycle[-1]}"


@pytest.mark.parametrize("runtime", [True, False], ids=["as-executed", "as-read"])
def test_components_and_policies_import_without_a_cycle(runtime):
    graph = import_graph(runtime=runtime)
    cycle = find_cycle(graph, within=("components", "policies"))
    assert cycle is None, "import cycle: " + _describe(graph, cycle or [])


@pytest.mark.parametrize("runtime", [True, False], ids=["as-executed", "as-read"])
def test_the_whole_project_imports_without_a_cycle(runtime):
    graph = import_graph(runtime=runtime)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + _describe(graph, cycle or [])


def test_the_graph_sees_function_local_and_type_only_imports():
    """The readings above would miss the circle this test guards against if they skipped either kind."""
    runtime, read = import_graph(runtime=True), import_graph(runtime=False)
    # function-local: postdeploy imports preflight inside functions
    assert "automation.driver.preflight" in runtime["automation.driver.postdeploy"]
    # type-only: the specs name settings types for annotations only
    assert "components.settings.serving" in read["components.specs.serving"]
    assert "components.settings.serving" not in runtime["components.specs.serving"]
    # importing a submodule runs its packages' __init__ files
    assert "policies.capacity" in runtime["components.specs.blueprint"]
    assert "policies.capacity" not in read["components.specs.blueprint"]


def test_a_cycle_is_reported_with_its_files_and_lines():
    graph = {"components.a": {"components.b": 3}, "components.b": {"components.a": 7}}
    cycle = find_cycle(graph)
    assert cycle == ["components.a", "components.b", "components.a"]
    assert _describe(graph, cycle) == "components.a (line 3) -> components.b (line 7) -> components.a"
