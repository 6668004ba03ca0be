"""The offline check end to end: the recorded check per stack (``stack_check``, the CLI's own run and
print functions) for what it reports and writes; a real process for exit codes and error paths."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from automation import exit_codes
from automation.offline.plan import ROOT
from tests.support.processes import descendants, running

EXPECTED = {
    # stack: (resources, worst-case GPUs, monthly GPU cost as printed)
    "dev": (185, 16, "$21,886/month"),
    "prod": (237, 55, "$86,565/month"),
}


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "automation", "check", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_check_passes(stack_check):
    assert stack_check.code == exit_codes.OK, stack_check.text[-3000:]


def test_check_reports(stack_check):
    stack, text = stack_check.stack, stack_check.text
    resources, gpus, monthly = EXPECTED[stack]
    assert f"llm-platform stack {stack}: {resources} resources" in text
    assert "Node pools" in text and "Resources by type" in text
    assert f"GPU capacity (worst case): {gpus} GPUs" in text
    assert "Capacity (simulated)" in text and "headroom min/max" in text
    assert monthly in text
    assert "nvidia.com/gpu=true:NO_SCHEDULE" in text


def test_the_check_process_exits_0_and_prints_json_for_scripts(tmp_path, dev_check):
    done = run_check("--stack", "dev", "--out", str(tmp_path), "--output", "json")
    assert done.returncode == exit_codes.OK, done.stderr
    printed = json.loads(done.stdout)
    assert printed["summary"] == dev_check.json["summary"] and printed["policies"] == dev_check.json["policies"]
    assert (tmp_path / "plan.json").read_bytes() == (dev_check.out / "plan.json").read_bytes()


def test_plan_json_is_engine_form(stack_check):
    stack, out = stack_check.stack, stack_check.out
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["project"], plan["stack"]) == ("llm-platform", stack)
    assert len(plan["resources"]) == EXPECTED[stack][0]
    for resource in plan["resources"]:
        assert set(resource) >= {"urn", "type", "name", "parent", "custom", "inputs"}
        assert resource["urn"].startswith(f"urn:pulumi:{stack}::llm-platform::")
    assert "[secret]" in json.dumps(plan) and "sk-" not in json.dumps(plan), "secret values are redacted on disk"
    (cluster,) = [r for r in plan["resources"] if r["type"] == "eks:index:Cluster"]
    assert cluster["custom"] is False and "encryptionConfigKeyArn" in cluster["inputs"]
    assert [r["urn"] for r in plan["resources"]] == sorted(r["urn"] for r in plan["resources"])


def test_manifests_are_written(stack_check):
    documents = [yaml.safe_load(p.read_text()) for p in (stack_check.out / "manifests").glob("*.yaml")]
    charts = {d["chart"]: d["version"] for d in documents if "helmRelease" in d}
    assert charts["oci://public.ecr.aws/karpenter/karpenter"] == "1.14.1"
    kinds = {d["kind"] for d in documents if "kind" in d}
    assert {"EC2NodeClass", "NodePool", "Deployment", "ScaledObject", "ResourceQuota", "PrometheusRule"} <= kinds


def test_a_second_check_leaves_only_its_own_manifests(tmp_path, dev_plan):
    """Files of objects the plan no longer has are removed, the others rewritten in place; a file
    that is not a manifest is left alone."""
    from automation.offline.files import write_manifests
    from automation.offline.manifests import dumps_yaml, kubernetes_documents

    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "deployment-gone-old-model.yaml").write_text("kind: Deployment\n")
    names = sorted(kubernetes_documents(dev_plan))
    (directory / names[0]).write_text("stale content that is longer than the new one " * 100)
    (directory / "notes.txt").write_text("mine")
    written = write_manifests(dev_plan, directory)
    assert sorted(p.name for p in directory.glob("*.yaml")) == names == [p.name for p in written]
    assert (directory / names[0]).read_text() == dumps_yaml(kubernetes_documents(dev_plan)[names[0]])
    assert (directory / "notes.txt").read_text() == "mine"


def test_json_output_for_scripts(dev_check):
    summary = dev_check.json["summary"]
    assert summary["worst_case_gpus"] == 4 + 8 + 4
    # managed pool: 4 x g5.4xlarge; NodePools: GPU limit x dearest $/GPU-hour of the sizes they admit
    # (g5.4xlarge, g6e.12xlarge)
    assert summary["worst_case_gpu_hourly_usd"] == pytest.approx(4 * 1.624 + 8 * 1.624 + 4 * 10.49264 / 4, abs=5e-5)  # the report rounds to 4 places
    assert {p["name"] for p in summary["pools"]} == {"system", "inference", "gpu-inference", "gpu-training"}
    capacity = {row["pool"]: row for row in summary["capacity"]}
    assert capacity["gpu-inference"]["source"] == "Karpenter"
    assert capacity["gpu-inference"]["workloads"] == ["Deployment serving-batch/qwen2-5-7b-instruct"]
    assert (capacity["inference"]["gpus_at_min"], capacity["inference"]["gpus_at_max"]) == (0, 3)
    assert capacity["inference"]["headroom_at_max"] == 1, "room for the rollout surge pod"


def test_infeasible_settings_exit_2_naming_each_key(tmp_path):
    text = (ROOT / "Pulumi.prod.yaml").read_text()
    broken = text.replace("catalog: qwen2.5-32b-instruct-awq", "catalog: qwen2.5-32b-instruct")
    broken = broken.replace("quota: {gpus: 20, cpu: \"200\", memory: 800Gi}", "quota: {gpus: 16, cpu: \"128\", memory: 768Gi}")
    assert broken != text
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text(broken)
    done = run_check("--stack", "prod", "--stack-file", str(stack_file), "--out", str(tmp_path / "out"))
    assert done.returncode == exit_codes.USAGE
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: stack 'prod' has")
    assert any(line.startswith("  llm-platform:serving.tiers[batch].models[qwen2-5-32b-instruct].catalog: ")
               and "65.0 GiB per GPU" in line and "41.1 GiB" in line for line in lines)
    assert any(line.startswith("  llm-platform:serving.tiers[interactive].quota.gpus: got 16") and "need 20" in line
               for line in lines)
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists(), "nothing recorded or written"


def test_unknown_stack_is_a_usage_error():
    done = run_check("--stack", "staging")
    assert done.returncode == exit_codes.USAGE
    assert "no stack file Pulumi.staging.yaml" in done.stderr and "dev, prod" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_runs_the_pack_and_writes_its_report(stack_check):
    assert "Policy pack llm-platform-gpu" in stack_check.text and "no violations" in stack_check.text
    report = json.loads((stack_check.out / "policy-report.json").read_text())
    assert report["violations"] == []


def test_mandatory_violation_fails_the_check_with_the_fix(tmp_path):
    config = json.loads((ROOT / "policies" / "config" / "dev.json").read_text())
    config["gpu-capacity-cap"] = {**config["gpu-capacity-cap"], "enforcementLevel": "mandatory", "maxGpus": 4}
    policy_config = tmp_path / "tight.json"
    policy_config.write_text(json.dumps(config))
    done = run_check("--stack", "dev", "--out", str(tmp_path / "out"), "--policy-config", str(policy_config))
    assert done.returncode == exit_codes.FAILED, done.stdout + done.stderr
    assert "[mandatory] gpu-capacity-cap" in done.stdout
    finding = done.stdout.split("[mandatory] gpu-capacity-cap: (stack)", 1)[1]
    assert "Worst-case GPU count is 16, above the cap of 4" in finding
    assert "raise maxGpus" in finding


def test_missing_policy_config_is_a_usage_error(tmp_path):
    done = run_check("--stack", "dev", "--out", str(tmp_path), "--policy-config", str(tmp_path / "none.json"))
    assert done.returncode == exit_codes.USAGE
    assert "no policy config" in done.stderr and "Traceback" not in done.stderr


def test_check_says_where_its_time_went(dev_check):
    """Recording (with the pack analyzing beside it), the summary and manifests (with the pack analyzing
    the stack beside them), the pack's remaining answers, writing files."""
    seconds = dev_check.json["seconds"]
    assert set(seconds) == {"record", "summary", "analyze", "write"}
    assert seconds["record"] > 0 and seconds["summary"] > 0 and seconds["analyze"] >= 0 and seconds["write"] > 0
    assert f"recorded in {seconds['record']:.2f} s (the policy pack analyzing beside it)" in dev_check.text


