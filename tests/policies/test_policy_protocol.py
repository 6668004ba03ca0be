"""The pack over the CLI's protocol: metadata, config handling, marshalling, the project's own plans."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from automation.offline.pack.runner import (
    PackReport,
    PolicyConfigError,
    PolicyPackError,
    PolicyPackRunner,
    Violation,
    engine_value,
    run_pack,
)
from components.contract import policy_contract
from tests.policies.builders import (
    DELETE,
    SIG,
    UNKNOWN,
    eks_cluster,
    gpu_node_group,
    patch,
    reference,
    resource_quota,
    secret,
    workload,
)
from tests.policies.conftest import engine_config, one, stack_yaml_config

CONFIG_DIR = Path(__file__).resolve().parents[2] / "policies" / "config"
STACKS = ("dev", "prod")


#: Parameters whose value the stack's configuration gives when the policy config does not.
STACK_SOURCED = {("gpu-capacity-cap", "maxGpus"): "llm-platform:gpuBudget.maxGpus",
                 ("gpu-monthly-budget", "monthlyBudgetUsd"): "llm-platform:gpuBudget.monthlyBudgetUsd"}


def _config(stack: str) -> dict:
    return json.loads((CONFIG_DIR / f"{stack}.json").read_text())


def test_pack_metadata(pack):
    info = pack.runner.info()
    assert info.name == "llm-platform-gpu"
    assert len(info.policies) >= 20
    for policy in info.policies.values():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", policy.name), policy.name
        assert policy.description.endswith(".") and policy.description.count(". ") == 0, policy.description
        assert policy.kind in ("resource", "stack")
        for prop, schema in policy.config_schema.items():
            assert schema.get("description"), f"{policy.name}.{prop}"
            if (policy.name, prop) in STACK_SOURCED:
                # No advertised default: the engine would send it as if configured, hiding the stack's value.
                assert "default" not in schema and STACK_SOURCED[(policy.name, prop)] in schema["description"]
            else:
                assert "default" in schema, f"{policy.name}.{prop}"


@pytest.mark.parametrize("stack", STACKS)
def test_stack_config_is_accepted(pack, stack):
    effective = pack.configure(CONFIG_DIR / f"{stack}.json")
    assert set(pack.runner.info().policies) <= set(effective)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_config_carries_the_program_contract(pack, stack):
    """Every contract value a policy declares is in the config file and equals the program's."""
    contract = policy_contract()
    config = _config(stack)
    for policy in pack.runner.info().policies.values():
        for key in set(policy.config_schema) & set(contract):
            assert policy.config_schema[key]["default"] == contract[key], f"pack default {policy.name}.{key}"
            assert config.get(policy.name, {}).get(key) == contract[key], f"{stack}.json {policy.name}.{key}"


def test_prod_config_is_stricter_than_dev(pack):
    levels = {}
    for stack in STACKS:
        effective = pack.configure(CONFIG_DIR / f"{stack}.json")
        levels[stack] = {name: c["enforcementLevel"] for name, c in effective.items()}
    assert levels["dev"]["eks-private-endpoint"] == "advisory"
    assert levels["prod"]["eks-private-endpoint"] == "mandatory"
    # capacity-overcommit reports shared pools that cannot all peak at once, workload-kinds-known what the
    # pack cannot judge: advice by design, never refused
    advice = ("capacity-overcommit", "workload-kinds-known")
    assert all(levels["prod"][name] == "advisory" for name in advice)
    assert all(level == "mandatory" for name, level in levels["prod"].items() if name not in ("all", *advice))


@pytest.mark.parametrize(
    "config, error",
    [
        ({"gpu-capacity-cap": {"maxGpus": "lots"}}, "gpu-capacity-cap: maxGpus: 'lots' is not of type 'integer'"),
        ({"gpu-capacity-cap": {"maxGpus": -1}}, "gpu-capacity-cap: maxGpus: -1 is less than the minimum of 0"),
        ({"all": "strict"}, "all: 'strict' is not a valid enforcement level"),
        ({"gpu-pools-tainted": {"enforcementLevel": "block"}}, "enforcementLevel 'block' is not one of"),
        ({"gpu-pools-tainted": 3}, "must be a string or object"),
        ({"gpu-pool-tainted": "mandatory"}, "gpu-pool-tainted: no such policy"),
        ({"gpu-capacity-cap": {"maxGPUs": 8}}, "gpu-capacity-cap: unknown property maxGPUs"),
    ],
)
def test_bad_config_fails_clearly(pack, config, error):
    with pytest.raises(PolicyConfigError, match=re.escape(error)):
        pack.configure(config)


