"""End to end: the driver against a real AWS account with the real Pulumi CLI, kubectl and aws.

Opt-in and expensive (an EKS cluster with a GPU node, 30-60 minutes): ``pytest -m e2e``. It needs
AWS credentials, and ``pulumi`` (>= 3.211), ``kubectl`` and ``aws`` on PATH. State goes to
PULUMI_BACKEND_URL if set, else to a temporary file backend; every stack it creates is destroyed
and removed, and tagged to expire so that ``python -m automation env reap`` catches leftovers.
``E2E_TEMPLATE`` picks the template stack (default dev).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from automation import exit_codes
from automation.offline.plan import ROOT

pytestmark = pytest.mark.e2e
TEMPLATE = os.environ.get("E2E_TEMPLATE", "dev")
AWS_CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                       "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")


def missing_prerequisites() -> list[str]:
    missing = []
    if not any(os.environ.get(v) for v in AWS_CREDENTIAL_VARS) and not (
        Path.home() / ".aws" / "credentials"
    ).is_file() and not (Path.home() / ".aws" / "config").is_file():
        missing.append("AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, ... or ~/.aws)")
    for tool in ("pulumi", "kubectl", "aws"):
        if shutil.which(tool) is None:
            missing.append(f"`{tool}` on PATH")
    return missing


@pytest.fixture(autouse=True)
def opt_in(request):
    if "e2e" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("end-to-end suite against a real AWS account: run `pytest -m e2e` "
                    "(needs AWS credentials and the pulumi, kubectl and aws CLIs)")
    missing = missing_prerequisites()
    if missing:
        pytest.skip("-m e2e given, but missing: " + "; ".join(missing))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = dict(os.environ)
    environ.setdefault("PULUMI_CONFIG_PASSPHRASE", secrets.token_hex(16))
    environ.setdefault("PULUMI_BACKEND_URL", (tmp_path / "state").as_uri())
    environ.pop("LLM_PLATFORM_PULUMI_ROOT", None)
    return environ


def automation(env: dict[str, str], *args: str, timeout: float = 3 * 3600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "automation", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_preview_runs_the_program_and_the_policy_pack(env):
    done = automation(env, "preview", "--stack", TEMPLATE, "--output", "json", timeout=1800)
    report = json.loads(done.stdout)
    assert done.returncode == exit_codes.OK, done.stderr[-4000:]
    assert report["result"] == "succeeded"
    assert report["changes"].get("create", 0) > 20
    assert not [v for v in report["policyViolations"] if v["level"] == "mandatory"]


def test_integration_run_passes_and_leaves_nothing(env):
    done = automation(env, "test", "--from", TEMPLATE, "--output", "json")
    report = json.loads(done.stdout)
    assert report["cleanup"]["removed"] is True, done.stderr[-4000:]
    assert done.returncode == exit_codes.OK, json.dumps(report["checks"], indent=2)
    assert [c["name"] for c in report["checks"] if not c["ok"]] == []


def test_environment_lifecycle(env):
    name = f"e2e-{secrets.token_hex(3)}"
    try:
        created = automation(env, "env", "create", name, "--from", TEMPLATE, "--ttl", "2h",
                             "--purpose", "e2e suite", "--output", "json")
        assert created.returncode == exit_codes.OK, created.stderr[-4000:]
        listed = json.loads(automation(env, "env", "list", "--json", timeout=600).stdout)
        assert any(e["name"] == name and e["status"] == "active" for e in listed)
    finally:
        destroyed = automation(env, "env", "destroy", name, "--force", "--output", "json")
    assert destroyed.returncode == exit_codes.OK, destroyed.stderr[-4000:]
    assert json.loads(destroyed.stdout)["removed"] is True