def test_the_collector_is_back_as_it_was_after_the_check(tmp_path):
    """Rare collections while a check runs (nested blocks included), the interpreter's thresholds again
    afterwards with nothing young left for its first pass, and the heap no longer frozen."""
    import gc

    from automation.offline.check import fewer_collections, run_check

    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == (100_000, 8, 1_000)
        run_check("dev", tmp_path / "out")
        assert gc.get_threshold() == (100_000, 8, 1_000), "the nested block left it as it found it"
        garbage = [[] for _ in range(1000)]
    assert gc.isenabled() and gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 1000, "what the check made is not young any more"
    del garbage


def test_an_out_dir_that_cannot_hold_the_files_is_one_line_and_exit_2_before_anything_runs(tmp_path):
    (tmp_path / "manifests").write_text("a file where the manifests directory goes")
    done = run_check("--stack", "dev", "--out", str(tmp_path))
    assert done.returncode == exit_codes.USAGE
    assert done.stderr.strip().splitlines() == [
        f"error: cannot write the check's files to {tmp_path} (File exists: {tmp_path / 'manifests'}); choose another --out"
    ]
    assert "Traceback" not in done.stderr and not (tmp_path / "plan.json").exists()


def test_a_failure_to_write_a_file_is_one_line_naming_it(tmp_path, monkeypatch):
    from automation.offline import check

    def write_files(directory, contents):
        raise PermissionError(13, "Permission denied", str(directory / next(iter(contents))))

    monkeypatch.setattr(check, "write_files", write_files)
    with pytest.raises(check.CheckOutputError, match=r"Permission denied: .*/manifests/.*\.yaml\); choose another --out"):
        check.run_check("dev", tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_check_leaves_no_process_behind(tmp_path, signum, code):
    """Stopped once the pack runs: exit 130/143 with the one-line error, the pack gone, and no file
    half-written: stopped while the program records, nothing is written; stopped later (a busy
    machine starts the pack late), each file is the whole of one check's (files are renamed into
    place). A generated 100-model stack records for seconds after the pack starts."""
    from benchmarks.generated_stack import write_stack

    stack_file, policy_file = write_stack(100, tmp_path)
    out = tmp_path / "out"
    check = subprocess.Popen([sys.executable, "-m", "automation", "check", "--stack", "bench100", "--out", str(out),
                              "--stack-file", str(stack_file), "--policy-config", str(policy_file)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    helpers: set[int] = set()
    deadline = time.monotonic() + 30
    while not helpers:  # the pack
        assert time.monotonic() < deadline and check.poll() is None, "the check's helpers did not start"
        helpers |= descendants(check.pid)
        time.sleep(0.01)
    check.send_signal(signum)
    _, err = check.communicate(timeout=60)
    assert check.returncode == code, err
    assert "Traceback" not in err and err.startswith("interrupted by "), err  # and what to run next
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in helpers):
        assert time.monotonic() < deadline, f"left running: {[p for p in helpers if running(p)]}"
        time.sleep(0.05)
    manifests = list((out / "manifests").glob("*.yaml"))
    if (out / "plan.json").exists():
        plan = json.loads((out / "plan.json").read_text())
        assert len(plan["resources"]) == 1110
    assert all(yaml.safe_load(path.read_text()) for path in manifests)
    assert not list(out.rglob("*.partial"))


def test_a_configuration_too_long_for_the_engines_environment_is_refused(tmp_path):
    """The textbook answer: the program runs under mocks in this process whatever the size of its
    configuration. The engine's: it hands the configuration to the program and to the policy pack
    in one environment variable, and Linux refuses an exec with a variable over 131,072 bytes
    ("argument list too long", pulumi/pulumi#20402). 600 generated models make 145,292 bytes of
    PULUMI_CONFIG; the check refuses the stack before anything runs, naming the largest key."""
    from benchmarks.generated_stack import write_stack

    stack_file, policy_file = write_stack(600, tmp_path)
    done = run_check("--stack", "bench600", "--stack-file", str(stack_file), "--policy-config", str(policy_file),
                     "--out", str(tmp_path / "out"))
    assert done.returncode == exit_codes.USAGE, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: stack 'bench600': its configuration is 145,292 bytes as PULUMI_CONFIG "
                           "(largest key llm-platform:serving, ")
    assert "above the 131,072 bytes Linux allows one environment variable" in line and "pulumi/pulumi#20402" in line
    assert not (tmp_path / "out").exists()


def test_the_engines_environment_limit_counts_name_value_and_nul():
    from automation.offline.check import ConfigTooLargeForEngine, engine_environment
    from automation.offline.pack.runner import environment_string_bytes

    assert environment_string_bytes("PULUMI_CONFIG", "{}") == len("PULUMI_CONFIG={}") + 1
    # '{"k:v":"' + text + '"}' in the variable: 14 + 8 + 2 + 1 bytes around the text.
    fits = "x" * (131_072 - len('PULUMI_CONFIG={"k:v":""}') - 1)
    assert json.loads(engine_environment("s", {"k:v": fits})["PULUMI_CONFIG"]) == {"k:v": fits}
    with pytest.raises(ConfigTooLargeForEngine, match="131,073 bytes as PULUMI_CONFIG"):
        engine_environment("s", {"k:v": fits + "x"})


def test_a_stack_in_a_region_the_catalog_does_not_price_is_checked_with_its_budget_unknown(tmp_path):
    """A copy of dev in eu-west-1: every policy runs (none fails), the GPU count is known, the cost and
    the budget are not (no eu-west-1 price is sourced, none is borrowed from us-east-1), and the check
    names the one command that fills them and exits 8 (BUDGET_UNKNOWN), not 0 and not 2."""
    stack_file = tmp_path / "Pulumi.dev-eu.yaml"
    stack_file.write_text((ROOT / "Pulumi.dev.yaml").read_text().replace("region: us-east-1", "region: eu-west-1"))
    done = run_check("--stack", "dev-eu", "--stack-file", str(stack_file), "--policy-config",
                     str(ROOT / "policies" / "config" / "dev.json"), "--out", str(tmp_path / "out"), "--output", "json")
    assert done.returncode == exit_codes.BUDGET_UNKNOWN == 8, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["policies"]["violations"] == []
    assert result["budgetUnknown"] == (
        "no on-demand price for g5.2xlarge, g5.4xlarge in eu-west-1 in policies/instance_catalog.json; run "
        "`python -m automation catalog refresh --region eu-west-1` with AWS credentials, or choose a priced region or type")
    summary = result["summary"]
    assert (summary["worst_case_gpus"], summary["worst_case_gpu_monthly_usd"]) == (16, None)
    assert summary["prices_unknown"] == result["budgetUnknown"]


def test_budget_unknown_has_its_own_exit_code():
    others = {exit_codes.OK, exit_codes.FAILED, exit_codes.USAGE, exit_codes.LOCKED, exit_codes.NOT_FOUND,
              exit_codes.PREFLIGHT, exit_codes.INCOMPLETE, exit_codes.OUTDATED, exit_codes.INTERRUPTED,
              exit_codes.TERMINATED}
    assert exit_codes.BUDGET_UNKNOWN == 8 and exit_codes.BUDGET_UNKNOWN not in others
