"""gpu-agents-reach-gpu-nodes: agent charts' (nested) tolerations against the stack's GPU pools."""

from __future__ import annotations

import json

import pytest

from components import contract, versions
from components.gpu import dra_driver
from components.specs import gpu_software as software
from tests.policies.builders import (
    GPU_TOLERATION,
    NODE_GROUP_SHAPES,
    UNKNOWN,
    gpu_node_group,
    helm_chart_v4,
    helm_release,
    nodepool,
    patch,
    system_node_group,
    workload,
)
from tests.policies.conftest import ROOT, one

POLICY = "gpu-agents-reach-gpu-nodes"
PRESENT_EQUAL = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def stack(*extra, pool=None):
    return [pool or gpu_node_group(), system_node_group(), *extra]


def gpu_operator(values=None):
    return helm_release("gpu-operator", "v25.10.0", values or {"driver": {"enabled": False}}, "https://helm.ngc.nvidia.com/nvidia")


def dcgm(values=None, version="4.8.2"):
    return helm_release("dcgm-exporter", version, values or {}, "https://nvidia.github.io/dcgm-exporter/helm-charts")


@pytest.mark.parametrize(
    "release",
    [
        helm_release(),
        helm_release(values={"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"}}),
        helm_release(values={"gfd": {"enabled": True}, "nfd": {"worker": {"tolerations": [GPU_TOLERATION]}}}),
        gpu_operator(),
        gpu_operator({"nfd": {"enabled": False}, "node-feature-discovery": {"worker": {"tolerations": [PRESENT_EQUAL]}}}),
        dcgm({"tolerations": [GPU_TOLERATION]}),
        helm_release("node-feature-discovery", "0.18.1", {"worker": {"tolerations": [{"operator": "Exists"}]}}),
    ],
    ids=["device-plugin", "chart-default-tolerations", "nfd-override", "gpu-operator", "nfd-disabled", "dcgm", "nfd"],
)
@pytest.mark.parametrize("shape", NODE_GROUP_SHAPES)
def test_agents_that_reach_gpu_nodes(pack, release, shape):
    assert pack.stack_messages(stack(release, pool=gpu_node_group(shape)), POLICY) == []


