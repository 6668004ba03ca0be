"""Parse Python source for the structural tests without tripping CPython 3.11's AST constructor.

CPython 3.11 keeps the AST constructor's recursion depth in per-interpreter state (``ast_state``) and
checks it when ``ast.parse`` returns (cpython gh-106905). Anything that runs another ``ast.parse`` while one
is building its tree (a finalizer the cyclic collector calls in the middle of it, or another thread that
gets the GIL meanwhile) moves that shared depth, and the outer call fails with "SystemError: AST
constructor recursion depth mismatch". A suite runs many tests in one worker, with servers' and stand-ins'
threads and objects left for the collector, so a structural test could fail depending on what ran before
it. Reproduced on 3.11.7 with a finalizer that parses while another parse runs (never with a caught
RecursionError alone). The collector is paused for the parse, so no finalizer runs inside it.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse(source: str | Path, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` of ``source`` (text, or a file to read) with the cyclic collector paused meanwhile."""
    if isinstance(source, Path):
        filename, source = str(source), source.read_text()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if was_enabled:
            gc.enable()
