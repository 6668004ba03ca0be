"""Settings and specs are plain data: parsing a stack (capacity simulation included) loads no Pulumi SDK."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support.python_source import parse

ROOT = Path(__file__).resolve().parents[3]

PARSE_BOTH_STACKS = """
import sys, yaml
import components.settings
from components.capacity_check import parse_settings
for stack in ("dev", "prod"):
    with open(f"Pulumi.{stack}.yaml") as f:
        parse_settings(yaml.safe_load(f)["config"])
print(sorted(m for m in sys.modules if m == "pulumi" or m.startswith(("pulumi.", "pulumi_"))))
"""


def test_parsing_both_stacks_loads_no_pulumi_module():
    """A fresh interpreter, so nothing another test imported counts."""
    done = subprocess.run([sys.executable, "-c", PARSE_BOTH_STACKS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


#: Where settings and specs may reach: themselves, the contract and versions, the capacity model.
ALLOWED = ("components.settings", "components.specs", "components.contract", "components.versions",
           "components.tags", "components.specs.dcgm_counters", "policies.capacity")
#: Pulumi imports allowed in settings and specs: none (``stack_settings``, which reads the engine's
#: config, lives beside ``Platform``).
PULUMI_ALLOWED: set[tuple[str, str]] = set()


def _imports(path: Path) -> list[tuple[str, str]]:
    """``(module, enclosing function or '')`` for every import in the file, function-local ones included."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Import):
            found.extend((alias.name, function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, function))
            if node.module == "components":  # ``from components import x`` names a module
                found.extend((f"components.{alias.name}", function) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(parse(path), "")
    return found


def _files() -> list[Path]:
    return sorted([*(ROOT / "components" / "settings").rglob("*.py"), *(ROOT / "components" / "specs").rglob("*.py")])


def test_settings_and_specs_import_no_pulumi_package():
    offending = [(str(path.relative_to(ROOT)), module, function) for path in _files()
                 for module, function in _imports(path)
                 if module.split(".")[0] == "pulumi" or module.startswith("pulumi_")]
    assert [(f, fn) for f, _, fn in offending if (f, fn) not in PULUMI_ALLOWED] == []
    assert {(f, fn) for f, _, fn in offending} == PULUMI_ALLOWED, "an allowance no longer needed: drop it"


def test_settings_and_specs_import_no_component_module():
    offending = [(str(path.relative_to(ROOT)), module) for path in _files() for module, _ in _imports(path)
                 if module.split(".")[0] in ("components", "policies") and module != "components"
                 and not module.startswith(ALLOWED)]
    assert offending == []
