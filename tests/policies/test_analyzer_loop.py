"""The pack's faster analyzer loops answer exactly as pulumi_policy's own (``lib.analyzer_loop``).

Two real packs over gRPC, one with pulumi_policy's loops (``LLM_PLATFORM_PACK_SDK_LOOPS=1``), get
the same requests: every resource of the dev and prod plans and of a plan with unknown values,
under the baseline config, the stacks' own configs and a config with disabled and remediating
policies; their whole answers (diagnostics, their order, not-applicable entries) must be equal.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from pulumi.runtime.proto import analyzer_pb2

from automation.offline.pack.runner import SIG_KEY, PolicyPackRunner, _Structs, _provider_urn, resource_dict
from automation.offline.plan import ROOT

from tests.policies.conftest import BASELINE

SDK_LOOPS = {"LLM_PLATFORM_POLICY_STRICT": "1", "LLM_PLATFORM_PACK_SDK_LOOPS": "1"}


@pytest.fixture(scope="module")
def packs() -> Iterator[tuple[PolicyPackRunner, PolicyPackRunner]]:
    with PolicyPackRunner(env={"LLM_PLATFORM_POLICY_STRICT": "1"}) as fast, PolicyPackRunner(env=SDK_LOOPS) as sdk:
        yield fast, sdk


def _answers(runner: PolicyPackRunner, resources: list[dict]) -> list[bytes]:
    by_urn = {r["urn"]: r for r in resources}
    structs = _Structs()
    futures = [runner.analyze_async(r, by_urn.get(_provider_urn(r)), structs=structs) for r in resources]
    futures.append(runner.analyze_stack_async(resources, by_urn, structs=structs))
    return [future.result().SerializeToString(deterministic=True) for future in futures]


def _with_unknowns(resources: list[dict]) -> list[dict]:
    """Every second string in every resource's inputs made unknown, as a preview has them (the
    signature of a secret or reference kept, as the engine keeps it)."""
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    count = [0]

    def blur(value):
        if isinstance(value, dict):
            return {k: v if k == SIG_KEY else blur(v) for k, v in value.items()}
        if isinstance(value, list):
            return [blur(v) for v in value]
        if isinstance(value, str):
            count[0] += 1
            return unknown if count[0] % 2 else value
        return value

    return [{**r, "inputs": blur(r.get("inputs") or {})} for r in resources]


def _broken(resources: list[dict]) -> list[dict]:
    """The plan with its workloads and pools made wrong: floating images, no GPU tolerations, no
    taints, so that resource and stack policies alike have findings to report."""
    broken = copy.deepcopy(resources)
    for r in broken:
        inputs = r.get("inputs") or {}
        spec = ((inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in spec.get("containers") or []:
            container["image"] = container.get("image", "x").split("@")[0].split(":")[0] + ":latest"
        spec.pop("tolerations", None)
        if r["type"] == "kubernetes:karpenter.sh/v1:NodePool":
            ((inputs.get("spec") or {}).get("template") or {}).get("spec", {}).pop("taints", None)
        if r["type"] == "eks:index:ManagedNodeGroup":
            inputs.pop("taints", None)
    return broken


def _configs(stack: str) -> list:
    own = ROOT / "policies" / "config" / f"{stack}.json"
    mixed = copy.deepcopy(BASELINE)
    mixed.update({"gpu-capacity-cap": "disabled", "gpu-pools-tainted": "remediate", "capacity-simulation": "disabled",
                  "gpu-workload-schedulable": "advisory", "container-image-pinned": "disabled"})
    return [BASELINE, own, mixed]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_answers_equal_pulumi_policys_loops(packs, stack, request):
    plan = request.getfixturevalue(f"{stack}_plan")
    resources = [resource_dict(r) for r in sorted(plan.resources, key=lambda r: r.urn)]
    fast, sdk = packs
    findings = 0
    for config in _configs(stack):
        for runner in packs:
            runner.configure(config)
        for resources_now in (resources, _broken(resources), _with_unknowns(resources)):
            mine, theirs = _answers(fast, resources_now), _answers(sdk, resources_now)
            assert len(mine) == len(theirs) == len(resources_now) + 1
            for index, (a, b) in enumerate(zip(mine, theirs)):
                where = resources_now[index]["urn"] if index < len(resources_now) else "AnalyzeStack"
                assert a == b, (config if isinstance(config, dict) else str(config), where)
            findings += sum(len(analyzer_pb2.AnalyzeResponse.FromString(a).diagnostics) for a in mine)
    assert findings > 20, "the answers carry findings, so the comparison is not between empty answers"


_SEEN_BY_STACK_POLICIES = r"""
import json, sys
import pulumi_policy.policy as policy
from pulumi.runtime.proto import analyzer_pb2
from lib import analyzer_loop, values

