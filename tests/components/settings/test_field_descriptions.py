"""Every settings field says what it decides where it is declared (``Field(description=...)``): the
reference in docs/settings.md and README's settings table are generated from these descriptions, so
a field without one would be a blank row.

The models are found by walking the field annotations from the root ``Settings`` (through optional,
list, dict and union types), so a model added anywhere below it is checked without being listed here.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from components.settings import Settings


def reachable_models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """``root`` and every model some field below it is typed with, in first-seen order."""
    found: list[type[BaseModel]] = []

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation in found:
                return
            found.append(annotation)
            for field in annotation.model_fields.values():
                visit(field.annotation)
        for argument in typing.get_args(annotation):
            visit(argument)

    visit(root)
    return found


def test_the_walk_reaches_the_deepest_models():
    names = {model.__name__ for model in reachable_models(Settings)}
    # A model behind a list (tiers -> models -> streaming), an optional (gpuPools -> reservation), a
    # union member (receivers -> slack) and a list of Literals (budgets -> reasons holds no model).
    assert {"WeightStreaming", "CapacityReservation", "SlackReceiver", "DisruptionBudget", "HybridConnectivity",
            "ModelArchitecture", "Kubelet", "GpuBudget"} <= names


def test_every_settings_field_has_a_description():
    undocumented = [
        f"{model.__module__}.{model.__name__}.{field.alias or name}"
        for model in reachable_models(Settings)
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert undocumented == []


def test_every_settings_model_has_a_docstring():
    assert [model.__name__ for model in reachable_models(Settings) if not (model.__doc__ or "").strip()] == []


def test_every_file_a_description_names_exists():
    """A description that sends the user to a file (docs/cold-start.md, components/versions.py) names one
    that is there: the reference is read where the file cannot be clicked through to check."""
    root = Path(__file__).resolve().parents[3]
    named = {(model.__name__, field.alias or name, path)
             for model in reachable_models(Settings)
             for name, field in model.model_fields.items()
             for path in re.findall(r"[\w./-]+\.(?:md|py|json|yaml)\b", field.description or "")}
    assert {("ServedModel", "weights", "docs/cold-start.md")} <= named
    assert [entry for entry in sorted(named) if not (root / entry[2]).is_file()] == []
