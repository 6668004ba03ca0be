"""The ``Image(...)`` pins of a versions file, read and rewritten as source text.

The file is read with :mod:`ast` (never imported: the command must work on a file that does not
import cleanly, and on a copy). A rewrite changes only the ``digest`` of each changed call: an
existing ``digest=`` literal is replaced in place (same quotes), a missing one is added after the
last argument (``, digest="..."`` on a one-line call, its own line in the call's indentation on a
multi-line one). Every other byte stays as it was, and the result is checked by reading it back
before it replaces the file (temporary file in the same folder, then ``os.replace``).
"""

from __future__ import annotations

import ast
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from automation.images.reference import DIGEST

DEFAULT_VERSIONS_FILE = Path(__file__).resolve().parents[2] / "components" / "versions.py"
_FIELDS = ("repository", "tag", "digest")


class VersionsFileError(Exception):
    """The versions file cannot be read, parsed or rewritten as asked."""


@dataclass(frozen=True)
class Pin:
    """One ``Image(...)`` call: its name in the file, what it pins, and where its arguments are."""

    name: str
    line: int
    repository: str | None
    tag: str | None
    digest: str | None
    problem: str | None = None  #: why this pin cannot be resolved or rewritten (non-literal arguments)

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


def _is_image_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "Image")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "Image"))


def _arguments(call: ast.Call) -> dict[str, ast.expr]:
    args = dict(zip(_FIELDS, call.args))
    args.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    return args


def _literal(node: ast.expr | None) -> tuple[str | None, bool]:
    """(value, is a literal str or None)."""
    if node is None:
        return None, True
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value, True
    return None, False


def _calls(tree: ast.Module) -> list[tuple[str, ast.Call]]:
    """Every ``Image(...)`` call with a name: ``NAME`` for ``NAME = Image(...)``, ``NAME[key]`` inside a
    dict literal, ``NAME (line N)`` anywhere else in NAME's statement, ``line N`` outside assignments."""
    found: list[tuple[str, ast.Call]] = []
    for statement in tree.body:
        targets = (statement.targets if isinstance(statement, ast.Assign)
                   else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        owner = next((t.id for t in targets if isinstance(t, ast.Name)), None)
        value = getattr(statement, "value", None)
        keyed = {}
        if isinstance(value, ast.Dict):
            keyed = {id(v): k.value for k, v in zip(value.keys, value.values)
                     if isinstance(k, ast.Constant) and isinstance(k.value, (str, int))}
        for node in ast.walk(statement):
            if not isinstance(node, ast.Call) or not _is_image_call(node):
                continue
            if owner and node is value:
                name = owner
            elif owner and id(node) in keyed:
                name = f"{owner}[{keyed[id(node)]!r}]"
            elif owner:
                name = f"{owner} (line {node.lineno})"
            else:
                name = f"line {node.lineno}"
            found.append((name, node))
    return sorted(found, key=lambda item: (item[1].lineno, item[1].col_offset))


def _parse(source: bytes, path: Path) -> ast.Module:
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise VersionsFileError(f"{path}: line {exc.lineno}: {exc.msg}") from None


def read_source(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise VersionsFileError(f"cannot read the versions file {path}: {exc.strerror or exc}") from None


def read_pins(source: bytes, path: Path = DEFAULT_VERSIONS_FILE) -> list[Pin]:
    """Every ``Image(...)`` pin in ``source``, in file order."""
    pins = []
    for name, call in _calls(_parse(source, path)):
        args = _arguments(call)
        values, problems = {}, []
        for key in _FIELDS:
            values[key], literal = _literal(args.get(key))
            if not literal:
                problems.append(f"{key} is not a string literal")
        if values["repository"] is None or values["tag"] is None:
            problems.append("repository and tag are required")
        pins.append(Pin(name, call.lineno, values["repository"], values["tag"], values["digest"],
                        "; ".join(problems) or None))
    return pins


def rewrite(source: bytes, digests: Mapping[str, str], path: Path = DEFAULT_VERSIONS_FILE) -> bytes:
    """``source`` with the digest of each pin named in ``digests`` set to its value; nothing else changed."""
    tree = _parse(source, path)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:  # ast columns are UTF-8 byte offsets
        return starts[lineno - 1] + col

    edits: list[tuple[int, int, bytes]] = []
    named = dict(_calls(tree))
    for name, digest in digests.items():
        if not DIGEST.match(digest):
            raise VersionsFileError(f"{name}: {digest!r} is not sha256:<64 hex>")
        call = named.get(name)
        if call is None:
            raise VersionsFileError(f"{path}: no Image pin named {name}")
        edits.extend(_digest_edits(call, digest, source, lines, offset))
    result = bytearray(source)
    for start, end, text in sorted(edits, reverse=True):
        result[start:end] = text
    new = bytes(result)
    _check_rewrite(source, new, digests, path)
    return new


def _end(node: ast.expr) -> tuple[int, int]:
    """Where ``node`` ends: (line, UTF-8 column). ``ast.parse`` sets both on every node it makes."""
    if node.end_lineno is None or node.end_col_offset is None:
        raise VersionsFileError(f"line {node.lineno}: the parser gave no end position")
    return node.end_lineno, node.end_col_offset


def _digest_edits(call: ast.Call, digest: str, source: bytes, lines: list[bytes],
                  offset: Callable[[int, int], int]) -> list[tuple[int, int, bytes]]:
    existing = _arguments(call).get("digest")
    if existing is not None:
        start = offset(existing.lineno, existing.col_offset)
        end = offset(*_end(existing))
        quote = source[start:start + 1] if source[start:start + 1] in (b'"', b"'") else b'"'
        return [(start, end, quote + digest.encode() + quote)]
    last = max([*call.args, *(kw.value for kw in call.keywords)], key=_end)
    last_line, last_column = _end(last)
    after = offset(last_line, last_column)
    if _end(call)[0] == last_line:  # the closing parenthesis is on the last argument's line
        return [(after, after, f', digest="{digest}"'.encode())]
    line = lines[last_line - 1]
    first_line = lines[last.lineno - 1]
    indent = first_line[:len(first_line) - len(first_line.lstrip(b" \t"))]
    ending = line[len(line.rstrip(b"\r\n")):] or b"\n"
    rest = source[after:offset(last_line, 0) + len(line)]
    edits = [] if rest.lstrip(b" \t").startswith(b",") else [(after, after, b",")]
    next_line = offset(last_line, 0) + len(line)
    edits.append((next_line, next_line, indent + f'digest="{digest}",'.encode() + ending))
    return edits


def _check_rewrite(old: bytes, new: bytes, digests: Mapping[str, str], path: Path) -> None:
    """The rewritten text reads back with the new digests and every other pin unchanged."""
    before = {pin.name: pin for pin in read_pins(old, path)}
    after = {pin.name: pin for pin in read_pins(new, path)}
    expected = {name: (pin.repository, pin.tag, digests.get(name, pin.digest)) for name, pin in before.items()}
    got = {name: (pin.repository, pin.tag, pin.digest) for name, pin in after.items()}
    if got != expected:
        raise VersionsFileError(f"{path}: the rewrite did not read back as intended; file left unchanged")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename, keeping its permissions."""
    mode = path.stat().st_mode & 0o7777
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
