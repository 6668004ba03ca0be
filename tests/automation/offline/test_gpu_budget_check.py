"""The offline check refuses a stack's policy config that does not repeat the stack file's gpuBudget."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from automation import exit_codes
from automation.offline import check
from automation.offline.pack.findings import PolicyConfigError
from automation.offline.plan import ROOT


def test_the_shipped_policy_configs_leave_the_budget_to_the_stack():
    for stack in ("dev", "prod"):
        config = json.loads((ROOT / "policies" / "config" / f"{stack}.json").read_text())
        assert "maxGpus" not in config["gpu-capacity-cap"] and "monthlyBudgetUsd" not in config["gpu-monthly-budget"]


@pytest.mark.parametrize("value, shown", [("32", "'32' is not of type 'integer'"), ([16], "[16] is not of type 'integer'")])
def test_a_wrongly_typed_number_in_the_stack_policy_config_is_one_line_naming_the_key(tmp_path, monkeypatch, value, shown):
    """``policies/config/<stack>.json`` with ``maxGpus: "32"`` or ``[16]``: the pack's Configure names the key
    (it used to end in a traceback comparing the numbers)."""
    config = json.loads((ROOT / "policies" / "config" / "dev.json").read_text())
    config["gpu-capacity-cap"]["maxGpus"] = value
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(config))
    # The stack's own config path (not an override, which skips the gpuBudget comparison).
    monkeypatch.setattr(check, "policy_config_for", lambda stack, override=None: path)
    with pytest.raises(PolicyConfigError) as raised:
        check.run_check("dev", tmp_path / "out")
    assert f"gpu-capacity-cap: maxGpus: {shown}" in str(raised.value)
    assert "Traceback" not in str(raised.value)


def test_a_stack_in_a_region_without_prices_is_checked_not_priced_at_us_east_1(tmp_path):
    """The summary prices with the stack's region (the shipped catalog prices us-east-1 and GovCloud
    only): in eu-west-1 the check still runs, prints the GPU count, the cost and budget as unknown with
    the refresh command, and exits 8; no us-east-1 figure appears."""
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    moved = text.replace("llm-platform:region: us-east-1", "llm-platform:region: eu-west-1")
    assert moved != text
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(moved)
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(stack_file),
         "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == exit_codes.BUDGET_UNKNOWN, done.stdout[-2000:] + done.stderr
    out = " ".join(done.stdout.split())
    assert ("GPU capacity (worst case): 16 GPUs; GPU cost and budget: unknown (no on-demand price for g5.2xlarge, "
            "g5.4xlarge in eu-west-1 in policies/instance_catalog.json; run `python -m automation catalog refresh "
            "--region eu-west-1` with AWS credentials, or choose a priced region or type)") in out
    assert "no violations" in out and "$21,886" not in out and (tmp_path / "out" / "plan.json").exists()
