"""Resource type tokens have one home: ``policies/capacity/kinds.py`` (the pack's module, which the
program imports as ``policies.capacity``). No other module of the pack, the program or the driver
spells a token that module names."""

from __future__ import annotations

import ast
from pathlib import Path

from policies.capacity import kinds
from tests.support.python_source import parse

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "policies" / "capacity" / "kinds.py"


def tokens() -> set[str]:
    found: set[str] = set(kinds.POD_TEMPLATE_PATHS)
    for value in vars(kinds).values():
        if isinstance(value, str) and value.count(":") == 2 and value.split(":")[0] in ("kubernetes", "aws", "eks"):
            found.add(value)
        elif isinstance(value, frozenset):
            found |= {v for v in value if isinstance(v, str)}
    return found


def spelled(path: Path, known: set[str]) -> list[str]:
    tree = parse(path)
    return [f"{node.lineno}: {node.value}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known]


def test_the_home_names_the_tokens_the_checks_use():
    known = tokens()
    assert {"kubernetes:apps/v1:Deployment", "eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup",
            "kubernetes:helm.sh/v3:Release", "kubernetes:karpenter.sh/v1:NodePool"} <= known


def test_no_module_spells_a_token_kinds_names():
    known = tokens()
    offenders = {}
    for folder in ("policies", "automation", "components", "__main__.py"):
        paths = [ROOT / folder] if folder.endswith(".py") else sorted((ROOT / folder).rglob("*.py"))
        for path in paths:
            relative = str(path.relative_to(ROOT))
            if path == HOME:
                continue
            if lines := spelled(path, known):
                offenders[relative] = lines
    assert offenders == {}
