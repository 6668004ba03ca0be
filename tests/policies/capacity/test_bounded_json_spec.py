"""JSON from outside is measured before it is parsed: nothing deep ever reaches ``json``'s recursive scanner.

On CPython 3.11 a RecursionError raised inside the C scanner can leave the interpreter's recursion
bookkeeping off, and a later ``ast.parse`` in the same process fails ("AST constructor recursion depth
mismatch"): a test suite went red depending on which tests a worker had run before. So the bound is
checked by a scan that does not recurse, and the program, the pack and the CLI never catch
RecursionError to decide an answer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from policies.capacity.bounded_json import MAX_DEPTH, NestingError, loads, nesting_depth
from tests.support.python_source import parse

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("text, depth", [
    ("1", 0),
    ('"[[["', 0),
    ("[]", 1),
    ('[[1], {"a": [2]}]', 3),
    ('["[[[[", {"a": "}}}"}]', 2),
    ('["\\"[[[", "\\\\"]', 1),
    ('{"a": {"b": {"c": {}}}}', 4),
])
def test_nesting_depth_counts_brackets_outside_strings(text, depth):
    assert nesting_depth(text) == depth


def test_the_bound_is_sixty_four_levels():
    assert MAX_DEPTH == 64
    assert loads("[" * 64 + "1" + "]" * 64) == eval("[" * 64 + "1" + "]" * 64)
    with pytest.raises(NestingError, match="^nested deeper than 64 levels$"):
        loads("[" * 65 + "1" + "]" * 65)


def test_a_document_far_past_the_parser_limit_is_refused_before_parsing():
    """100,000 levels: ``json.loads`` alone raises RecursionError here; the bound answers first."""
    with pytest.raises(NestingError):
        loads('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(ValueError):  # what callers catch: the same class as "not JSON"
        loads(b"[" * 100_000)


def test_brackets_inside_strings_do_not_count_against_the_bound():
    text = '{"k": "' + "[" * 500 + '"}'
    assert loads(text) == {"k": "[" * 500}


def test_bytes_are_read_as_utf8_and_bad_utf8_is_a_value_error():
    assert loads(b'{"a": "\xc3\xa9"}') == {"a": "é"}
    with pytest.raises(ValueError):
        loads(b'{"a": "\xff"}')


def test_a_caller_given_bound_applies():
    assert loads("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(NestingError, match="nested deeper than 1 levels"):
        loads("[[1]]", max_depth=1)


def _handlers_naming_recursion_error(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.type) if isinstance(n, ast.Attribute)}
            if "RecursionError" in names:
                lines.append(node.lineno)
    return lines


def test_no_product_code_catches_recursion_error():
    """Deep input is refused by an explicit bound, never by catching the interpreter's RecursionError."""
    files = [p for folder in ("components", "policies", "automation") for p in sorted((ROOT / folder).rglob("*.py"))]
    files.append(ROOT / "__main__.py")
    found = {str(p.relative_to(ROOT)): lines for p in files if (lines := _handlers_naming_recursion_error(p))}
    assert found == {}
