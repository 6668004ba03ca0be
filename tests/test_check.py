"""The offline check end to end, as a user runs it: a real process, files on disk, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from automation import exit_codes
from automation.plan import ROOT

EXPECTED = {
    # stack: (resources, worst-case GPUs, monthly GPU cost as printed)
    "dev": (49, 3, "$3,557/month"),
    "prod": (62, 10, "$13,660/month"),
}


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "automation", "check", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def checked(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    return request.param, out, run_check("--stack", request.param, "--out", str(out))


def test_check_passes_and_reports(checked):
    stack, _, done = checked
    resources, gpus, monthly = EXPECTED[stack]
    assert done.returncode == exit_codes.OK, done.stderr
    assert f"llm-platform stack {stack}: {resources} resources" in done.stdout
    assert "Node pools" in done.stdout and "Resources by type" in done.stdout
    assert f"GPU capacity (worst case): {gpus} GPUs" in done.stdout
    assert monthly in done.stdout
    assert "nvidia.com/gpu=true:NO_SCHEDULE" in done.stdout


def test_plan_json_is_engine_form(checked):
    stack, out, _ = checked
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["project"], plan["stack"]) == ("llm-platform", stack)
    assert len(plan["resources"]) == EXPECTED[stack][0]
    for resource in plan["resources"]:
        assert set(resource) >= {"urn", "type", "name", "parent", "custom", "inputs"}
        assert resource["urn"].startswith(f"urn:pulumi:{stack}::llm-platform::")
    (cluster,) = [r for r in plan["resources"] if r["type"] == "eks:index:Cluster"]
    assert cluster["custom"] is False and "encryptionConfigKeyArn" in cluster["inputs"]
    assert [r["urn"] for r in plan["resources"]] == sorted(r["urn"] for r in plan["resources"])


def test_manifests_are_written(checked):
    _, out, _ = checked
    (helm,) = list((out / "manifests").glob("*.yaml"))
    document = yaml.safe_load(helm.read_text())
    assert (document["chart"], document["version"]) == ("nvidia-device-plugin", "0.20.0")


def test_json_output_for_scripts(tmp_path):
    done = run_check("--stack", "dev", "--out", str(tmp_path), "--output", "json")
    assert done.returncode == exit_codes.OK, done.stderr
    summary = json.loads(done.stdout)["summary"]
    assert summary["worst_case_gpus"] == 3
    assert summary["worst_case_gpu_hourly_usd"] == pytest.approx(3 * 1.624)
    assert {p["name"] for p in summary["pools"]} == {"system", "inference"}


def test_unknown_stack_is_a_usage_error():
    done = run_check("--stack", "staging")
    assert done.returncode == exit_codes.USAGE
    assert "no stack file Pulumi.staging.yaml" in done.stderr and "dev, prod" in done.stderr
    assert "Traceback" not in done.stderr
