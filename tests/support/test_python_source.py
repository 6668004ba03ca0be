"""The structural tests' parser survives what trips CPython 3.11's AST constructor: a finalizer that parses
while another parse builds its tree (see tests/support/python_source.py, cpython gh-106905)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.python_source import parse

SOURCE = (Path(__file__).resolve().parents[2] / "components" / "platform.py").read_text()


class _ParsesWhenCollected:
    """Garbage in a reference cycle whose finalizer parses: the collector runs it at any allocation."""

    parsed = 0

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        ast.parse("x = 1")
        _ParsesWhenCollected.parsed += 1


def test_a_parse_with_collectable_finalizers_around_it_completes():
    trees = []
    for _ in range(100):
        garbage = [_ParsesWhenCollected() for _ in range(50)]
        del garbage
        trees.append(parse(SOURCE))  # the collector is paused inside: no finalizer runs mid-tree
    assert all(isinstance(tree, ast.Module) and tree.body for tree in trees)
    assert _ParsesWhenCollected.parsed > 0, "the finalizers ran (outside the parses)"