def test_config_levels_apply(pack):
    bad = patch(gpu_node_group(), {"taints": [], "labels": {}})
    pack.configure({"all": "advisory", "gpu-pools-tainted": "mandatory"})
    assert [v.enforcement_level for v in pack.analyze(bad, "gpu-pools-tainted")] == ["mandatory"]
    assert {v.enforcement_level for v in pack.analyze(bad) if v.policy_name != "gpu-pools-tainted"} == {"advisory"}
    pack.configure({"gpu-pools-tainted": "disabled"})
    assert pack.analyze(bad, "gpu-pools-tainted") == []


def test_config_properties_reach_the_policy(pack):
    cluster = eks_cluster(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"])
    one(pack.messages(cluster, "eks-private-endpoint"), "does not allow")
    pack.configure({"eks-private-endpoint": {"allowPublicAccess": True}})
    assert pack.messages(cluster, "eks-private-endpoint") == []


def test_secrets_are_unwrapped(pack):
    """A secret-wrapped value is judged by its plaintext, both compliant and not."""
    assert pack.analyze(patch(eks_cluster(), {"encryptionConfigKeyArn": secret("arn:aws:kms:x")})) == []
    bad = patch(gpu_node_group(), {"taints": secret([{"key": "other", "value": "x", "effect": "NO_SCHEDULE"}])})
    one(pack.messages(bad, "gpu-pools-tainted"), "has no taint with key 'nvidia.com/gpu'")


def test_resource_references_are_downgraded_like_the_engine():
    cluster = eks_cluster()
    assert engine_value({"cluster": reference(cluster)}) == {"cluster": cluster["urn"]}
    assert engine_value({"cluster": reference(cluster, "c-123")}) == {"cluster": "c-123"}
    assert engine_value({"cluster": reference(cluster, "")}) == {"cluster": UNKNOWN}
    assert engine_value({"__defaults": [], "a": {"__x": 1, "b": 2}}) == {"a": {"b": 2}}


def test_output_values_are_marshalled_like_the_engine():
    output = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
    assert engine_value({"a": {SIG: output, "value": "x", "dependencies": ["urn:x"]}}) == {"a": "x"}
    assert engine_value({"a": {SIG: output, "value": "x", "secret": True}}) == {"a": secret("x")}
    assert engine_value({"a": {SIG: output, "dependencies": []}}) == {"a": UNKNOWN}


def test_reference_inputs_do_not_break_policies(pack):
    group = patch(gpu_node_group(), {"cluster": reference(eks_cluster()), "nodeRoleArn": reference(eks_cluster(), "r")})
    assert pack.analyze(group) == []


def test_unknown_everywhere_is_never_a_finding(pack):
    """A resource whose every input is unknown yields nothing, not even "can't run policy" notes."""
    for res in (gpu_node_group(), workload(), eks_cluster()):
        blank = {**res, "inputs": {k: UNKNOWN for k in res["inputs"]}}
        assert pack.analyze(blank) == []
    stack = [{**gpu_node_group(), "inputs": UNKNOWN_INPUTS}, workload(), resource_quota()]
    assert pack.analyze_stack(stack) == []


UNKNOWN_INPUTS = {"amiType": UNKNOWN, "instanceTypes": UNKNOWN, "labels": UNKNOWN, "taints": UNKNOWN}


def test_run_pack_reports_by_level():
    resources = [patch(gpu_node_group(), {"taints": DELETE}), eks_cluster(endpointPrivateAccess=False)]
    report = run_pack(resources, CONFIG_DIR / "dev.json")
    assert isinstance(report, PackReport) and report.pack.startswith("llm-platform-gpu@")
    assert report.has_mandatory
    assert {v.policy_name for v in report.mandatory} >= {"gpu-pools-tainted"}
    assert {v.policy_name for v in report.advisory} == {"eks-private-endpoint"}
    assert all(isinstance(v, Violation) and v.urn for v in report.violations)
    assert json.loads(json.dumps(report.to_json()))["hasMandatory"] is True


def test_runner_stops_its_process():
    with PolicyPackRunner() as runner:
        pid = runner.pid
        assert runner.info().name == "llm-platform-gpu"
    assert runner.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_runner_reports_a_pack_that_cannot_start(tmp_path):
    (tmp_path / "__main__.py").write_text("raise SystemExit('broken pack')\n")
    with pytest.raises(PolicyPackError, match="broken pack"):
        PolicyPackRunner(tmp_path).start()


def test_project_plans_pass_their_stack_config(stack_plan):
    """The program's own dev and prod plans are clean under their stack config (the pack config, and
    the stack's own configuration in PULUMI_CONFIG as the engine hands it), and the pack really
    judged them (an untainted GPU group is caught)."""
    env = {"LLM_PLATFORM_POLICY_STRICT": "1", "PULUMI_CONFIG": engine_config(stack_yaml_config(stack_plan.stack))}
    with PolicyPackRunner(env=env) as runner:
        runner.configure(CONFIG_DIR / f"{stack_plan.stack}.json")
        assert runner.analyze_plan(stack_plan.resources) == []
        group = next(r for r in stack_plan.of_type("eks:index:ManagedNodeGroup") if r.inputs.get("taints"))
        untainted = {**group.__dict__, "inputs": {**group.inputs, "taints": []}}
        one([v.message for v in runner.analyze(untainted) if v.policy_name == "gpu-pools-tainted"], group.name)


def test_prod_requires_digests_except_the_documented_unverified_images():
    """prod requires digests; its only exemptions are the program's images whose digest could not be
    verified (tag-only in components/versions.py). Dropping the exemptions leaves exactly those images.
    Judged on the prod copy that also serves a multi-node model (tests/fixtures/multi_node_copies.py),
    whose LeaderWorkerSet controller and EFA device plugin prod installs only then."""
    from components import versions
    from tests.conftest import plan_with
    from tests.fixtures.multi_node_copies import karpenter_copy

    prod_plan = plan_with("prod", **{k.split(":", 1)[1]: v for k, v in karpenter_copy().items()
                                     if k.startswith("llm-platform:")})

    config = json.loads((CONFIG_DIR / "prod.json").read_text())
    images = config["container-image-pinned"]
    assert images["requireDigest"] is True
    unverified = {str(i) for i in vars(versions).values() if isinstance(i, versions.Image) and not i.digest}
    assert set(images["digestExemptImages"]) <= unverified, "an exemption outlived its image's missing digest"

    env = {"LLM_PLATFORM_POLICY_STRICT": "1", "PULUMI_CONFIG": engine_config(karpenter_copy())}
    with PolicyPackRunner(env=env) as runner:
        runner.configure({**config, "container-image-pinned": {**images, "digestExemptImages": []}})
        # Advice (the lone 405B group restarting in a rollout) is not what this test is about.
        findings = [v for v in runner.analyze_plan(prod_plan.resources) if v.enforcement_level == "mandatory"]
    assert findings and all(v.policy_name == "container-image-pinned" for v in findings), findings
    named = {image for v in findings for image in images["digestExemptImages"] if f"'{image}'" in v.message}
    # Cilium runs on hybrid nodes only, which this copy has none of.
    hybrid_only = {str(versions.CILIUM_IMAGE), str(versions.CILIUM_OPERATOR_IMAGE)}
    assert named == set(images["digestExemptImages"]) - hybrid_only


def test_stack_answers_follow_content_when_the_urns_stay_the_same(pack):
    """Pools and pod templates are found once per AnalyzeStack call and shared by the stack
    policies (by content: pulumi_policy builds every policy's resources anew); consecutive calls
    with the same URNs but other properties are judged on their own properties."""
    def stack(max_size, gpus):
        return [patch(gpu_node_group(), {"scalingConfig.maxSize": max_size}), workload(gpus=gpus, namespace="team-a")]

    for _ in range(2):
        assert pack.stack_messages(stack(16, None), "gpu-capacity-cap") == []
        one(pack.stack_messages(stack(17, None), "gpu-capacity-cap"), "Worst-case GPU count is 17")
        assert pack.stack_messages(stack(16, None), "gpu-namespace-quota") == []
        one(pack.stack_messages(stack(16, 1), "gpu-namespace-quota"), "Namespace 'team-a' runs GPU workloads")
