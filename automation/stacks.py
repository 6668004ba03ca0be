"""Stack files (``Pulumi.<stack>.yaml``) and their settings, read without the Pulumi CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.settings import Settings, parse_settings

from .plan import ROOT


class StackFileError(Exception):
    """The stack file is missing or is not a YAML mapping with a ``config`` block."""


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def stack_file(stack: str, root: Path = ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def read_stack_config(stack: str, root: Path = ROOT, path: Path | None = None) -> dict[str, Any]:
    """The ``config:`` block of ``Pulumi.<stack>.yaml`` (or of ``path``) with YAML types intact."""
    path = path or stack_file(stack, root)
    if not path.is_file():
        known = ", ".join(available_stacks(root)) or "none"
        raise StackFileError(f"no stack file {path.name} in {root}; stacks here: {known}")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise StackFileError(f"{path.name} is not valid YAML: {exc}") from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise StackFileError(f"{path.name} has no 'config:' mapping")
    return config


def load_stack(stack: str, root: Path = ROOT, path: Path | None = None) -> tuple[dict[str, Any], Settings]:
    """Config and validated settings; raises StackFileError or SettingsError."""
    config = read_stack_config(stack, root, path)
    return config, parse_settings(config)
