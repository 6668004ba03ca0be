"""The pack as the check drives it: the standard Analyzer protocol only, the engine's environment
and marshalling, findings equal to one call at a time, and a plain pulumi_policy pack served the same.

The pack analyzes each resource as the program registers it (``PlanAnalysis``), with its calls
pipelined; it is compared here with the plain sequential protocol on plans that produce findings,
so the order and content of every finding is covered, not only "no violations".
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from pulumi.runtime.proto import analyzer_pb2

from automation.offline.pack.analysis import PlanAnalysis
from automation.offline.pack.runner import (
    PolicyConfigError,
    PolicyPackError,
    PolicyPackRunner,
    Structs,
    analyze_request,
    engine_value,
    pack_environment,
    provider_urn,
    stack_resource,
    to_struct,
)
from automation.offline.plan import ROOT, PlannedResource

CONFIG_DIR = ROOT / "policies" / "config"


def _strict(stack: str) -> dict:
    """The stack's config with every policy mandatory and caps low enough to produce findings."""
    config = json.loads((CONFIG_DIR / f"{stack}.json").read_text())
    config["all"] = "mandatory"
    config["gpu-capacity-cap"] = {**config["gpu-capacity-cap"], "maxGpus": 1}
    config["gpu-monthly-budget"] = {**config["gpu-monthly-budget"], "monthlyBudgetUsd": 1}
    return config


def _broken(plan) -> list[PlannedResource]:
    """The plan with GPU groups untainted and workloads stripped of tolerations: findings per resource."""
    resources = []
    for r in plan.resources:
        inputs = r.inputs
        if r.type == "eks:index:ManagedNodeGroup" and inputs.get("taints"):
            inputs = {**inputs, "taints": []}
        if r.type == "kubernetes:apps/v1:Deployment":
            spec = json.loads(json.dumps(inputs))
            spec.get("spec", {}).get("template", {}).get("spec", {}).pop("tolerations", None)
            inputs = spec
        resources.append(PlannedResource(**{**r.__dict__, "inputs": inputs}))
    return resources


def _sequential(runner: PolicyPackRunner, resources) -> list:
    """The protocol one call at a time: each Analyze in order, then AnalyzeStack."""
    by_urn = {r.urn: r for r in resources}
    violations = []
    for r in resources:
        violations += runner.analyze(r, by_urn.get(provider_urn(r.__dict__)))
    return violations + runner.analyze_stack(resources, by_urn)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_plan_analysis_equals_the_sequential_protocol(stack, dev_plan, prod_plan):
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    resources = _broken(plan)
    with PolicyPackRunner() as runner:
        runner.configure(_strict(stack))
        expected = _sequential(runner, resources)
        pipelined = runner.analyze_plan(resources, in_flight=8)
    assert len({v.policy_name for v in expected}) >= 4, "the comparison needs findings of several policies"
    assert any(v.urn for v in expected) and any(not v.urn for v in expected)
    assert pipelined == expected
    runner = PolicyPackRunner()
    try:
        runner.launch()
        analysis = PlanAnalysis(runner, _strict(stack))
        for r in reversed(resources[1:]):  # in another order than the report's; the first never submitted
            analysis.submit(r)
        report = analysis.finish(resources)
    finally:
        runner.close()
    assert report.violations == expected
    assert report.pack.startswith("llm-platform-gpu@") and report.config == "<dict>"


#: A pack on pulumi_policy's public API alone, nothing of this project's: one resource policy, one
#: stack policy, and a stack policy that reports what the engine put in the pack's environment.
PLAIN_PACK = '''
import json, os
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy, StackValidationPolicy

def no_public_buckets(args, report_violation):
    if args.resource_type == "aws:s3/bucket:Bucket" and args.props.get("acl") == "public-read":
        report_violation("public bucket")

def two_buckets_at_most(args, report_violation):
    buckets = [r for r in args.resources if r.resource_type == "aws:s3/bucket:Bucket"]
    if len(buckets) > 2:
        report_violation(f"{len(buckets)} buckets")

def environment(args, report_violation):
    config = json.loads(os.environ.get("PULUMI_CONFIG", "{}"))
    report_violation(json.dumps({"config": config, "project": os.environ.get("PULUMI_PROJECT"),
                                 "stack": os.environ.get("PULUMI_STACK"), "dryRun": os.environ.get("PULUMI_DRY_RUN"),
                                 "refs": [r.props.get("role") for r in args.resources if r.props.get("role")]}))

PolicyPack(name="plain", enforcement_level=EnforcementLevel.ADVISORY, policies=[
    ResourceValidationPolicy(name="no-public-buckets", description="d", validate=no_public_buckets),
    StackValidationPolicy(name="two-buckets-at-most", description="d", validate=two_buckets_at_most,
                          enforcement_level=EnforcementLevel.MANDATORY),
    StackValidationPolicy(name="environment", description="d", validate=environment),
])
'''