request = analyzer_pb2.AnalyzeStackRequest.FromString(open(sys.argv[1], "rb").read())
seen = []

def spy(args, report):
    seen.append([
        [r.resource_type, r.urn, r.name, repr(values.plain(r.props)), r.parent.urn if r.parent else None,
         [d.urn for d in r.dependencies], {k: [d.urn for d in v] for k, v in r.property_dependencies.items()},
         r.opts.parent, r.opts.protect, list(r.opts.aliases), r.provider.urn if r.provider else None,
         list(r.opts.ignore_changes), r.opts.delete_before_replace, list(r.opts.additional_secret_outputs),
         repr(values.plain(r.provider.props)) if r.provider else None]
        for r in args.resources])

policies = [policy.StackValidationPolicy(name=f"spy-{i}", description="records", validate=spy) for i in range(2)]
servicer = policy._PolicyAnalyzerServicer("spy", "0.0.1", policies, policy.EnforcementLevel.MANDATORY)
sdk = policy._PolicyAnalyzerServicer.AnalyzeStack(servicer, request, None)
assert analyzer_loop.install()
servicer = policy._PolicyAnalyzerServicer("spy", "0.0.1", policies, policy.EnforcementLevel.MANDATORY)
fast = policy._PolicyAnalyzerServicer.AnalyzeStack(servicer, request, None)
print(json.dumps({"sdk": seen[:2], "fast": seen[2:], "answers_equal": sdk == fast}))
"""


def test_stack_policies_see_the_resources_pulumi_policy_builds(dev_plan, tmp_path):
    """Every resource as each stack policy sees it (type, URN, name, properties, parent, dependencies,
    property dependencies, options, provider) is what pulumi_policy's own AnalyzeStack builds."""
    import json
    import subprocess
    import sys

    from automation.offline.pack.runner import _analyze_stack_request

    resources = [resource_dict(r) for r in sorted(dev_plan.resources, key=lambda r: r.urn)]
    for index, r in enumerate(resources):  # links to check: dependencies and property dependencies
        r["dependencies"] = [resources[index - 1]["urn"], "urn:pulumi:dev::p::t::not-in-stack"]
        r["propertyDependencies"] = {"spec": [resources[index - 2]["urn"]]}
    request = analyzer_pb2.AnalyzeStackRequest.FromString(
        _analyze_stack_request(resources, {r["urn"]: r for r in resources}, None))
    # Options and providers that differ between resources of one parent: each resource must get its own.
    for index, item in enumerate(request.resources):
        if index % 3 == 0:
            item.options.protect = True
        if index % 4 == 0:
            item.options.aliases.append(f"urn:pulumi:dev::p::t::old-{index}")
            item.options.ignoreChanges.append("spec")
        if index % 5 == 0:
            item.options.deleteBeforeReplaceDefined, item.options.deleteBeforeReplace = True, index % 10 == 0
            item.options.additionalSecretOutputs.append("data")
        if index % 6 == 0 and item.HasField("provider"):
            item.provider.properties.update({"context": f"ctx-{index}"})
    request_file = tmp_path / "request.bin"
    request_file.write_bytes(request.SerializeToString())
    done = subprocess.run([sys.executable, "-c", _SEEN_BY_STACK_POLICIES, str(request_file)], cwd=ROOT / "policies",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["answers_equal"]
    assert seen["fast"] == seen["sdk"] and len(seen["sdk"]) == 2
    assert len(seen["sdk"][0]) == len(resources)
    assert any(r[4] for r in seen["sdk"][0]) and any(r[10] for r in seen["sdk"][0]), "parents and providers are linked"
    assert {r[8] for r in seen["sdk"][0]} == {True, False} and {r[12] for r in seen["sdk"][0]} == {None, True, False}
    assert len({r[14] for r in seen["sdk"][0] if r[14]}) > 1, "providers with different properties"
    assert all(r[5] == [resources[i - 1]["urn"]] for i, r in enumerate(seen["sdk"][0]))


# --- the types Configure names: Analyze answers nothing for any other --------------------------------

CUSTOM = "kubernetes:serving.example.com/v1:InferenceGroup"
CUSTOM_CONFIG = {"customWorkloads": {CUSTOM: ["spec.groups[].template"]}}


def _custom_group() -> dict:
    """A workload of the custom kind whose GPU pod neither tolerates the taint nor pins its image."""
    spec = {"containers": [{"name": "m", "image": "vllm/vllm-openai:latest", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    return {"urn": f"urn:pulumi:dev::llm-platform::{CUSTOM}::group", "type": CUSTOM, "name": "group", "parent": "",
            "inputs": {"metadata": {"name": "group", "namespace": "serving"},
                       "spec": {"groups": [{"name": "a", "template": {"spec": spec}}]}}}


def _with_custom_workloads(config: dict) -> dict:
    return {**config, "gpu-workload-contract": CUSTOM_CONFIG, "container-image-pinned": CUSTOM_CONFIG}


def _every_resource_policy_disabled(fast: PolicyPackRunner) -> dict:
    return {"all": "mandatory", **{name: "disabled" for name, p in fast.info().policies.items() if p.kind == "resource"}}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_configure_names_every_type_analyze_can_report_on(packs, stack, request):
    """Under each config, pulumi_policy's own loop answers nothing at all (no finding, no
    not-applicable entry) for a resource of a type the fast pack's Configure did not name: what the
    check's feeder relies on to leave those resources out of Analyze."""
    plan = request.getfixturevalue(f"{stack}_plan")
    resources = [resource_dict(r) for r in sorted(plan.resources, key=lambda r: r.urn)] + [_custom_group()]
    fast, sdk = packs
    configs = _configs(stack) + [_with_custom_workloads(BASELINE), _every_resource_policy_disabled(fast)]
    left_out = reported = 0
    for config in configs:
        for runner in packs:
            runner.configure(config)
        assert sdk.analyzed_types is None, "pulumi_policy's own loops name no types: every resource is sent"
        named = fast.analyzed_types
        assert named is not None
        for resources_now in (resources, _broken(resources), _with_unknowns(resources)):
            answers = _answers(sdk, resources_now)[:-1]
            for r, answer in zip(resources_now, answers):
                if r["type"] in named:
                    reported += bool(answer)
                else:
                    left_out += 1
                    assert answer == b"", (str(config), r["urn"])
    assert left_out > 3 * len(resources) and reported > 20, "types were left out, and named ones had findings"


def test_custom_workload_kinds_are_named_once_configured(packs):
    fast, sdk = packs
    fast.configure(BASELINE)
    assert CUSTOM not in fast.analyzed_types and "kubernetes:apps/v1:Deployment" in fast.analyzed_types
    fast.configure(_with_custom_workloads(BASELINE))
    assert CUSTOM in fast.analyzed_types
    sdk.configure(_with_custom_workloads(BASELINE))
    findings = {v.policy_name for v in sdk.analyze(_custom_group())}
    assert findings == {"gpu-workload-contract", "container-image-pinned"}, "the named kind needed its Analyze"
    disabled = {"enforcementLevel": "disabled", **CUSTOM_CONFIG}
    fast.configure({**BASELINE, "gpu-workload-contract": disabled, "container-image-pinned": disabled})
    assert CUSTOM not in fast.analyzed_types, "disabled policies take no types"
    assert fast.configure(_every_resource_policy_disabled(fast)) and fast.analyzed_types == frozenset()