@pytest.mark.parametrize(
    "release, fragments",
    [
        (helm_release(values={"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]}),
         ["the device plugin does not tolerate taint nvidia.com/gpu=true:NoSchedule", "values.tolerations:"]),
        (helm_release(values={"tolerations": [PRESENT_EQUAL]}),
         ["the device plugin", "nvidia.com/gpu Equal=present:NoSchedule", "must carry the taint value exactly"]),
        (helm_release(values={"gfd": {"enabled": True}}),
         ["the node-feature-discovery worker", "values.nfd.worker.tolerations (chart default)"]),
        (gpu_operator({"daemonsets": {"tolerations": []}}), ["the operands", "values.daemonsets.tolerations: none"]),
        (gpu_operator({"node-feature-discovery": {"worker": {"tolerations": [PRESENT_EQUAL]}}}),
         ["node-feature-discovery worker", "values.node-feature-discovery.worker.tolerations"]),
        (dcgm(), ["chart dcgm-exporter", "the exporter",
                  "values.tolerations (dcgm-exporter 4.8.2 default): [node-role.kubernetes.io/control-plane Exists:NoSchedule]"]),
        (dcgm(version="4.4.1"), ["the exporter", "(dcgm-exporter 4.8.2 default; 4.4.1 is not in the charts table)"]),
        (helm_release("node-feature-discovery", "0.18.1", {}), ["the worker", "values.worker.tolerations (chart default)"]),
        (helm_chart_v4("oci://ghcr.io/nvidia/dcgm-exporter", "4.4.1"), ["Chart 'chart' (chart dcgm-exporter)"]),
    ],
    ids=["device-plugin-override", "equal-present", "device-plugin-nfd", "operands", "operator-nfd", "dcgm",
         "dcgm-unpinned-version", "nfd", "v4-chart"],
)
def test_agents_that_miss_gpu_nodes(pack, release, fragments):
    one(pack.stack_messages(stack(release), POLICY), *fragments, "of managed node group 'inference'")


def test_extra_pool_taints_must_be_tolerated_too(pack):
    team = {"key": "team", "value": "ml", "effect": "NO_SCHEDULE"}
    pool = patch(gpu_node_group(), {"taints": [*gpu_node_group()["inputs"]["taints"], team]})
    one(pack.stack_messages(stack(helm_release(), pool=pool), POLICY), "does not tolerate taint team=ml:NoSchedule")


def test_karpenter_pools_count(pack):
    one(pack.stack_messages([nodepool(), dcgm()], POLICY), "of Karpenter NodePool 'gpu-inference'")


def test_bottlerocket_pools_bring_their_own_device_plugin(pack):
    pool = patch(gpu_node_group(), {"amiType": "BOTTLEROCKET_x86_64_NVIDIA"})
    override = helm_release(values={"tolerations": []})
    assert pack.stack_messages(stack(override, pool=pool), POLICY) == []


def test_without_pools_agents_must_tolerate_the_contract_key(pack):
    one(pack.stack_messages([dcgm()], POLICY), "does not tolerate the GPU taint 'nvidia.com/gpu'")
    assert pack.stack_messages([helm_release()], POLICY) == []


@pytest.mark.parametrize(
    "labels, extra, finding",
    [
        ({"nvidia.com/gpu.present": None}, [], True),
        ({"nvidia.com/gpu.present": "false"}, [], True),
        ({"nvidia.com/gpu.present": None, "feature.node.kubernetes.io/pci-10de.present": "true"}, [], False),
        ({"nvidia.com/gpu.present": None}, [helm_release("node-feature-discovery", "0.18.1", {"worker": {"tolerations": [GPU_TOLERATION]}})], False),
    ],
    ids=["missing", "false", "nfd-label", "nfd-in-stack"],
)
def test_device_plugin_affinity_needs_a_gpu_label(pack, labels, extra, finding):
    pool_labels = {k: v for k, v in {**gpu_node_group()["inputs"]["labels"], **labels}.items() if v is not None}
    pool = patch(gpu_node_group(), {"labels": pool_labels})
    messages = pack.stack_messages(stack(helm_release(), *extra, pool=pool), POLICY)
    if finding:
        one(messages, "the device plugin runs no pods on managed node group 'inference'",
            "the chart's default node affinity requires", "cannot satisfy 'feature.node.kubernetes.io/pci-10de.present' nor",
            "Label the pool nvidia.com/gpu.present: \"true\"")
    else:
        assert messages == []


@pytest.mark.parametrize(
    "release, where",
    [
        (dcgm({"tolerations": [GPU_TOLERATION], "nodeSelector": {"llm-platform.io/accelerator": "h100"}}),
         "values.nodeSelector/affinity requires llm-platform.io/accelerator in (h100)"),
        (helm_release(values={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "node.kubernetes.io/purpose", "operator": "In", "values": ["system"]}]}]}}}}),
         "requires node.kubernetes.io/purpose in (system)"),
        (gpu_operator({"node-feature-discovery": {"worker": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}}}),
         "values.node-feature-discovery.worker.nodeSelector/affinity requires kubernetes.io/arch in (arm64)"),
    ],
    ids=["dcgm-selector", "device-plugin-affinity", "operator-nfd-selector"],
)
def test_agent_selection_that_excludes_gpu_pools(pack, release, where):
    one(pack.stack_messages(stack(release), POLICY), "runs no pods on managed node group 'inference'", where,
        "Widen the selector or fix the pool's labels")


