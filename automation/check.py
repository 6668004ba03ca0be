"""The offline check: settings, plan under mocks, manifests, summary. Needs no cloud account."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from components.settings import config_strings

from .manifests import redact_secrets, write_manifests
from .plan import ROOT, Plan, record_plan
from .report import Summary, summarize
from .stacks import load_stack


@dataclass
class CheckResult:
    plan: Plan
    summary: Summary
    plan_path: Path
    manifest_paths: list[Path]


def default_out_dir(stack: str) -> Path:
    return ROOT / "build" / stack


def run_check(stack: str, out_dir: Path | None = None, *, stack_file: Path | None = None) -> CheckResult:
    """Validate the stack's settings, record its plan and write ``plan.json`` and ``manifests/``.

    Raises StackFileError or SettingsError before any resource is registered.
    """
    config, settings = load_stack(stack, path=stack_file)
    plan = record_plan(stack, config_strings(config), region=settings.region)
    plan.resources.sort(key=lambda r: r.urn)
    out = out_dir or default_out_dir(stack)
    out.mkdir(parents=True, exist_ok=True)
    plan_path = out / "plan.json"
    plan_path.write_text(json.dumps(redact_secrets(plan.to_json()), indent=2) + "\n")
    manifests = write_manifests(plan, out / "manifests")
    return CheckResult(plan=plan, summary=summarize(plan), plan_path=plan_path, manifest_paths=manifests)
