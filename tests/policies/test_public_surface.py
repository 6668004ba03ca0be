"""The pack uses third-party packages through their public API only, and changes none of them.

Every non-test ``.py`` under ``policies/`` is parsed with ``ast``. A module is the project's own
when its top-level name is a package or module of ``policies/`` (the CLI runs the pack with
``policies/`` first on ``sys.path``: ``lib``, ``checks``, ``capacity``) or the ``policies`` package
itself; the standard library and every other package (pulumi, pulumi_policy, grpc,
google.protobuf, ...) are third-party. Fails on:

(a) importing, or reading an attribute of, a name that starts with a single underscore from a
    third-party module (``from pulumi_policy.policy import _NotApplicableError``,
    ``pulumi_policy.policy._PolicyAnalyzerServicer``); dunder names (``__version__``) are public;
(b) assigning to (or deleting) an attribute of a third-party module or of anything read from one
    (``pulumi_policy.policy.json_format = ...``, ``Servicer.Analyze = ...``): monkeypatching. The
    attributes of an object the pack made (``PolicyPack(...)``) are its own to set, not its private ones.

``ALLOWED`` may hold at most two entries, each with its reason and the upstream issue that would
remove it; it is empty.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.python_source import parse

PACK = Path(__file__).resolve().parents[2] / "policies"
OWN = {"policies"} | {p.stem if p.is_file() else p.name for p in PACK.iterdir()
                      if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}

#: (file relative to policies/, finding) -> (reason, upstream issue that would remove it). At most two.
ALLOWED: dict[tuple[str, str], tuple[str, str]] = {}


def _own(module: str | None, level: int = 0) -> bool:
    return level > 0 or (module or "").split(".")[0] in OWN


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


_MANGLED = re.compile(r"_([A-Za-z][A-Za-z0-9_]*?)__[A-Za-z0-9_]+")


class _Surface(ast.NodeVisitor):
    """Findings of one module: names bound to third-party modules (and what is read from them) are
    followed through imports and plain assignments. An object whose origin the walk cannot follow
    (a function's parameter) is caught when it names another class's private attribute
    (``_Class__attr``, Python's name mangling, in an attribute or a string), the way code that
    reaches into a class it did not write has to."""

    def __init__(self, own_classes: set[str] = frozenset()) -> None:
        self.third_party: dict[str, str] = {}  # local name -> dotted third-party origin
        self.own_classes = own_classes
        self.findings: list[str] = []

    def _mangled(self, name: str, line: int) -> None:
        match = _MANGLED.fullmatch(name)
        if match and match.group(1) not in self.own_classes:
            self.findings.append(f"line {line}: private attribute {name} of class {match.group(1)}")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self._mangled(node.value, node.lineno)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _own(alias.name):
                continue
            for part in alias.name.split("."):
                if _private(part):
                    self.findings.append(f"line {node.lineno}: import of private module {alias.name}")
            local = alias.asname or alias.name.split(".")[0]
            self.third_party[local] = alias.name if alias.asname else local

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if _own(node.module, node.level):
            return
        for part in (node.module or "").split("."):
            if _private(part):
                self.findings.append(f"line {node.lineno}: import from private module {node.module}")
        for alias in node.names:
            if _private(alias.name):
                self.findings.append(f"line {node.lineno}: import of {node.module}.{alias.name}")
            self.third_party[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _origin(self, node: ast.AST) -> str | None:
        """The dotted third-party origin of an expression (``Name`` or ``Attribute`` chain), if any."""
        if isinstance(node, ast.Name):
            return self.third_party.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._origin(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self._origin(node.func)
            return f"{func}()" if func else None  # an object it made: its attributes are its own to set
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._mangled(node.attr, node.lineno)
        base = self._origin(node.value)
        if base and _private(node.attr):
            self.findings.append(f"line {node.lineno}: {base}.{node.attr}")
        if base and "()" not in base and isinstance(node.ctx, (ast.Store, ast.Del)):
            self.findings.append(f"line {node.lineno}: assignment to {base}.{node.attr}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        # setattr(module_or_class, "name", value) is an assignment too; so is getattr of a private name.
        if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr", "getattr") and node.args:
            base = self._origin(node.args[0])
            name = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            if base and "()" not in base and node.func.id != "getattr":
                self.findings.append(f"line {node.lineno}: {node.func.id} on {base}")
            elif base and isinstance(name, str) and _private(name):
                self.findings.append(f"line {node.lineno}: getattr {base}.{name}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        origin = self._origin(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if origin:
                    self.third_party[target.id] = origin
                else:
                    self.third_party.pop(target.id, None)


def surface_findings(source: str) -> list[str]:
    tree = parse(source)
    surface = _Surface({node.name.lstrip("_") for node in ast.walk(tree) if isinstance(node, ast.ClassDef)})
    surface.visit(tree)
    return surface.findings


def pack_sources() -> list[Path]:
    return sorted(p for p in PACK.rglob("*.py") if "tests" not in p.relative_to(PACK).parts)


def test_the_walk_finds_every_module():
    names = {str(p.relative_to(PACK)) for p in pack_sources()}
    assert {"__main__.py", "lib/kit.py", "lib/values.py", "checks/gpu_capacity.py", "capacity/engine.py"} <= names
    assert {"lib", "checks", "capacity", "policies"} <= OWN


@pytest.mark.parametrize(
    ("source", "finding"),
    [
        ("import pulumi_policy.policy as p\np._PolicyAnalyzerServicer.Analyze = f",
         "pulumi_policy.policy._PolicyAnalyzerServicer"),
        ("from pulumi_policy.policy import _NotApplicableError", "import of pulumi_policy.policy._NotApplicableError"),
        ("from pulumi_policy.deserialize import SPECIAL_SIG_KEY as K, _deserialize_property as d",
         "import of pulumi_policy.deserialize._deserialize_property"),
        ("import pulumi_policy.policy as p\np.json_format = object()", "assignment to pulumi_policy.policy.json_format"),
        ("from pulumi_policy import policy\nservicer = policy.PolicyPack\nservicer.serve = None",
         "assignment to pulumi_policy.policy.PolicyPack.serve"),
        ("import grpc\nsetattr(grpc, 'server', None)", "setattr on grpc"),
        ("from google.protobuf import json_format\nx = json_format._Printer", "google.protobuf.json_format._Printer"),
        ("import google.protobuf.struct_pb2\ngoogle.protobuf.struct_pb2.Struct.update = None",
         "assignment to google.protobuf.struct_pb2.Struct.update"),
        ("import pulumi\ngetattr(pulumi.runtime, '_sync_await')", "getattr pulumi.runtime._sync_await"),
        ("from pulumi import _types", "import of pulumi._types"),
        ("from pulumi_policy import PolicyPack\npack = PolicyPack(name='x')\nserver = pack._PolicyPack__servicer",
         "pulumi_policy.PolicyPack()._PolicyPack__servicer"),
        ("def policies(servicer):\n    return getattr(servicer, '_PolicyAnalyzerServicer__policies')",
         "private attribute _PolicyAnalyzerServicer__policies of class PolicyAnalyzerServicer"),
        ("def level(servicer):\n    return servicer._PolicyAnalyzerServicer__stack_tags",
         "private attribute _PolicyAnalyzerServicer__stack_tags"),
    ],
    ids=["private-attribute-and-patch", "private-import", "private-import-alias", "module-attribute",
         "class-through-alias", "setattr", "protobuf-private", "dotted-import-patch", "getattr-private",
         "private-submodule", "private-attribute-of-an-instance",
         "mangled-name-in-getattr", "mangled-attribute-of-a-parameter"],
)
def test_the_walk_finds_what_it_forbids(source, finding):
    assert any(finding in f for f in surface_findings(source)), surface_findings(source)


@pytest.mark.parametrize(
    "source",
    [
        "from lib.values import _plain\nfrom lib import kit\nkit._SHARED = None",  # the project's own
        "from pulumi_policy import PolicyPack\npack = PolicyPack(name='x')\npack.policies = []",  # an instance it made
        "import pulumi_policy\nv = pulumi_policy.__name__",
        "from . import _sibling",
        "class Pool:\n    def __init__(self):\n        self.__size = 1\n    def size(self):\n        return self._Pool__size",
    ],
    ids=["own-modules", "own-instance", "dunder", "relative", "own-class-mangled"],
)
def test_the_walk_passes_what_it_allows(source):
    assert surface_findings(source) == []


def test_the_pack_reaches_no_private_name_and_patches_nothing():
    assert len(ALLOWED) <= 2 and all(reason and issue for reason, issue in ALLOWED.values())
    found = {(str(path.relative_to(PACK)), finding)
             for path in pack_sources() for finding in surface_findings(path.read_text())}
    assert found - set(ALLOWED) == set(), "\n".join(sorted(f"{p}: {f}" for p, f in found - set(ALLOWED)))
    assert set(ALLOWED) - found == set(), "allowlist entries that no longer occur; remove them"
