"""Models larger than one node (docs/multi-node.md): Llama 3.1 405B FP8 over two p5.48xlarge nodes in prod
copies (tests/fixtures/multi_node_copies.py), served by one LeaderWorkerSet group per replica.

The program's objects are judged by the components that decide them where they run here: the emitted
LeaderWorkerSet against the CRD schema in the pinned ``lws`` chart's ``crds/``, the chart itself rendered by
Helm's engine with the program's values. LeaderWorkerSet's own rules (start-up order, scale subresource in
groups, group restart) are modelled in policies/capacity and tested in tests/policies/capacity."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from automation import exit_codes
from automation.cli import main
from components import contract, versions
from components.capacity_check import parse_settings
from components.serving.group_controller import lws_values
from components.settings import SettingsError
from tests.conftest import plan_with
from tests.fixtures import multi_node_copies as copies
from tests.support import helm_render
from tests.support.needs import missing

MODEL = copies.MODEL_NAME


def problems(config) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("copy", [copies.managed_group_copy, copies.karpenter_copy])
def test_405b_on_two_p5_nodes_is_valid(copy):
    settings = parse_settings(copy())
    (model,) = [m for t in settings.serving.tiers for m in t.models if m.name == MODEL]
    assert (model.nodes_per_replica, model.gpus_per_replica, model.multi_node) == (2, 8, True)


@pytest.mark.parametrize("copy, pool, allows", [
    (copies.managed_group_copy, "managed node group 'h100-multinode'", "allows max 1"),
    (copies.karpenter_copy, "Karpenter NodePool 'gpu-multinode'", "allows limit 8"),
])
def test_a_pool_with_room_for_half_a_group_is_refused_naming_the_model_and_the_pool(copy, pool, allows):
    found = problems(copy(nodes=1))
    group = [p for p in found if f"models[{MODEL}].nodesPerReplica" in p]
    assert len(group) == 1, found
    assert pool in group[0] and allows in group[0] and "one group of 2 pods" in group[0]


def test_a_multi_node_model_on_a_pool_without_efa_is_refused_with_the_reason():
    config = copies.managed_group_copy()
    tiers = config["llm-platform:serving"]["tiers"]
    batch = next(t for t in tiers if t["name"] == "batch")
    model = next(m for m in batch["models"] if m["name"] == MODEL)
    model.update({"pool": "inference-l40s", "gpusPerReplica": 1, "catalog": "qwen2.5-7b-instruct",
                  "cpu": "3", "memory": "24Gi", "weights": "download"})
    del model["streaming"]
    found = [p for p in problems(config) if f"models[{MODEL}].nodesPerReplica" in p]
    assert len(found) == 1
    assert "pool 'inference-l40s' has no EFA-capable instance type with 1 GPUs (it offers g6e.xlarge, g6e.2xlarge)" \
        in found[0]


@pytest.fixture(scope="module")
def plan():
    config = copies.managed_group_copy()
    overrides = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")}
    return plan_with("prod", **overrides)


def group_of(plan) -> dict:
    (found,) = [r for r in plan.of_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")]
    return found.inputs


def test_one_group_of_two_pods_started_leader_created_and_restarted_as_a_unit(plan):
    spec = group_of(plan)["spec"]
    group = spec["leaderWorkerTemplate"]
    assert group["size"] == 2
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"
    # LeaderReady would wait for a leader that is ready only once its workers have joined.
    assert spec["startupPolicy"] == "LeaderCreated"
    # LeaderWorkerSet's own default (maxSurge 0, maxUnavailable 1): a surge would need a second group of nodes.
    assert spec["rolloutStrategy"] == {"type": "RollingUpdate",
                                       "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}}
    assert "replicas" not in spec  # KEDA owns it through the scale subresource


def test_leader_serves_the_api_with_one_pipeline_stage_per_node_and_workers_join(plan):
    group = group_of(plan)["spec"]["leaderWorkerTemplate"]
    (leader,) = group["leaderTemplate"]["spec"]["containers"]
    (worker,) = group["workerTemplate"]["spec"]["containers"]
    assert leader["command"][:2] == ["/bin/sh", "-c"] and leader["command"][3:5] == ["multi-node", "leader"]
    args = leader["command"][5:]
    assert args[0] == "s3://llm-platform-models-prod/meta-llama/Llama-3.1-405B-Instruct-FP8/"
    assert args[args.index("--tensor-parallel-size") + 1] == "8"
    assert args[args.index("--pipeline-parallel-size") + 1] == "2"
    assert args[args.index("--distributed-executor-backend") + 1] == "ray"
    assert leader["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert worker["command"][3:] == ["multi-node", "worker"]
    assert not {"ports", "readinessProbe", "startupProbe", "livenessProbe"} & set(worker)


def test_every_pod_of_the_group_follows_the_contract_and_takes_every_efa_interface(plan):
    group = group_of(plan)["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = group[role]["spec"]
        (container,) = pod["containers"]
        assert pod["nodeSelector"] == {contract.POOL_LABEL: "h100-multinode"}
        assert {"key": contract.GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert container["resources"]["limits"][contract.GPU_RESOURCE] == "8"
        # p5.48xlarge carries 32 EFA interfaces (Karpenter's instance-type table)
        assert container["resources"]["limits"][contract.EFA_RESOURCE] == "32"
        assert container["resources"]["requests"][contract.EFA_RESOURCE] == "32"
        assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_keda_scales_the_leaderworkerset_and_the_service_selects_leaders(plan):
    scalers = [r.inputs for r in plan.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
               if r.inputs["metadata"]["name"] == MODEL]
    assert [s["spec"]["scaleTargetRef"] for s in scalers] == [
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": MODEL}]
    assert [t["name"] for t in scalers[0]["spec"]["triggers"]] == [
        "gateway-demand", "waiting-requests", "kv-cache-usage", "ttft-p95"]
    services = [r.inputs for r in plan.of_type("kubernetes:core/v1:Service") if r.inputs["metadata"]["name"] == MODEL]
    assert services[0]["spec"]["selector"] == {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": MODEL,
                                               "leaderworkerset.sigs.k8s.io/worker-index": "0"}


def test_the_controller_release_skips_crds_which_the_program_applies_from_the_pinned_tag(plan):
    (release,) = [r.inputs for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == versions.LWS.ref]
    assert (release["version"], release["skipCrds"]) == ("v0.10.0", True)
    (crds,) = plan.of_type("kubernetes:yaml/v2:ConfigGroup")
    assert crds.inputs["files"] == [
        "https://raw.githubusercontent.com/kubernetes-sigs/lws/v0.10.0/charts/lws/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        "https://raw.githubusercontent.com/kubernetes-sigs/lws/v0.10.0/charts/lws/crds/disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
        "https://raw.githubusercontent.com/kubernetes-sigs/lws/v0.10.0/charts/lws/crds/disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml",
    ]


def test_the_emitted_leaderworkerset_fits_the_crd_of_the_pinned_chart(plan):
    reason = helm_render.missing_reason(versions.LWS)
    if reason:
        missing(reason)
    inputs = group_of(plan)
    obj = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", **inputs}
    assert helm_render.custom_resource_errors(obj, helm_render.chart_crd_schemas(versions.LWS)) == []
    broken = {**obj, "spec": {**obj["spec"], "startupPolicy": "LeaderFirst"}}
    assert helm_render.custom_resource_errors(broken, helm_render.chart_crd_schemas(versions.LWS))


def test_the_lws_chart_renders_with_the_program_values_on_the_system_pool():
    reason = helm_render.missing_reason(versions.LWS)
    if reason:
        missing(reason)
    objects = helm_render.render(versions.LWS, lws_values(), release_name="lws", namespace="lws-system",
                                 kube_version="1.35")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == contract.system_node_selector()
    assert deployment["spec"]["replicas"] == 2
    assert pod["containers"][0]["image"] == "registry.k8s.io/lws/lws:v0.10.0"
    assert not [o for o in objects if o["kind"] == "CustomResourceDefinition"]  # crds/ are not templates
    for obj in objects:
        kubernetes_validate.validate(obj, "1.35", strict=True)


# --- EFA on the pool that hosts the group (components/specs/efa.py, components/gpu/efa.py) ------------------


def test_the_managed_group_launches_every_efa_interface_in_a_cluster_placement_group_in_one_zone(plan):
    (template,) = [r.inputs for r in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate") if r.name == "h100-multinode-lt"]
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == 32  # p5.48xlarge: 32 network cards, one EFA interface each
    assert [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in interfaces[:3]] == [
        (0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa")]
    assert template["placement"] == {"groupName": "llm-platform-prod-h100-multinode"}
    (placement,) = [r.inputs for r in plan.of_type("aws:ec2/placementGroup:PlacementGroup")]
    assert (placement["name"], placement["strategy"]) == ("llm-platform-prod-h100-multinode", "cluster")
    (group,) = [r.inputs for r in plan.of_type("eks:index:ManagedNodeGroup") if r.name == "h100-multinode"]
    assert len(group["subnetIds"]) == 1
    # the other GPU groups keep the launch template without interfaces (EKS attaches the default ENI)
    others = [r.inputs for r in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate") if r.name == "inference-a10g-lt"]
    assert "networkInterfaces" not in others[0] and "placement" not in others[0]


def test_cluster_autoscaler_sees_the_efa_interfaces_of_a_group_at_zero(plan):
    """Cluster Autoscaler builds a node of a group at 0 from its ASG's template tags: without the EFA count
    there, a pod requesting vpc.amazonaws.com/efa fits no template and the group never grows."""
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in plan.of_type("aws:autoscaling/tag:Tag")
            if r.name.startswith("h100-multinode-ca-")}
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"


def test_the_nodes_security_group_lets_efa_traffic_out_to_itself_and_the_plugin_tolerates_gpu_taints(plan):
    (rule,) = [r.inputs for r in plan.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")]
    assert rule["ipProtocol"] == "-1" and rule["referencedSecurityGroupId"] == rule["securityGroupId"]
    (release,) = [r.inputs for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["chart"] == "aws-efa-k8s-device-plugin"]
    assert (release["version"], release["namespace"]) == ("v0.5.30", "kube-system")
    assert release["values"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_stacks_without_a_multi_node_model_get_none_of_it(prod_plan):
    assert not prod_plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert not prod_plan.of_type("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    assert not [r for r in prod_plan.of_type("kubernetes:helm.sh/v3:Release")
                if r.inputs["chart"] in ("aws-efa-k8s-device-plugin", versions.LWS.ref)]


# --- the offline check: the program under mocks and the real policy pack over gRPC -----------------------


def run_check(capsys, tmp_path, config) -> tuple[int, str]:
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    capsys.readouterr()
    code = main(["check", "--stack", "prod", "--stack-file", str(stack_file), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_offline_check_passes_the_405b_copy_and_refuses_half_a_group(capsys, tmp_path):
    code, output = run_check(capsys, tmp_path, copies.karpenter_copy())
    assert code == exit_codes.OK, output
    # The one group restarts in a rollout (the gateway serves from the fallbacks meanwhile): advice only.
    assert "Policy violations: 1 advisory" in output and "mandatory" not in output
    assert "at its 1 min group(s) the LeaderWorkerSet controller restarts 1 group(s)" in output
    code, output = run_check(capsys, tmp_path, copies.managed_group_copy(nodes=2))
    assert code == exit_codes.OK, output  # exactly one group of two p5.48xlarge: no room for a surge group
    assert "mandatory" not in output
    code, output = run_check(capsys, tmp_path, copies.karpenter_copy(nodes=1))
    assert code == exit_codes.USAGE == 2 and "Traceback" not in output
    assert f"llm-platform:serving.tiers[batch].models[{MODEL}].nodesPerReplica: got 2:" in output
    assert "Karpenter NodePool 'gpu-multinode' allows limit 8" in output


def test_a_prefix_routed_multi_node_model_offers_its_picker_the_leaders_only():
    """The picker sends each request to a pod of its InferencePool; a worker carries the model's labels but
    serves no API. Selected by the model's labels alone (the single-node pool selector), half the pods the
    picker may choose would fail every request."""
    config = copies.karpenter_copy()
    tiers = config["llm-platform:serving"]["tiers"]
    next(t for t in tiers if t["name"] == "batch")["routing"] = contract.PREFIX_AWARE_ROUTING
    overrides = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")}
    routed = plan_with("prod", **overrides)
    (release,) = [r.inputs for r in routed.of_type("kubernetes:helm.sh/v4:Chart") if r.inputs.get("name") == MODEL]
    assert release["values"]["router"]["modelServers"]["matchLabels"] == {
        "app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": MODEL,
        "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    (qwen,) = [r.inputs for r in routed.of_type("kubernetes:helm.sh/v4:Chart") if r.inputs.get("name") == "qwen2-5-32b-instruct"]
    assert qwen["values"]["router"]["modelServers"]["matchLabels"] == {
        "app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "qwen2-5-32b-instruct"}
