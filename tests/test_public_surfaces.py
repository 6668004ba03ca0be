"""The whole program (components, automation, the entry point) reaches no private name of another
package and replaces none of its attributes at run time, the same walk the pack's own test makes
of policies/ (tests/policies/test_public_surface.py): an SDK upgrade must be a version bump."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.policies import test_public_surface as walk

ROOT = Path(__file__).resolve().parents[1]
OWN_PACKAGES = {"automation", "components", "policies", "benchmarks", "tests"}
#: (file, finding) -> (reason, upstream issue that would remove it). At most two.
ALLOWED: dict[tuple[str, str], tuple[str, str]] = {}


def third_party(finding: str) -> bool:
    """Whether a finding names another package's private name (the standard library's
    ``argparse._SubParsersAction`` in a type annotation is Python's own, not a package to upgrade)."""
    name = re.sub(r"^line \d+: ", "", finding).split()[0]
    return name.split(".")[0] not in sys.stdlib_module_names


def program_sources() -> list[Path]:
    files = [ROOT / "__main__.py"]
    for package in ("automation", "components"):
        files += sorted((ROOT / package).rglob("*.py"))
    return files


@pytest.fixture
def own_modules(monkeypatch):
    monkeypatch.setattr(walk, "OWN", walk.OWN | OWN_PACKAGES)


def test_the_walk_covers_the_program():
    names = {str(p.relative_to(ROOT)) for p in program_sources()}
    assert {"__main__.py", "automation/driver/interrupts.py", "automation/offline/plan.py",
            "components/platform.py", "components/specs/serving.py"} <= names


def test_the_walk_catches_the_sdks_private_names(own_modules):
    found = walk.surface_findings("from pulumi.automation._cmd import PulumiCommand, _fixup_path\n")
    assert found and any("_fixup_path" in f or "_cmd" in f for f in found)
    assert walk.surface_findings("from components.settings._base import _Model\n") == [], "the project's own names"


def test_the_program_reaches_no_private_name_and_patches_nothing(own_modules):
    assert len(ALLOWED) <= 2
    found = {(str(path.relative_to(ROOT)), finding)
             for path in program_sources() for finding in walk.surface_findings(path.read_text()) if third_party(finding)}
    assert found - set(ALLOWED) == set(), "\n".join(sorted(f"{p}: {f}" for p, f in found - set(ALLOWED)))
