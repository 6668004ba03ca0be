"""The policy table in policies/README.md is the map to the pack: every policy the pack reports over
gRPC appears once, with the file that defines it and its kind, and no row names a policy that is gone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

PACK_DIR = Path(__file__).resolve().parents[2] / "policies"
ROW = re.compile(r"^\| ([a-z0-9-]+) \| `([^`]+)` \| (resource|stack) \|")

#: Run in the pack's own import layout (as the CLI starts it): each check module's POLICIES by name.
_DEFINED_BY = """
import json, pkgutil, importlib, checks
out = {}
for info in pkgutil.iter_modules(checks.__path__):
    module = importlib.import_module(f"checks.{info.name}")
    for policy in getattr(module, "POLICIES", []):
        out.setdefault(policy.name, []).append(f"checks/{info.name}.py")
print(json.dumps(out))
"""


def _table() -> list[tuple[str, str, str]]:
    text = (PACK_DIR / "README.md").read_text()
    return [m.groups() for line in text.splitlines() if (m := ROW.match(line))]


def _defined_by() -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", _DEFINED_BY], cwd=PACK_DIR, capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": str(PACK_DIR), "PATH": ""})
    return json.loads(done.stdout)


def test_every_policy_has_one_row_naming_its_file_and_kind(pack):
    served = pack.runner.info().policies
    rows = _table()
    names = [name for name, _, _ in rows]
    assert sorted(names) == sorted(served), "README rows vs the policies the pack serves"
    assert len(names) == len(set(names)), "a policy has two rows"
    defined = _defined_by()
    for name, file, kind in rows:
        assert defined.get(name) == [file], f"{name}: README says {file}, defined in {defined.get(name)}"
        assert served[name].kind == kind, f"{name}: README says {kind}, the pack serves a {served[name].kind} policy"
        assert (PACK_DIR / file).is_file()
