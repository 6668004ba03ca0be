"""preview/up/destroy/refresh through the Automation API against the recording CLI stand-in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from automation import exit_codes
from automation.offline.plan import ROOT
from tests.automation.conftest import Rig


def flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def test_preview_attaches_the_policy_pack_and_runs_in_a_throwaway_workspace(rig: Rig):
    result = rig.run("preview", "--stack", "dev")

    assert result.code == exit_codes.OK, result.err
    argvs = rig.calls.argvs()
    assert argvs[0] == ["stack", "select", "--stack", "dev"]
    assert argvs[1] == ["stack", "init", "dev", "--secrets-provider", "passphrase"]
    preview = argvs[2]
    assert preview[0] == "preview"
    assert flag_values(preview, "--policy-pack") == [str(rig.project / "policies")]
    assert flag_values(preview, "--policy-pack-config") == [str(rig.project / "policies" / "config" / "dev.json")]
    assert flag_values(preview, "--stack") == ["dev"]
    assert flag_values(preview, "--event-log")[0].startswith("tcp://127.0.0.1:")
    assert "preview dev: succeeded" in result.out
    assert "changes: 7 create" in result.out

    (work_dir,) = {Path(c["cwd"]) for c in rig.calls.pulumi()}
    assert work_dir != rig.project and not work_dir.exists(), "the workspace is private to the run and removed"
    env = rig.calls.pulumi()[-1]["env"]
    assert env["PULUMI_BACKEND_URL"] == rig.state.resolve().as_uri(), "default: the project-local file backend"
    assert env["PULUMI_HOME"] == str(rig.home)
    assert env["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] == "true"
    assert env["PULUMI_CONFIG_PASSPHRASE"] == "<set>"
    assert sorted(p.name for p in rig.project.glob("Pulumi.*.yaml")) == ["Pulumi.dev.yaml", "Pulumi.prod.yaml"]
    assert (rig.project / "Pulumi.dev.yaml").read_text() == (ROOT / "Pulumi.dev.yaml").read_text(), (
        "stack init writes its salt into the workspace copy, never into the repository's stack file"
    )


def test_up_then_up_again_reports_creates_then_no_changes(rig: Rig):
    first = rig.run("up", "--stack", "dev")
    second = rig.run("up", "--stack", "dev")

    assert first.code == second.code == exit_codes.OK, first.err + second.err
    assert "up dev: succeeded" in first.out and "changes: 7 create" in first.out
    assert "changes: 7 same" in second.out
    ups = [a for a in rig.calls.argvs() if a[0] == "up"]
    assert len(ups) == 2
    for up in ups:
        assert up[:3] == ["up", "--yes", "--skip-preview"]
        assert flag_values(up, "--policy-pack") == [str(rig.project / "policies")]
        assert flag_values(up, "--policy-pack-config") == [str(rig.project / "policies" / "config" / "dev.json")]
    inits = [a for a in rig.calls.argvs() if a[:2] == ["stack", "init"]]
    assert len(inits) == 1, "the second run selects the stack that the first created"


def test_mandatory_policy_violation_fails_with_exit_1_and_is_summarised(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_POLICY", "mandatory")
    result = rig.run("preview", "--stack", "dev")

    assert result.code == exit_codes.FAILED
    assert "preview dev: failed" in result.out
    assert "policy violations: 1 mandatory" in result.out
    assert "llm-platform-gpu/gpu-pool-tainted" in result.out
    assert "GpuNodePool::inference" in result.out
    assert "  error: preview failed" in result.out and "stderr:" not in result.out, "the CLI's error line, unwrapped"


def test_advisory_violation_is_reported_but_passes(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_POLICY", "advisory")
    result = rig.run("up", "--stack", "dev", "--output", "json")

    assert result.code == exit_codes.OK, result.err
    report = json.loads(result.out)
    assert report["result"] == "succeeded"
    assert [(v["policy"], v["level"]) for v in report["policyViolations"]] == [("gpu-pool-tainted", "advisory")]
    assert report["changes"] == {"create": 7}
    assert "kubeconfig" in report["outputs"]
    assert "Updating (dev)" in result.err, "with --output json the CLI's progress streams to stderr"


def test_json_summary_of_a_mandatory_violation(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_POLICY", "mandatory")
    result = rig.run("up", "--stack", "dev", "--json")

    assert result.code == exit_codes.FAILED
    report = json.loads(result.out)
    assert report["result"] == "failed"
    assert report["policyViolations"][0]["level"] == "mandatory"
    assert report["policyViolations"][0]["urn"].endswith("GpuNodePool::inference")


def test_failed_update_exits_1_with_the_resource_error(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_FAIL", "up")
    result = rig.run("up", "--stack", "dev")

    assert result.code == exit_codes.FAILED
    assert "up dev: failed" in result.out
    assert "insufficient Spot capacity" in result.out


def test_destroy_and_refresh_run_without_policy_flags(rig: Rig):
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    refresh = rig.run("refresh", "--stack", "dev")
    destroy = rig.run("destroy", "--stack", "dev")

    assert refresh.code == destroy.code == exit_codes.OK, refresh.err + destroy.err
    argvs = {a[0]: a for a in rig.calls.argvs() if a[0] in ("refresh", "destroy")}
    assert argvs["refresh"][:3] == ["refresh", "--skip-preview", "--yes"]
    assert argvs["destroy"][:3] == ["destroy", "--skip-preview", "--yes"]
    assert not any("--policy-pack" in a for a in argvs.values())
    assert "changes: 7 delete" in destroy.out
    assert rig.stacks() == ["dev"], "destroy keeps the stack and its history"


def test_missing_stack_and_locked_stack_are_distinct_errors(rig: Rig):
    missing = rig.run("destroy", "--stack", "dev")
    assert missing.code == exit_codes.NOT_FOUND
    assert "stack 'dev' does not exist in file://" in missing.err

    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    lock = rig.state / ".pulumi" / "locks" / "organization" / "llm-platform" / "dev" / "other.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": 4242, "username": "bob", "hostname": "ci-runner-7",
                                "timestamp": "2026-11-23T08:00:00Z"}))
    locked = rig.run("up", "--stack", "dev")
    assert locked.code == exit_codes.LOCKED
    assert "stack 'dev' is locked by bob@ci-runner-7 (pid 4242) for " in locked.err
    assert "on another host" in locked.err and "unlock --stack dev --force" in locked.err
    assert "Traceback" not in locked.err


def test_bad_settings_exit_2_before_any_cli_call(rig: Rig):
    stack_file = rig.project / "Pulumi.dev.yaml"
    document = yaml.safe_load(stack_file.read_text())
    document["config"]["llm-platform:kmsDeletionWindowDays"] = 3
    stack_file.write_text(yaml.safe_dump(document))

    result = rig.run("up", "--stack", "dev")

    assert result.code == exit_codes.USAGE
    assert "error: stack 'dev' has 1 invalid setting(s):" in result.err
    assert "llm-platform:kmsDeletionWindowDays: got 3" in result.err
    assert rig.calls.entries() == []


def test_set_up_errors_exit_2_with_one_line(rig: Rig):
    (rig.project / "policies" / "config" / "prod.json").unlink()
    no_policy = rig.run("preview", "--stack", "prod")
    assert no_policy.code == exit_codes.USAGE
    assert "no policy config policies/config/prod.json; configs here: dev" in no_policy.err

    rig.monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    no_passphrase = rig.run("preview", "--stack", "dev")
    assert no_passphrase.code == exit_codes.USAGE
    assert "needs PULUMI_CONFIG_PASSPHRASE" in no_passphrase.err

    unknown = rig.run("preview", "--stack", "staging")
    assert unknown.code == exit_codes.USAGE
    assert "no stack file Pulumi.staging.yaml" in unknown.err
    assert rig.calls.entries() == []


def test_kms_secrets_provider_needs_no_passphrase(rig: Rig):
    rig.monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    result = rig.run("preview", "--stack", "dev", "--secrets-provider", "awskms://alias/llm-platform")

    assert result.code == exit_codes.OK, result.err
    assert ["stack", "init", "dev", "--secrets-provider", "awskms://alias/llm-platform"] in rig.calls.argvs()


def test_pulumi_backend_url_is_honoured(rig: Rig, tmp_path: Path):
    team = tmp_path / "team-state"
    rig.monkeypatch.setenv("PULUMI_BACKEND_URL", team.as_uri())
    result = rig.run("up", "--stack", "dev")

    assert result.code == exit_codes.OK, result.err
    assert {c["env"]["PULUMI_BACKEND_URL"] for c in rig.calls.pulumi()} == {team.as_uri()}
    assert (team / ".pulumi" / "stacks" / "llm-platform" / "dev.json").is_file()
    assert not rig.state.exists()


def test_cli_problems_exit_2(rig: Rig, tmp_path: Path):
    rig.monkeypatch.setenv("STANDIN_PULUMI_VERSION", "3.200.0")
    old = rig.run("preview", "--stack", "dev")
    assert old.code == exit_codes.USAGE
    assert "3.211.0" in old.err and "stack tags" in old.err

    rig.monkeypatch.setenv("LLM_PLATFORM_PULUMI_ROOT", str(tmp_path / "nowhere"))
    missing = rig.run("preview", "--stack", "dev")
    assert missing.code == exit_codes.USAGE
    assert "cannot run the Pulumi CLI" in missing.err


def test_long_operations_report_progress_in_plain_lines_outside_a_terminal(rig: Rig):
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    rig.monkeypatch.setenv("STANDIN_STEP_SECONDS", "0.3")
    rig.monkeypatch.setenv("LLM_PLATFORM_PROGRESS_SECONDS", "0.25")
    result = rig.run("destroy", "--stack", "dev")

    assert result.code == exit_codes.OK, result.err
    beats = [line for line in result.out.splitlines() if line.startswith("progress: destroy dev: ")]
    assert len(beats) >= 3, result.out
    assert any("/7 resources done, deleting llm-platform:index:" in line for line in beats), beats
    counts = [int(line.split(": ")[2].split("/")[0]) for line in beats]
    assert counts == sorted(counts) and 0 < counts[-1] <= 7, "counted from the engine events as they stream"
    assert "duration: " in result.out


def test_progress_status_line():
    from automation.driver.progress import OperationProgress

    now = [100.0]
    progress = OperationProgress("up", "prod", 40, lambda line: None, None, live=False, clock=lambda: now[0])
    now[0] += 192
    progress.done = 12
    progress.current = "creating aws:eks/cluster:Cluster cluster"
    assert progress.status() == "up prod: 12/40 resources done, creating aws:eks/cluster:Cluster cluster, 03:12 elapsed"


def test_every_operation_ends_with_a_summary_table(rig: Rig):
    result = rig.run("up", "--stack", "dev")
    assert re.search(r"^RESULT\s+OPERATION\s+STACK\s+CHANGES\s+VIOLATIONS\s+DURATION\s*$", result.out, re.MULTILINE)
    row = r"^ok\s+up\s+dev\s+7 create\s+0 mandatory, 0 other\s+\d+s\s*$"
    assert re.search(row, result.out, re.MULTILINE), result.out
