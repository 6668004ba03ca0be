"""Cluster Autoscaler: installed whenever a managed group can grow, able to grow a group from zero."""

from __future__ import annotations

import json

import pytest

from components import contract, versions
from tests.conftest import gpu_node_groups, plan_with, read_stack_config, system_node_group

TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"


def autoscaler_release(plan):
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "cluster-autoscaler"]
    return release


def asg_name(plan, group) -> str:
    """The ASG name the node group component reported (pulumi-eks ``nodeGroup.resources``)."""
    return plan.outputs[group.parent]["autoscaling_group_name"]


def test_both_plans_install_the_pinned_chart(stack_plan):
    inputs = autoscaler_release(stack_plan).inputs
    assert (inputs["chart"], inputs["version"]) == (versions.CLUSTER_AUTOSCALER.chart, "9.59.0")
    assert inputs["repositoryOpts"]["repo"] == versions.CLUSTER_AUTOSCALER.repository
    assert inputs["namespace"] == "kube-system"


def test_values_discover_this_clusters_groups_in_its_region(stack_plan):
    values = autoscaler_release(stack_plan).inputs["values"]
    assert values["cloudProvider"] == "aws"
    assert values["awsRegion"] == "us-east-1"
    assert values["autoDiscovery"] == {"clusterName": f"llm-platform-{stack_plan.stack}"}
    minor = read_stack_config(stack_plan.stack)["llm-platform:kubernetesVersion"]
    image = versions.CLUSTER_AUTOSCALER_IMAGES[minor]
    assert values["image"] == {"repository": image.repository, "tag": image.chart_tag}
    assert image.tag.startswith(f"v{minor}.")


def test_gpu_scaling_flags(stack_plan):
    args = autoscaler_release(stack_plan).inputs["values"]["extraArgs"]
    assert args["expander"] == "least-waste"
    assert args["balance-similar-node-groups"] is False
    assert args["skip-nodes-with-local-storage"] is False  # vLLM's NVMe emptyDir must not pin GPU nodes
    assert args["scale-down-unneeded-time"] == "10m"
    assert args["leader-elect"] is True


@pytest.mark.parametrize(("stack", "replicas"), [("dev", 1), ("prod", 2)])
def test_runs_on_the_system_pool_with_two_replicas_in_prod(stack, replicas, dev_plan, prod_plan):
    values = autoscaler_release({"dev": dev_plan, "prod": prod_plan}[stack]).inputs["values"]
    assert values["replicaCount"] == replicas
    assert values["podDisruptionBudget"] == {"maxUnavailable": 1}
    assert values["nodeSelector"] == contract.system_node_selector()
    assert all(t.get("key") != contract.GPU_TAINT_KEY for t in values["tolerations"])


def test_pod_identity_for_the_charts_service_account_and_ordering(stack_plan):
    release = autoscaler_release(stack_plan)
    association = stack_plan.named("aws:eks/podIdentityAssociation:PodIdentityAssociation", "cluster-autoscaler-controller")
    assert association.inputs["serviceAccount"] == release.inputs["values"]["rbac"]["serviceAccount"]["name"]
    assert association.inputs["namespace"] == release.inputs["namespace"]
    assert association.urn in release.dependencies
    assert any(d.endswith("aws:eks/addon:Addon::llm-platform-cluster-pod-identity-agent") for d in release.dependencies)


