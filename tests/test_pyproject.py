"""pyproject.toml's dependencies pin exactly what the requirements files the Makefile installs pin."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins.update(_pins(path.parent / line[3:].strip()))
        elif "==" in line:
            name, version = line.split("==", 1)
            pins[_name(name)] = version.strip()
    return pins


def _declared() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    groups = project["dependency-groups"]
    listed = list(project["project"]["dependencies"])
    listed += [item for group in groups.values() for item in group if isinstance(item, str)]
    return listed


def test_every_dependency_is_pinned_as_the_requirements_pin_it():
    pinned = _pins(ROOT / "requirements.txt")
    declared = _declared()
    assert "pulumi==3.272.0" in declared and "ruff==0.17.6" in declared
    for requirement in declared:
        name, _, version = requirement.partition("==")
        assert version, f"{requirement}: not an exact pin"
        assert pinned.get(_name(name)) == version, f"{requirement}: requirements.txt pins {pinned.get(_name(name))}"


def test_the_tools_are_groups_not_runtime_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = {_name(r.partition("==")[0]) for r in project["project"]["dependencies"]}
    assert not runtime & {"pytest", "ruff", "mypy", "pytest-xdist"}
    assert project["dependency-groups"]["dev"] == [
        {"include-group": "test"}, {"include-group": "lint"}, {"include-group": "types"}]