def _bucket(name: str, acl: str = "private", **inputs) -> dict:
    return {"urn": f"urn:pulumi:s::p::aws:s3/bucket:Bucket::{name}", "type": "aws:s3/bucket:Bucket", "name": name,
            "parent": "", "custom": True, "inputs": {"acl": acl, **inputs}, "provider": "", "dependencies": []}


@pytest.fixture(scope="module")
def plain_pack(tmp_path_factory):
    directory = tmp_path_factory.mktemp("plain-pack")
    (directory / "__main__.py").write_text(textwrap.dedent(PLAIN_PACK))
    return directory


def test_a_plain_pulumi_policy_pack_is_driven_with_the_engines_environment(plain_pack):
    """No side protocol: a pack that knows nothing of this project answers every call. Its
    environment carries the stack's configuration as the engine builds it (``constructEnv``), the
    ``all`` level reaches every policy that names none, and a resource reference reaches it as the
    referenced resource's ID (the engine asks for no ``KeepResources``)."""
    config = {"llm-platform:region": "us-east-1", "llm-platform:gpuBudget": '{"maxGpus": 8}'}
    ref = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e",
           "urn": "urn:pulumi:s::p::aws:iam/role:Role::r", "id": "role-id-1"}
    resources = [_bucket("a"), _bucket("b", "public-read"), _bucket("c", role=ref)]
    with PolicyPackRunner(plain_pack, python=sys.executable, env=pack_environment("p", "s", config)) as runner:
        effective = runner.configure({"all": "mandatory", "two-buckets-at-most": "advisory"})
        violations = runner.analyze_plan(resources)
    assert {name: entry["enforcementLevel"] for name, entry in effective.items()} == {
        "no-public-buckets": "mandatory", "two-buckets-at-most": "advisory", "environment": "mandatory"}
    found = {(v.policy_name, v.enforcement_level, v.urn) for v in violations if v.policy_name != "environment"}
    assert found == {("no-public-buckets", "mandatory", "urn:pulumi:s::p::aws:s3/bucket:Bucket::b"),
                     ("two-buckets-at-most", "advisory", "")}
    (seen,) = [json.loads(v.message[v.message.index("{"):]) for v in violations if v.policy_name == "environment"]
    assert seen == {"config": config, "project": "p", "stack": "s", "dryRun": "true", "refs": ["role-id-1"]}


def test_the_engines_pack_environment():
    """``PULUMI_CONFIG`` as Go's ``json.Marshal`` writes the config map (keys sorted, compact);
    empty values are left out."""
    assert pack_environment("llm-platform", "dev", {"b:y": "2", "a:x": '{"k": 1}'}) == {
        "PULUMI_CONFIG": '{"a:x":"{\\"k\\": 1}","b:y":"2"}', "PULUMI_PROJECT": "llm-platform", "PULUMI_STACK": "dev",
        "PULUMI_DRY_RUN": "true"}
    assert "PULUMI_CONFIG" not in pack_environment("p", "s", {})


def test_the_check_hands_the_pack_the_stacks_configuration(tmp_path, monkeypatch):
    """The check starts the pack with the stack's configuration in its environment, the same
    string map the program gets."""
    from automation.offline import check
    from automation.stacks import read_stack_config
    from components.settings import config_strings

    seen = {}

    class Recording(PolicyPackRunner):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs.get("env") or {})
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(check, "PolicyPackRunner", Recording)
    check.run_check("dev", tmp_path)
    assert json.loads(seen["PULUMI_CONFIG"]) == config_strings(read_stack_config("dev"))
    assert (seen["PULUMI_PROJECT"], seen["PULUMI_STACK"]) == ("llm-platform", "dev")


