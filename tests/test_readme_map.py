"""The README's map ("Where things are decided") points at files that exist and hold what it says.

A newcomer's one guess each: the GPU taint, a chart version, a policy, the stack's GPU cap.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from automation.stacks import load_yaml
from components import contract, versions

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _map_rows() -> dict[str, str]:
    start = README.index("Where things are decided, one place each:")
    table = README[start:README.index("\n\n", README.index("| --- |", start))]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    return {question.strip(): where.strip() for question, where in rows[1:]}


MAP = _map_rows()


def _paths(where: str) -> list[str]:
    return [p for p in re.findall(r"`([^`]+)`", where) if "/" in p or re.search(r"\.(py|json|yaml)$", p)]


@pytest.mark.parametrize("question", sorted(MAP))
def test_every_path_on_the_map_exists(question):
    paths = _paths(MAP[question])
    assert paths, f"map row {question!r} names no file"
    for path in paths:
        if "<family>" in path:
            assert list(ROOT.glob(path.replace("<family>", "*"))), path
        else:
            for stack in ("dev", "prod"):
                assert (ROOT / path.replace("<stack>", stack)).exists(), path


def test_the_gpu_taint_is_decided_where_the_map_says():
    assert "components/contract.py" in MAP["GPU taint, pool labels, tolerations, workload placement, rollout surge"]
    assert contract.GPU_TAINT_KEY and contract.GPU_TAINT_EFFECT == "NoSchedule"


def test_every_chart_is_pinned_where_the_map_says():
    assert "components/versions.py" in MAP["chart versions, images, AMI types and aliases, add-on versions"]
    charts = [v for v in vars(versions).values() if isinstance(v, versions.HelmChart)]
    assert charts and all(c.version for c in charts)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_stack_gpu_cap_is_set_where_the_map_says(stack):
    assert "`llm-platform:gpuBudget`" in MAP["the stack's GPU cap and monthly GPU budget"]
    config = load_yaml((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    assert set(config["llm-platform:gpuBudget"]) == {"maxGpus", "monthlyBudgetUsd"}