def test_agent_selection_that_matches_gpu_pools(pack):
    release = dcgm({"tolerations": [GPU_TOLERATION], "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]}]}]}}}})
    assert pack.stack_messages(stack(release), POLICY) == []


def test_agent_charts_are_configurable(pack):
    pack.configure({POLICY: {"agentCharts": ["nvidia-device-plugin"]}})
    assert pack.stack_messages(stack(dcgm()), POLICY) == []


@pytest.mark.parametrize(
    "resources",
    [
        stack(helm_release(values=UNKNOWN)),
        stack(helm_release(values={"tolerations": UNKNOWN})),
        stack(helm_release(values={"tolerations": [UNKNOWN]})),
        stack(dcgm(), pool=patch(gpu_node_group(), {"taints": UNKNOWN})),
        stack(dcgm(), pool=patch(gpu_node_group(), {"amiType": UNKNOWN, "instanceTypes": UNKNOWN})),
    ],
    ids=["values", "tolerations", "one-toleration", "pool-taints", "pool-kind"],
)
def test_unknown_values_are_not_judged(pack, resources):
    assert pack.stack_messages(resources, POLICY) == []


@pytest.mark.parametrize(
    "selector, tolerate, finding",
    [
        ({"nvidia.com/gpu.present": "true"}, False, True),
        ({"nvidia.com/gpu.present": "true"}, True, False),
        ({}, False, False),
        ({"node.kubernetes.io/purpose": "system"}, False, False),
    ],
    ids=["gpu-selector-untolerated", "gpu-selector-tolerated", "every-node", "system-only"],
)
def test_daemonsets_that_select_gpu_nodes(pack, selector, tolerate, finding):
    agent = workload("DaemonSet", "dcgm-exporter", gpus=None, tolerate=tolerate, selector=selector)
    messages = pack.stack_messages(stack(agent), POLICY)
    if finding:
        one(messages, "DaemonSet 'dcgm-exporter' selects the nodes of managed node group 'inference'",
            "does not tolerate its taint nvidia.com/gpu=true:NoSchedule")
    else:
        assert messages == []


# --- which agent belongs on which pool: the program's table (components/specs/gpu_software.py) -----------

PROD_CONFIG = ROOT / "policies" / "config" / "prod.json"
PURPOSE = "node.kubernetes.io/purpose"


def dra_pool():
    labels = {**gpu_node_group()["inputs"]["labels"], PURPOSE: "gpu-dra"}
    return gpu_node_group(name="dra", labels=labels, instanceTypes=["g6e.xlarge"], capacityType="ON_DEMAND")


def program_device_plugin():
    """The standalone device plugin as the program emits it: off DRA pools by affinity."""
    return helm_release(values={"tolerations": [GPU_TOLERATION], "affinity": software.device_plugin_affinity()})


def program_dra_driver(selector=None):
    """The DRA driver's kubelet plugin as the program emits it: on DRA pools only."""
    values = dra_driver.dra_driver_values()
    if selector is not None:
        values = {**values, "kubeletPlugin": {**values["kubeletPlugin"], "nodeSelector": selector, "affinity": {}}}
    return helm_release(versions.NVIDIA_DRA_DRIVER.chart, versions.NVIDIA_DRA_DRIVER.version, values, versions.NVIDIA_DRA_DRIVER.repository)


def test_program_placement_of_device_plugin_and_dra_driver_passes_under_prod(pack):
    """The documented dev + gpu-dra stack: the device plugin off the DRA pool, the kubelet plugin on it only."""
    pack.configure(PROD_CONFIG)
    resources = [gpu_node_group(), dra_pool(), system_node_group(), program_device_plugin(), program_dra_driver()]
    assert pack.stack_messages(resources, POLICY) == []


def test_placement_table_still_requires_each_agent_on_its_own_pools(pack):
    pack.configure(PROD_CONFIG)
    # the kubelet plugin selecting only training pools never reaches the DRA pool the table gives it
    resources = [gpu_node_group(), dra_pool(), system_node_group(), program_device_plugin(),
                 program_dra_driver(selector={PURPOSE: "gpu-training"})]
    one(pack.stack_messages(resources, POLICY), "the kubelet plugin runs no pods on managed node group 'dra'",
        "node.kubernetes.io/purpose in (gpu-training)")


def test_without_the_placement_table_the_dra_pool_blocks_the_stack(pack):
    """What the pack said before it knew the table: 2 findings on this two-GPU-pool stack."""
    pack.configure({"all": "mandatory", POLICY: {"agentPlacement": {}}})
    resources = [gpu_node_group(), dra_pool(), system_node_group(), program_device_plugin(), program_dra_driver()]
    messages = pack.stack_messages(resources, POLICY)
    assert len(messages) == 2
    assert any("the device plugin runs no pods on managed node group 'dra'" in m for m in messages)
    assert any("the kubelet plugin runs no pods on managed node group 'inference'" in m for m in messages)


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_config_placement_is_the_programs(stack_name):
    """The pack's table equals what the program's affinities express (one source: software.py)."""
    config = json.loads((ROOT / "policies" / "config" / f"{stack_name}.json").read_text())
    placement = config[POLICY]["agentPlacement"]
    terms = software.device_plugin_affinity()["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    excluded = [v for e in terms["nodeSelectorTerms"][0]["matchExpressions"]
                if e["key"] == contract.PURPOSE_LABEL and e["operator"] == "NotIn" for v in e["values"]]
    assert placement["nvidia-device-plugin"] == {"exceptPurposes": excluded} == {"exceptPurposes": ["gpu-dra"]}
    selector = dra_driver.dra_driver_values()["kubeletPlugin"]["nodeSelector"]
    assert placement["dra-driver-nvidia-gpu"] == {"onlyPurposes": [selector[contract.PURPOSE_LABEL]]}
