"""The check's files: ``plan.json``, ``manifests/*.yaml`` and ``policy-report.json``.

Each file is written under a temporary name beside its final one and renamed into place
(``os.replace`` is atomic on POSIX), so a check stopped midway (Ctrl-C, SIGTERM, a full disk)
leaves every file either as the previous check wrote it or as this one did, never half-written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from automation.offline.manifests import dumps_yaml, kubernetes_documents, redact_plan
from automation.offline.plan import Plan

#: The suffix of a file being written; it is renamed to its final name when complete.
PARTIAL = ".partial"


@contextmanager
def replacing(path: Path) -> Iterator[TextIO]:
    """A text file to write ``path``'s new content to; it replaces ``path`` when the block ends
    without an error, and is removed otherwise (``path`` then holds what it held before)."""
    partial = path.with_name(path.name + PARTIAL)
    try:
        with open(partial, "w", encoding="utf-8") as file:
            yield file
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, or (if this is interrupted) what it held before."""
    with replacing(path) as file:
        file.buffer.write(data)


def write_json(path: Path, value: Any) -> None:
    """``path`` holds ``json.dumps(value, indent=2)`` and a line end, written as json encodes it
    (piece by piece: a 500-model plan never exists as one text)."""
    with replacing(path) as file:
        json.dump(value, file, indent=2)
        file.write("\n")


def write_plan(plan: Plan, out: Path) -> Path:
    """``out/plan.json``: the plan with secret values redacted, one resource per line.

    Each resource is one line of ``json.dumps`` (json's C encoder; with ``indent`` json encodes in
    Python, ten times slower on a 500-model plan's 30 MB), so a diff of two plans shows which
    resources changed and ``jq`` reads it as any JSON.
    """
    path = out / "plan.json"
    content = redact_plan(plan)
    with replacing(path) as file:
        file.write(f'{{"project": {json.dumps(content["project"])}, "stack": {json.dumps(content["stack"])}, '
                   f'"resources": [')
        for index, resource in enumerate(content["resources"]):
            file.write(",\n  " if index else "\n  ")
            file.write(json.dumps(resource))
        file.write("\n]}\n")
    return path


def render_manifests(plan: Plan) -> dict[str, bytes]:
    """One YAML document per Kubernetes object and Helm release of the plan, by file name."""
    return {name: dumps_yaml(document).encode() for name, document in sorted(kubernetes_documents(plan).items())}


def write_manifests(plan: Plan, directory: Path) -> list[Path]:
    """One YAML file per Kubernetes object and Helm release in ``directory``, which then holds no
    other ``*.yaml`` (files of objects the plan no longer has are removed; other files are left)."""
    return write_files(directory, render_manifests(plan))


def write_files(directory: Path, files: Mapping[str, bytes]) -> list[Path]:
    """``directory`` holds these files (name -> content) and no other ``*.yaml``; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files.items():
        paths.append(directory / name)
        write_atomically(paths[-1], data)
    for stale in directory.glob("*.yaml"):
        if stale.name not in files:
            stale.unlink()
    return paths
