"""The canonical form of a recorded plan, for comparing recordings made by different runtimes.

A plan is canonical when its resources are sorted by URN and each resource's ``dependencies`` are
sorted: the engine treats both as sets (the order resources register in, and the order of a
``depends_on`` list, do not change the deployment). Everything else (type, name, parent, custom,
inputs, provider) is compared as recorded.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from automation.offline.manifests import redact_secrets

FIELDS = ("urn", "type", "name", "parent", "custom", "inputs", "provider", "dependencies")


def canonical(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` (the plan file's shape: ``{"project", "stack", "resources"}``) in canonical form."""
    resources = [{name: r.get(name) for name in FIELDS} for r in plan["resources"]]
    for r in resources:
        r["dependencies"] = sorted(r["dependencies"] or [])
    resources.sort(key=lambda r: r["urn"])
    return {"project": plan["project"], "stack": plan["stack"], "resources": resources}


def text(plan: dict[str, Any]) -> str:
    """The canonical JSON text: keys sorted, no spaces, ASCII only."""
    return json.dumps(canonical(plan), sort_keys=True, separators=(",", ":"))


def digest(plan: dict[str, Any]) -> str:
    """sha256 of :func:`text`."""
    return hashlib.sha256(text(plan).encode()).hexdigest()


def redacted(value: Any) -> Any:
    """Secret values' leaves replaced by ``[secret]``, their shape kept (for test data on disk): the
    check's own redaction, in the wire form plan.json keeps."""
    return redact_secrets(value, wire=True)


def lines(plan: dict[str, Any]) -> str:
    """The redacted canonical plan as stored test data: a header line, then one resource per line."""
    content = redacted(canonical(plan))
    header = {"project": content["project"], "stack": content["stack"], "digest": digest(plan)}
    return "\n".join(json.dumps(item, sort_keys=True, separators=(",", ":"))
                     for item in [header, *content["resources"]]) + "\n"


def summary(plan: dict[str, Any]) -> dict[str, Any]:
    """A short description of a plan (count per type, digest), for a plan too large to store."""
    content = canonical(plan)
    types: dict[str, int] = {}
    for r in content["resources"]:
        types[r["type"]] = types.get(r["type"], 0) + 1
    return {"project": content["project"], "stack": content["stack"], "resources": len(content["resources"]),
            "types": dict(sorted(types.items())), "digest": digest(plan)}


def record(folder: Path) -> None:
    """Record dev, prod and the 100-model stack again into ``folder`` (``recorded/``): run after a
    change to the program or the stack files that is meant to change the plans, and review the diff."""
    from automation.offline.plan import record_plan
    from automation.stacks import read_stack_config
    from components.capacity_check import parse_settings
    from components.settings import config_strings

    for stack in ("dev", "prod"):
        config = read_stack_config(stack)
        plan = record_plan(stack, config_strings(config), region=parse_settings(config).region)
        (folder / f"{stack}.jsonl").write_text(lines(plan.to_json()))
    config = read_stack_config("bench100", path=folder / "Pulumi.bench100.yaml")
    plan = record_plan("bench100", config_strings(config), region="us-east-1")
    (folder / "bench100.json").write_text(json.dumps(summary(plan.to_json()), indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":  # python -m tests.automation.offline.plan_canon
    record(Path(__file__).parent / "recorded")
