"""docs/first-deploy.md quotes each prod model's await bound: it must be the one the plan carries."""

from __future__ import annotations

import re
from pathlib import Path

DOC = (Path(__file__).resolve().parents[3] / "docs" / "first-deploy.md").read_text()


def test_the_timeline_quotes_the_await_bounds_of_the_prod_plan(prod_plan):
    quoted = dict(re.findall(r"^\| ([a-z0-9-]+)[^|]*\|[^|]*\|[^|]*\| (\d+) s \(", DOC, re.MULTILINE))
    planned = {
        d.inputs["metadata"]["name"]: d.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]
        for d in prod_plan.of_type("kubernetes:apps/v1:Deployment")
        if d.inputs["metadata"]["namespace"].startswith("serving-")
    }
    assert quoted == planned