def test_requests_are_the_engines_messages(prod_plan):
    """Each Analyze request and AnalyzeStack entry: type, URN, name, the inputs as the engine
    marshals them, the parent in options, the provider resource with its own inputs, parent and
    dependencies."""
    resources = prod_plan.resources
    by_urn = {r.urn: r.__dict__ for r in resources}
    structs = Structs()
    with_provider = 0
    for r in resources:
        request = analyze_request(r.__dict__, by_urn.get(provider_urn(r.__dict__)), structs)
        entry = stack_resource(r.__dict__, by_urn, structs)
        for message in (request, entry):
            assert (message.type, message.urn, message.name, message.options.parent) == (r.type, r.urn, r.name, r.parent)
            assert message.properties == to_struct(r.inputs)
        assert list(entry.dependencies) == r.dependencies and entry.parent == r.parent
        if r.provider:
            with_provider += 1
            assert request.provider.urn == entry.provider.urn == r.provider.rsplit("::", 1)[0]
            assert request.provider.properties == to_struct(by_urn[request.provider.urn]["inputs"])
    assert with_provider > 100
    assert isinstance(analyzer_pb2.AnalyzeStackRequest(resources=[entry]), analyzer_pb2.AnalyzeStackRequest)


def test_inputs_are_marshalled_as_the_engine_sends_analyzers():
    ref = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e", "urn": "urn:x", "id": "i-1"}
    unknown_ref = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e", "urn": "urn:y", "id": ""}
    urn_only = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e", "urn": "urn:z"}
    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "s"}
    assert engine_value({"a": ref, "b": [unknown_ref, urn_only], "c": secret, "__defaults": ["x"]}) == {
        "a": "i-1", "b": ["04da6b54-80e4-46f7-96ec-b56ff0331ba9", "urn:z"], "c": secret}


def test_start_up_and_config_errors_are_raised_by_finish(tmp_path, dev_plan):
    (tmp_path / "__main__.py").write_text("raise SystemExit('broken pack')\n")
    runner = PolicyPackRunner(tmp_path, python=sys.executable)
    try:
        runner.launch()
        analysis = PlanAnalysis(runner, None)
        analysis.submit(dev_plan.resources[0])
        with pytest.raises(PolicyPackError, match="broken pack"):
            analysis.finish(dev_plan.resources[:1])
    finally:
        runner.close()
    runner = PolicyPackRunner()
    try:
        runner.launch()
        analysis = PlanAnalysis(runner, {"no-such-policy": "mandatory"})
        for r in dev_plan.resources[:5]:
            analysis.submit(r)
        with pytest.raises(PolicyConfigError, match="no-such-policy"):
            analysis.finish(dev_plan.resources[:5])
        pid = runner.pid
    finally:
        runner.close()
    assert runner.pid is None and not _running(pid)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _modules_after(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport json, sys, types\n"
                           "print(json.dumps([m for m, v in sys.modules.items() if type(v) is types.ModuleType]))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_cli_start_up_does_not_load_the_check():
    """Verbs other than check (env, preview, ...) do not pay for gRPC stubs, jsonschema or the check."""
    loaded = _modules_after("from automation.cli import build_parser; build_parser()")
    assert not loaded & {"automation.offline.pack.runner", "automation.offline.check", "jsonschema"}


def test_sdk_modules_follow_the_settings():
    """A stack that serves nothing never loads pulumi_random (model API keys and the gateway's master
    key are its only users); one that serves models does."""
    code = """
import copy, sys
from automation.offline.plan import record_plan
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import config_strings
config = copy.deepcopy(read_stack_config("dev"))
config["llm-platform:serving"]["enabled"] = {enabled}
settings = parse_settings(config)
record_plan("dev", config_strings(config), region=settings.region)
"""
    assert "pulumi_random" not in _modules_after(code.format(enabled=False))
    assert "pulumi_random" in _modules_after(code.format(enabled=True))


def test_a_pack_that_stops_answering_is_a_pack_error(dev_plan):
    runner = PolicyPackRunner(call_timeout=30)
    try:
        runner.launch()
        analysis = PlanAnalysis(runner, CONFIG_DIR / "dev.json")
        analysis.submit(dev_plan.resources[0])
        runner._process.kill()  # noqa: SLF001 - the test's own runner
        deadline = time.monotonic() + 10
        while runner._process.poll() is None:  # noqa: SLF001
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(PolicyPackError, match="Analyze"):
            analysis.finish(dev_plan.resources)
    finally:
        runner.close()
