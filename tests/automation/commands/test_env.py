"""env create/list/destroy/reap and parallel runs, against the recording CLI stand-in."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from automation import exit_codes
from automation.cli import main
from automation.driver import environments, workspace
from automation.driver.environments import (
    TAG_CREATED,
    TAG_EXPIRES,
    TAG_KIND,
    TAG_OWNER,
    TAG_PURPOSE,
    TAG_TEMPLATE,
    parse_time,
)
from automation.stacks import read_stack_config
from tests.automation.commands.test_stack_ops import flag_values
from tests.automation.conftest import Rig


def create(rig: Rig, name: str, *extra: str):
    return rig.run("env", "create", name, "--from", "dev", *extra)


def test_create_over_the_templates_gpu_budget_is_refused_before_anything_exists(rig: Rig):
    result = create(rig, "alice-big", "--set", "gpuPools[0].scaling.maxSize=5")

    assert result.code == exit_codes.USAGE
    assert "llm-platform:gpuBudget.maxGpus: got 16: the stack's worst-case GPU count is 17" in result.err
    assert "Traceback" not in result.err
    assert not [a for a in rig.calls.argvs() if a[:2] == ["stack", "init"]], "no stack is created"


def config_pairs(argv: list[str]) -> dict[str, str]:
    return dict(value.split("=", 1) for value in flag_values(argv, "--plaintext"))


def test_create_tags_configures_and_deploys_the_environment(rig: Rig):
    result = create(rig, "alice-exp", "--ttl", "4h", "--purpose", "try vllm 0.11",
                    "--set", "gpuPools[0].scaling.maxSize=4", "--set", "kmsDeletionWindowDays=10")

    assert result.code == exit_codes.OK, result.err
    argvs = rig.calls.argvs()
    assert argvs[0] == ["stack", "init", "env-alice-exp", "--secrets-provider", "passphrase"]
    tag_sets = [a for a in argvs if a[:3] == ["stack", "tag", "set"]]
    assert all(flag_values(a, "--stack") == ["env-alice-exp"] for a in tag_sets)
    tags = {a[3]: a[4] for a in tag_sets}
    assert tags[TAG_KIND] == "env"
    assert tags[TAG_OWNER] == "alice"
    assert tags[TAG_TEMPLATE] == "dev"
    assert tags[TAG_PURPOSE] == "try vllm 0.11"
    assert parse_time(tags[TAG_EXPIRES]) - parse_time(tags[TAG_CREATED]) == timedelta(hours=4)
    assert rig.tags("env-alice-exp") == tags, "the tags land in the backend, where env list reads them"

    (set_all,) = [a for a in argvs if a[:2] == ["config", "set-all"]]
    assert flag_values(set_all, "--stack") == ["env-alice-exp"]
    config = config_pairs(set_all)
    assert set(config) == set(read_stack_config("dev", rig.project)), "every template key, nothing else"
    assert config["llm-platform:environment"] == "alice-exp"
    assert config["llm-platform:kmsDeletionWindowDays"] == "10"
    pools = json.loads(config["llm-platform:gpuPools"])
    assert pools[0]["scaling"] == {"minSize": 0, "desiredSize": 0, "maxSize": 4}
    resource_tags = json.loads(config["llm-platform:tags"])
    assert resource_tags["llm-platform/owner"] == "alice" and resource_tags["llm-platform/stack"] == "env-alice-exp"

    (up,) = [a for a in argvs if a[0] == "up"]
    assert flag_values(up, "--stack") == ["env-alice-exp"]
    assert flag_values(up, "--policy-pack-config") == [str(rig.project / "policies" / "config" / "dev.json")]
    order = [a[0] if a[0] != "stack" else " ".join(a[:3]) for a in argvs]
    assert order.index("stack tag set") < order.index("config") < order.index("up"), (
        "tags first, so even an interrupted create is reaped when it expires"
    )
    assert "env alice-exp is up: owner alice" in result.out


def test_list_shows_owner_age_expiry_and_status(rig: Rig):
    assert create(rig, "alice-exp", "--ttl", "4h", "--purpose", "demo").code == exit_codes.OK
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK  # a repository stack: not an environment

    listed = rig.run("env", "list", "--json")
    table = rig.run("env", "list")

    assert listed.code == table.code == exit_codes.OK, listed.err + table.err
    (entry,) = json.loads(listed.out)
    assert entry["name"] == "alice-exp" and entry["stack"] == "env-alice-exp"
    assert (entry["kind"], entry["owner"], entry["status"], entry["purpose"]) == ("env", "alice", "active", "demo")
    assert parse_time(entry["expiresAt"]) - parse_time(entry["createdAt"]) == timedelta(hours=4)
    assert 0 <= entry["ageSeconds"] < 120
    for heading in ("NAME", "OWNER", "AGE", "EXPIRES", "STATUS"):
        assert heading in table.out
    assert "alice-exp" in table.out and "active" in table.out and "in 3h" in table.out or "in 4h" in table.out
    assert "dev" not in table.out.split()


def test_list_with_nothing_and_without_a_passphrase(rig: Rig):
    rig.monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    result = rig.run("env", "list")
    assert result.code == exit_codes.OK, result.err
    assert "no environments in file://" in result.out
    assert rig.calls.argvs() == [["stack", "ls", "--json"]]


def test_bad_requests_exit_2_before_any_cli_call(rig: Rig):
    cases = {
        ("--set", "gpuPools[0].scaling.maxSize=0"): "llm-platform:gpuPools[0].scaling.maxSize: got 0",
        ("--set", "noSuchKey=1"): "llm-platform:noSuchKey",
        ("--set", "gpuPools[5].name=x"): "no list item [5]",
        ("--ttl", "9d"): "must be between 15m and 7d",
        ("--ttl", "soon"): "argument --ttl: 'soon'",
        ("--ttl", "9999999999d"): "argument --ttl: '9999999999d': far too long",
        ("--owner", "bad owner!"): "argument --owner: 'bad owner!'",
    }
    for extra, message in cases.items():
        result = create(rig, "alice-exp", *extra)
        assert result.code == exit_codes.USAGE, extra
        assert message in result.err, (extra, result.err)
        assert "Traceback" not in result.err
    bad_name = rig.run("env", "create", "Alice", "--from", "dev")
    assert bad_name.code == exit_codes.USAGE and "environment name 'Alice'" in bad_name.err
    assert rig.calls.entries() == []


def test_template_secrets_are_refused(rig: Rig):
    stack_file = rig.project / "Pulumi.dev.yaml"
    document = yaml.safe_load(stack_file.read_text())
    document["config"]["llm-platform:apiKey"] = {"secure": "v1:abc"}
    stack_file.write_text(yaml.safe_dump(document))
    result = create(rig, "alice-exp")
    assert result.code == exit_codes.USAGE
    assert "secret config (llm-platform:apiKey)" in result.err


def test_create_twice_is_a_usage_error(rig: Rig):
    assert create(rig, "alice-exp").code == exit_codes.OK
    again = create(rig, "alice-exp")
    assert again.code == exit_codes.USAGE
    assert "env alice-exp already exists; `python -m automation env update alice-exp` retries" in again.err


def test_failed_create_keeps_the_tagged_stack_for_reap(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_FAIL", "up")
    result = create(rig, "alice-exp", "--ttl", "1h")

    assert result.code == exit_codes.FAILED
    assert "create failed; the stack stays until it expires at" in result.err
    assert "Retry with `python -m automation env update alice-exp`" in result.err
    assert rig.stacks() == ["env-alice-exp"]
    assert rig.tags("env-alice-exp")[TAG_KIND] == "env"
    assert not any(a[0] == "destroy" for a in rig.calls.argvs()), "a failed env stays for inspection"


def test_destroy_destroys_then_removes(rig: Rig):
    assert create(rig, "alice-exp").code == exit_codes.OK
    result = rig.run("env", "destroy", "alice-exp")

    assert result.code == exit_codes.OK, result.err
    argvs = rig.calls.argvs()
    destroy = next(i for i, a in enumerate(argvs) if a[0] == "destroy")
    assert flag_values(argvs[destroy], "--stack") == ["env-alice-exp"]
    assert argvs[-1] == ["stack", "rm", "--yes", "env-alice-exp"]
    assert destroy < len(argvs) - 1
    assert rig.stacks() == [] and rig.tags("env-alice-exp") == {}
    assert "env alice-exp: destroyed and removed" in result.out


def test_destroy_someone_elses_environment_needs_force(rig: Rig):
    assert create(rig, "bobs", "--owner", "bob").code == exit_codes.OK
    refused = rig.run("env", "destroy", "bobs")
    assert refused.code == exit_codes.USAGE
    assert "bobs belongs to bob; pass --force" in refused.err
    assert not any(a[0] == "destroy" for a in rig.calls.argvs())

    forced = rig.run("env", "destroy", "bobs", "--force", "--json")
    assert forced.code == exit_codes.OK, forced.err
    assert json.loads(forced.out)["removed"] is True


def test_destroy_errors_are_distinct(rig: Rig):
    missing = rig.run("env", "destroy", "ghost")
    assert missing.code == exit_codes.NOT_FOUND
    assert "stack 'env-ghost' does not exist" in missing.err

    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    untagged = rig.run("env", "destroy", "env-x", "--force")
    assert untagged.code == exit_codes.NOT_FOUND

    rig.monkeypatch.setenv("STANDIN_FAIL", "destroy")
    assert create(rig, "alice-exp").code == exit_codes.OK
    failed = rig.run("env", "destroy", "alice-exp")
    assert failed.code == exit_codes.FAILED
    assert "DependencyViolation" in failed.out
    assert "env alice-exp: destroy failed, the stack stays" in failed.err
    assert rig.stacks() == ["dev", "env-alice-exp"], "a failed destroy never removes the stack"


@pytest.fixture
def aged(rig: Rig):
    """Two environments and a repository stack; then the clock moves two hours on."""
    assert create(rig, "old", "--ttl", "1h").code == exit_codes.OK
    assert create(rig, "fresh", "--ttl", "5h").code == exit_codes.OK
    assert rig.run("up", "--stack", "dev").code == exit_codes.OK
    later = environments.utcnow() + timedelta(hours=2)
    rig.monkeypatch.setattr(environments, "utcnow", lambda: later)
    return rig


def test_reap_dry_run_changes_nothing_then_reap_destroys_only_expired_environments(aged: Rig):
    before = len(aged.calls.argvs())
    dry = aged.run("env", "reap", "--dry-run", "--json")

    assert dry.code == exit_codes.OK, dry.err
    report = json.loads(dry.out)
    assert report["dryRun"] is True
    assert [(r["stack"], r["outcome"]) for r in report["reaped"]] == [("env-old", "would destroy")]
    assert not any(a[0] == "destroy" or a[:2] == ["stack", "rm"] for a in aged.calls.argvs()[before:])
    assert aged.stacks() == ["dev", "env-fresh", "env-old"]

    before = len(aged.calls.argvs())
    result = aged.run("env", "reap")

    assert result.code == exit_codes.OK, result.err
    reaping = aged.calls.argvs()[before:]
    destroyed = [flag_values(a, "--stack")[0] for a in reaping if a[0] == "destroy"]
    removed = [a[-1] for a in reaping if a[:2] == ["stack", "rm"]]
    assert destroyed == removed == ["env-old"]
    assert aged.stacks() == ["dev", "env-fresh"]
    assert re.search(r"env-old\s+alice\s+1h ago\s+destroyed\s+1", result.out), result.out


def test_reap_skips_a_busy_stack_and_reports_failures(aged: Rig):
    lock = aged.state / ".pulumi" / "locks" / "organization" / "llm-platform" / "env-old" / "running.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": os.getpid(), "username": "bob", "hostname": socket.gethostname(),
                                "timestamp": "2026-11-23T08:00:00Z"}))
    busy = aged.run("env", "reap", "--json", "--busy-retries", "2", "--backoff", "0.1")
    assert busy.code == exit_codes.LOCKED, busy.err
    (reaped,) = json.loads(busy.out)["reaped"]
    assert (reaped["outcome"], reaped["attempts"]) == ("busy", 3), "tried once, then retried twice with backoff"
    assert "its process is still running" in reaped["errors"][0]
    assert "retrying in 0.1s" in busy.err and "retrying in 0.2s" in busy.err
    assert "env-old" in aged.stacks()

    lock.unlink()
    aged.monkeypatch.setenv("STANDIN_FAIL", "destroy")
    failed = aged.run("env", "reap")
    assert failed.code == exit_codes.FAILED
    assert re.search(r"env-old\s+alice\s+1h ago\s+failed\s+1\s+deleting EC2 VPC: DependencyViolation", failed.out)
    assert "env-old" in aged.stacks()


def test_parallel_creates_run_in_separate_workspaces(rig: Rig):
    codes: dict[str, int] = {}

    def run(name: str) -> None:
        codes[name] = main(["env", "create", name, "--from", "dev", "--ttl", "1h"])

    threads = [threading.Thread(target=run, args=(name,)) for name in ("para-a", "para-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert codes == {"para-a": exit_codes.OK, "para-b": exit_codes.OK}
    work_dirs = {}
    for stack in ("env-para-a", "env-para-b"):
        dirs = {Path(c["cwd"]) for c in rig.calls.pulumi() if stack in c["argv"]}
        assert len(dirs) == 1, f"{stack} ran in one workspace: {dirs}"
        work_dirs[stack] = dirs.pop()
    assert work_dirs["env-para-a"] != work_dirs["env-para-b"]
    assert rig.project not in work_dirs.values()
    assert not any(d.exists() for d in work_dirs.values())
    assert rig.stacks() == ["env-para-a", "env-para-b"]
    assert rig.tags("env-para-a")[TAG_OWNER] == rig.tags("env-para-b")[TAG_OWNER] == "alice"
    assert not list(rig.project.glob("Pulumi.env-*.yaml"))


def test_via_operator_writes_a_stack_manifest_and_runs_nothing(rig: Rig, tmp_path: Path):
    rig.monkeypatch.setenv("PULUMI_BACKEND_URL", "s3://team-pulumi-state")
    rig.monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    out = tmp_path / "env-alice-exp.yaml"
    result = create(rig, "alice-exp", "--via", "operator", "--out", str(out), "--ttl", "2d", "--purpose", "demo",
                    "--repo", "https://github.com/example/llm-platform.git", "--commit", "0123abc",
                    "--set", "gpuPools[0].scaling.maxSize=4")

    assert result.code == exit_codes.OK, result.err
    assert rig.calls.entries() == []
    manifest = yaml.safe_load(out.read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == ("pulumi.com/v1", "Stack")
    spec = manifest["spec"]
    assert spec["stack"] == "env-alice-exp"
    assert spec["projectRepo"] == "https://github.com/example/llm-platform.git"
    assert spec["commit"] == "0123abc" and "branch" not in spec
    assert spec["backend"] == "s3://team-pulumi-state"
    assert spec["secretsProvider"] == "passphrase"
    assert spec["envRefs"]["PULUMI_CONFIG_PASSPHRASE"] == {
        "type": "Secret", "secret": {"name": "pulumi-passphrase", "key": "passphrase"}}
    assert spec["destroyOnFinalize"] is True
    assert spec["serviceAccountName"] == "pulumi"
    assert spec["config"]["llm-platform:environment"] == "alice-exp"
    assert spec["config"]["llm-platform:gpuPools"][0]["scaling"]["maxSize"] == 4
    annotations = manifest["metadata"]["annotations"]
    assert annotations["llm-platform.io/owner"] == "alice"
    assert parse_time(annotations["llm-platform.io/expires-at"]) - parse_time(
        annotations["llm-platform.io/created-at"]) == timedelta(days=2)


def test_via_operator_refuses_a_local_backend(rig: Rig):
    result = create(rig, "alice-exp", "--via", "operator", "--repo", "https://example.com/r.git", "--commit", "abc")
    assert result.code == exit_codes.USAGE
    assert "needs a backend the operator's pods can reach" in result.err


def fresh_checkout(rig: Rig, tmp_path: Path) -> Path:
    """Another clone of the project on another machine: no workspace, no local state, same backend."""
    from tests.automation.conftest import make_project

    clone = make_project(tmp_path / "clone")
    rig.monkeypatch.setenv("PULUMI_BACKEND_URL", rig.state.resolve().as_uri())
    rig.monkeypatch.setattr(workspace, "PROJECT_ROOT", clone)
    return clone


def test_failed_create_is_retried_from_a_fresh_checkout_with_the_stored_request(rig: Rig, tmp_path: Path):
    rig.monkeypatch.setenv("STANDIN_FAIL", "up")
    assert create(rig, "alice-exp", "--set", "gpuPools[0].scaling.maxSize=1",
                  "--set", "serving.tiers[0].models[0].replicas.max=1",
                  "--set", "serving.tiers[0].models[0].rollout=noSurge",
                  "--set", "kmsDeletionWindowDays=10").code == exit_codes.FAILED
    rig.monkeypatch.delenv("STANDIN_FAIL")
    fresh_checkout(rig, tmp_path)

    retry = rig.run("env", "update", "alice-exp")
    assert retry.code == exit_codes.OK, retry.err
    ups = [a for a in rig.calls.argvs() if a[0] == "up"]
    assert len(ups) == 2
    set_alls = [config_pairs(a) for a in rig.calls.argvs() if a[:2] == ["config", "set-all"]]
    assert set_alls[-1] == set_alls[0], "the retry deploys exactly what was requested"
    assert json.loads(set_alls[-1]["llm-platform:gpuPools"])[0]["scaling"]["maxSize"] == 1
    assert "env alice-exp is up" in retry.out


def test_update_changes_the_stored_request_and_extend_gives_more_time(rig: Rig, tmp_path: Path):
    assert create(rig, "alice-exp", "--ttl", "1h", "--set", "kmsDeletionWindowDays=10",
                  "--set", "gpuPools[0].scaling.maxSize=1",
                  "--set", "serving.tiers[0].models[0].replicas.max=1",
                  "--set", "serving.tiers[0].models[0].rollout=noSurge").code == exit_codes.OK
    fresh_checkout(rig, tmp_path)

    updated = rig.run("env", "update", "alice-exp", "--set", "gpuPools[0].scaling.maxSize=2",
                      "--unset", "kmsDeletionWindowDays")
    assert updated.code == exit_codes.OK, updated.err
    config = config_pairs([a for a in rig.calls.argvs() if a[:2] == ["config", "set-all"]][-1])
    assert json.loads(config["llm-platform:gpuPools"])[0]["scaling"]["maxSize"] == 2
    template = read_stack_config("dev", rig.project)
    assert config["llm-platform:kmsDeletionWindowDays"] == str(template["llm-platform:kmsDeletionWindowDays"])
    listed = json.loads(rig.run("env", "list", "--json").out)
    assert listed[0]["overrides"] == ["serving.tiers[0].models[0].replicas.max=1", "serving.tiers[0].models[0].rollout=noSurge",
                                      "gpuPools[0].scaling.maxSize=2"], (
        "the request in the backend changed too")

    before = parse_time(rig.tags("env-alice-exp")[TAG_EXPIRES])
    extended = rig.run("env", "extend", "alice-exp", "--ttl", "2d")
    assert extended.code == exit_codes.OK, extended.err
    after = parse_time(rig.tags("env-alice-exp")[TAG_EXPIRES])
    assert after - before > timedelta(days=1, hours=22)
    assert not any(a[0] == "up" for a in rig.calls.argvs()[-3:]), "extend only moves the expiry"

    bad = rig.run("env", "extend", "alice-exp", "--ttl", "9999999999d")
    assert bad.code == exit_codes.USAGE and "argument --ttl" in bad.err and len(bad.err.splitlines()) == 1
    ghost = rig.run("env", "update", "ghost")
    assert ghost.code == exit_codes.NOT_FOUND


def test_destroy_removes_karpenter_nodes_and_load_balancers_first_and_lists_leftovers(rig: Rig):
    assert create(rig, "alice-exp").code == exit_codes.OK
    rig.monkeypatch.setenv("STANDIN_STUCK", "gateway-internal")
    rig.monkeypatch.setenv("STANDIN_SERVICES", json.dumps([["serving", "gateway", "LoadBalancer"],
                                                           ["serving", "gateway-internal", "LoadBalancer"],
                                                           ["default", "kubernetes", "ClusterIP"]]))
    result = rig.run("env", "destroy", "alice-exp", "--json")

    assert result.code == exit_codes.OK, result.err
    report = json.loads(result.out)
    assert report["teardown"]["deleted"] == ["nodepool.karpenter.sh/inference", "nodeclaim.karpenter.sh/inference-x1",
                                             "ingress/llm-gateway/gateway", "service/serving/gateway"]
    assert report["teardown"]["leftovers"] == ["service/serving/gateway-internal"]
    assert "still in the cluster before destroy: service/serving/gateway-internal" in result.err
    kubectl_deletes = [e["time"] for e in rig.calls.kubectl() if e["argv"][0] == "delete"]
    destroy_at = [e["time"] for e in rig.calls.entries("pulumi") if "destroy" in e["argv"]]
    assert max(kubectl_deletes) < min(destroy_at), "everything inside the cluster goes before the VPC"


def test_list_shows_a_stale_lock_with_its_holder_and_the_command_that_clears_it(rig: Rig):
    assert create(rig, "alice-exp").code == exit_codes.OK
    lock = rig.state / ".pulumi" / "locks" / "organization" / "llm-platform" / "env-alice-exp" / "dead.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": 2 ** 22 + 17, "username": "bob", "hostname": socket.gethostname(),
                                "timestamp": "2026-11-23T08:00:00Z"}))
    table = rig.run("env", "list")
    assert re.search(r"alice-exp\s+env\s+alice.*stale lock", table.out), table.out
    assert "locked by bob@" in table.out and "unlock --stack env-alice-exp" in table.out
    listed = json.loads(rig.run("env", "list", "--json").out)
    assert listed[0]["status"] == "stale lock" and listed[0]["locks"][0]["state"] == "stale"


def test_reap_reports_a_stale_lock_and_clears_it_when_asked(aged: Rig):
    lock = aged.state / ".pulumi" / "locks" / "organization" / "llm-platform" / "env-old" / "dead.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": 2 ** 22 + 17, "username": "bob", "hostname": socket.gethostname(),
                                "timestamp": "2026-11-23T08:00:00Z"}))
    stale = aged.run("env", "reap", "--json", "--busy-retries", "3", "--backoff", "0.1")
    assert stale.code == exit_codes.LOCKED
    (reaped,) = json.loads(stale.out)["reaped"]
    assert (reaped["outcome"], reaped["attempts"]) == ("stale-lock", 1), "a dead holder is not waited for"
    assert "unlock --stack env-old" in reaped["errors"][0] and lock.exists()

    cleared = aged.run("env", "reap", "--json", "--clear-stale-locks")
    assert cleared.code == exit_codes.OK, cleared.err
    (reaped,) = json.loads(cleared.out)["reaped"]
    assert reaped["outcome"] == "destroyed" and reaped["errors"] == ["cleared 1 stale lock(s)"]
    assert not lock.exists() and "env-old" not in aged.stacks()