def test_iam_scales_only_this_clusters_groups(stack_plan):
    policy = json.loads(stack_plan.named("aws:iam/rolePolicy:RolePolicy", "cluster-autoscaler-controller").inputs["policy"])
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    mutating = by_sid["ScaleOwnGroupsOnly"]
    groups = [system_node_group(stack_plan), *gpu_node_groups(stack_plan)]
    assert sorted(mutating["Resource"]) == sorted(
        f"arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/{asg_name(stack_plan, g)}"
        for g in groups
    )
    cluster = f"llm-platform-{stack_plan.stack}"
    assert mutating["Condition"] == {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned"}}
    assert by_sid["ReadOwnNodegroups"]["Action"] == ["eks:DescribeNodegroup"]
    assert by_sid["ReadOwnNodegroups"]["Resource"].endswith(f":nodegroup/{cluster}/*/*")
    assert not any(a.startswith(("autoscaling:Set", "autoscaling:Terminate")) for a in by_sid["DescribeScalingState"]["Action"])


def test_groups_at_zero_carry_node_template_tags_on_their_asg(stack_plan):
    tags = stack_plan.of_type("aws:autoscaling/tag:Tag")
    for group in gpu_node_groups(stack_plan):
        assert group.inputs["scalingConfig"]["minSize"] == 0
        mine = {t.inputs["tag"]["key"]: t.inputs for t in tags if t.parent == group.parent}
        assert {t["autoscalingGroupName"] for t in mine.values()} == {asg_name(stack_plan, group)}
        assert all(t["tag"]["propagateAtLaunch"] is False for t in mine.values())
        expected = {f"{TEMPLATE}label/{k}": v for k, v in group.inputs["labels"].items()}
        expected.update(
            {f"{TEMPLATE}taint/{t['key']}": f"{t['value']}:{contract.k8s_effect(t['effect'])}" for t in group.inputs["taints"]}
        )
        expected[f"{TEMPLATE}resources/nvidia.com/gpu"] = "1"
        assert {k: t["tag"]["value"] for k, t in mine.items()} == expected
        assert expected[f"{TEMPLATE}taint/nvidia.com/gpu"] == "true:NoSchedule"


def test_gpu_groups_carry_the_autoscaler_gpu_label_and_its_template_tag(stack_plan):
    """The AWS provider's GPU label makes the autoscaler wait for the device plugin on a new node
    instead of adding more nodes (cloudprovider/aws README, "Special note on GPU instances")."""
    tags = stack_plan.of_type("aws:autoscaling/tag:Tag")
    for group in gpu_node_groups(stack_plan):
        accelerator = group.inputs["labels"][contract.ACCELERATOR_LABEL]
        assert group.inputs["labels"][contract.AUTOSCALER_GPU_LABEL] == f"nvidia-{accelerator}"
        keys = {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in tags if t.parent == group.parent}
        assert keys[f"{TEMPLATE}label/{contract.AUTOSCALER_GPU_LABEL}"] == f"nvidia-{accelerator}"


def test_dra_groups_do_not_carry_the_autoscaler_gpu_label():
    """A DRA node never advertises nvidia.com/gpu: with the label the autoscaler would count it unready."""
    labels = contract.managed_gpu_pool_labels("dra", purpose=contract.GPU_DRA_PURPOSE, accelerator="a10g",
                                              gpu_memory_mib=22888, capacity_type="ON_DEMAND")
    assert contract.AUTOSCALER_GPU_LABEL not in labels
    inference = contract.managed_gpu_pool_labels("gpu", purpose=contract.GPU_INFERENCE_PURPOSE, accelerator="a10g",
                                                 gpu_memory_mib=22888, capacity_type="ON_DEMAND")
    assert inference[contract.AUTOSCALER_GPU_LABEL] == "nvidia-a10g"


def test_the_system_pool_never_sits_at_zero_so_gets_no_template_tags(stack_plan):
    system = system_node_group(stack_plan)
    assert not [t for t in stack_plan.of_type("aws:autoscaling/tag:Tag") if t.parent == system.parent]


def test_not_installed_when_no_managed_group_can_grow():
    config = read_stack_config("dev")
    system = {**config["llm-platform:systemPool"], "scaling": {"minSize": 2, "desiredSize": 2, "maxSize": 2}}
    serving = {**config["llm-platform:serving"], "enabled": False, "tiers": []}
    plan = plan_with("dev", systemPool=system, gpuPools=[], serving=serving)
    assert not plan.of_type("llm-platform:index:ClusterAutoscaler")
    assert not plan.of_type("aws:autoscaling/tag:Tag")
    # Prometheus still runs (the DCGM exporter is on), without the autoscaler's scrape and alerts.
    (rule,) = [r.inputs for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    assert "cluster-autoscaler" not in [g["name"] for g in rule["spec"]["groups"]]
    assert not [r for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
                if r.inputs["metadata"]["name"] == "cluster-autoscaler"]


def template_nodes(plan) -> dict[str, tuple[dict[str, str], list[dict[str, str]], int]]:
    """What Cluster Autoscaler builds for each ASG from its node-template tags alone (the group has
    no node to copy): labels, taints, GPU count."""
    from collections import defaultdict

    by_asg: dict[str, dict[str, str]] = defaultdict(dict)
    for tag in plan.of_type("aws:autoscaling/tag:Tag"):
        by_asg[tag.inputs["autoscalingGroupName"]][tag.inputs["tag"]["key"]] = tag.inputs["tag"]["value"]
    nodes = {}
    for asg, tags in by_asg.items():
        labels = {k[len(f"{TEMPLATE}label/"):]: v for k, v in tags.items() if k.startswith(f"{TEMPLATE}label/")}
        taints = []
        for key, value in tags.items():
            if key.startswith(f"{TEMPLATE}taint/"):
                taint_value, effect = value.rsplit(":", 1)
                taints.append({"key": key[len(f"{TEMPLATE}taint/"):], "value": taint_value, "effect": effect})
        nodes[asg] = (labels, taints, int(tags.get(f"{TEMPLATE}resources/nvidia.com/gpu", "0")))
    return nodes


def test_every_model_on_a_managed_pool_fits_exactly_its_groups_template(stack_plan):
    """Scale-up from zero, simulated: a pending model pod fits the node Cluster Autoscaler would
    build from its pool's ASG tags, and no other group's, so the right group grows."""
    from tests.support.helm_render import schedulable_on

    templates = template_nodes(stack_plan)
    groups = {g.name: asg_name(stack_plan, g) for g in gpu_node_groups(stack_plan)}
    checked = 0
    for deployment in stack_plan.of_type("kubernetes:apps/v1:Deployment"):
        spec = deployment.inputs["spec"]["template"]["spec"]
        pool = (spec.get("nodeSelector") or {}).get(contract.POOL_LABEL)
        if pool not in groups:
            continue  # system pool (never at zero) or Karpenter capacity
        gpus = sum(int(c.get("resources", {}).get("limits", {}).get(contract.GPU_RESOURCE, 0)) for c in spec["containers"])
        fits = {
            asg for asg, (labels, taints, capacity) in templates.items()
            if schedulable_on(spec, labels, taints) and gpus <= capacity
        }
        assert fits == {groups[pool]}, (deployment.name, fits)
        checked += 1
    assert checked >= 1


# --- Prometheus scrapes the autoscaler ------------------------------------------------------------

SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"


def autoscaler_monitor(plan) -> dict:
    (monitor,) = [r for r in plan.of_type(SERVICE_MONITOR) if r.inputs["metadata"]["name"] == "cluster-autoscaler"]
    return monitor


def rendered_autoscaler(plan) -> list[dict]:
    """The autoscaler's objects as Helm's engine renders the pinned chart with the plan's values."""
    from tests.components.test_helm_render import rendered

    return rendered(plan, versions.CLUSTER_AUTOSCALER)


def test_the_rendered_autoscaler_emits_per_group_metrics(stack_plan):
    """The chart passes ``extraArgs`` as ``--key=value``: the flag that registers the backoff gauge."""
    (deployment,) = [o for o in rendered_autoscaler(stack_plan) if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--emit-per-nodegroup-metrics=true" in container["command"]


def test_the_service_monitor_selects_the_service_the_chart_renders(stack_plan):
    """Selector labels, namespace and port name of the ServiceMonitor against the Service Helm's engine
    renders (and that Service against the autoscaler's pods and their metrics port)."""
    objects = rendered_autoscaler(stack_plan)
    (service,) = [o for o in objects if o["kind"] == "Service"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    spec = autoscaler_monitor(stack_plan).inputs["spec"]
    assert service["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = spec["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert port["targetPort"] in [p["containerPort"] for p in container["ports"]]
    assert (port["targetPort"], endpoint["path"]) == (8085, "/metrics")
    # The scrape target's ``service`` label, which the metrics-missing alert matches.
    (missing_rule,) = [r for g in stack_plan_rule_groups(stack_plan) for r in g["rules"]
                       if r.get("alert") == "ClusterAutoscalerMetricsMissing"]
    assert f'service="{service["metadata"]["name"]}"' in missing_rule["expr"]
    assert service["metadata"]["name"] == deployment["metadata"]["name"] == "cluster-autoscaler-aws-cluster-autoscaler"


def stack_plan_rule_groups(plan) -> list[dict]:
    (rule,) = [r.inputs for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    return rule["spec"]["groups"]


def test_the_service_monitor_fits_the_prometheus_operator_crd(stack_plan):
    """Against the ServiceMonitor CRD kube-prometheus-stack ships (strict: a misspelt field is an error)."""
    from tests.support import helm_render
    from tests.support.needs import missing

    reason = helm_render.missing_reason(versions.KUBE_PROMETHEUS_STACK)
    if reason:
        missing(reason)
    schemas = helm_render.chart_crd_schemas(versions.KUBE_PROMETHEUS_STACK)
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", **autoscaler_monitor(stack_plan).inputs}
    assert helm_render.custom_resource_errors(monitor, schemas) == []
    (endpoint,) = monitor["spec"]["endpoints"]
    misspelt = {**monitor, "spec": {**monitor["spec"], "endpoints": [{**endpoint, "portName": endpoint["port"]}]}}
    assert any("portName" in e for e in helm_render.custom_resource_errors(misspelt, schemas))


def test_prometheus_owns_the_service_monitor_and_the_autoscaler_does_not_wait_for_it(stack_plan):
    """The ServiceMonitor needs the CRD kube-prometheus-stack installs; the autoscaler must grow groups
    whether or not Prometheus is up."""
    monitor = autoscaler_monitor(stack_plan)
    (prometheus,) = [r for r in stack_plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kube-prometheus-stack"]
    assert prometheus.urn in monitor.dependencies
    assert monitor.parent.endswith("llm-platform:index:Observability::observability")
    autoscaler = autoscaler_release(stack_plan)
    assert prometheus.urn not in autoscaler.dependencies
    assert not any("Observability" in d for d in autoscaler.dependencies)
    groups = [g["name"] for g in stack_plan_rule_groups(stack_plan)]
    assert "cluster-autoscaler" in groups
