"""SOCI parallel pull in the cold-start model: the image step of a pool whose nodes boot with nodeadm's
FastImagePull gate, and the reader that finds the gate in the emitted user data.

Figures (each with its source in policies/capacity/cold_start.py):
- serial pull of vllm/vllm-openai:v0.33.0 on a 500 MiB/s root volume (524,288,000 B/s, below g5.2xlarge's
  5,000 Mbps = 625,000,000 B/s): 12.64e9 / 524,288,000 = 24.11 s + 28.6e9 / 157,286,400 = 181.83 s = 205.94 s;
- SOCI parallel pull takes 0.532 of a containerd pull (59.813 s / 112.33 s, AWS's vLLM image measured in
  aws-samples/karpenter-blueprints): 205.94 x 0.532 = 109.56 s;
- the textbook (size over bandwidth) would say 12.64e9 / 625,000,000 = 20.22 s, SOCI or not;
- nodeadm honours the gate only with >= 4 vCPUs and >= 7 GiB (nodeadm/internal/containerd/config.go).
"""

from __future__ import annotations

import base64
import dataclasses
from types import SimpleNamespace

import pytest

from components.specs.node_pools import nodeadm_node_config, nodeadm_user_data
from policies.capacity import cold_start
from policies.capacity.cold_start import COLD, WARM, fast_image_pull, image_pull, start
from policies.capacity.instances import load_instances
from policies.capacity.kinds import EC2NODECLASS, EKS_MANAGED_NODE_GROUP, LAUNCH_TEMPLATE, NODEPOOL
from policies.capacity.llm import model_catalog

IMAGE = "vllm/vllm-openai:v0.33.0"
G5_2XL = load_instances().instances["g5.2xlarge"]
PROBE = {"startup_probe_period_seconds": 10, "startup_probe_failures": 180}


def dev_8b(case: str = COLD, *, fast: bool, instance=G5_2XL) -> cold_start.Start:
    return start("llama-3-1-8b-instruct", "inference", weight_bytes=model_catalog()["llama-3.1-8b-instruct"].weight_bytes(),
                 instance=instance, capacity_source="Cluster Autoscaler", image=IMAGE, disk_throughput_mibps=500,
                 case=case, fast_image_pull=fast, **PROBE)


def test_soci_takes_the_measured_share_of_the_serial_pull_not_the_textbook_figure():
    serial, parallel = dev_8b(fast=False).step("image"), dev_8b(fast=True).step("image")
    assert round(serial.seconds, 2) == 205.94
    assert round(parallel.seconds, 2) == 109.56
    textbook = 12.64e9 / 625_000_000
    assert round(textbook, 2) == 20.22 and parallel.seconds > 5 * textbook
    assert parallel.bound_seconds == serial.bound_seconds == 600
    assert "in parallel (SOCI) at 0.532" in parallel.detail


def test_soci_speeds_up_the_image_only():
    """Weights, load, compile and the node are what they were: 160 + 109.56 + 30.63 + 30.63 + 90 + 10 = 430.83 s
    against 527.21 s serially."""
    serial, parallel = dev_8b(fast=False), dev_8b(fast=True)
    for step in ("node", "weights", "load", "compile", "readiness"):
        assert parallel.step(step).seconds == serial.step(step).seconds
    assert round(serial.seconds, 2) == 527.21
    assert round(parallel.seconds, 2) == 430.83
    assert parallel.dominant.name == "node"


def test_a_warm_node_with_the_image_pulls_nothing_either_way():
    assert dev_8b(WARM, fast=True).step("image").seconds == 0.0


@pytest.mark.parametrize("vcpu, memory_mib, parallel", [
    (4, 7 * 1024, True),
    (2, 32768, False),      # too few vCPUs: nodeadm keeps containerd's own snapshotter
    (8, 6 * 1024, False),   # too little memory
])
def test_nodeadm_ignores_the_gate_on_small_instances(vcpu, memory_mib, parallel):
    """The textbook: the gate is on, so the pull is parallel. nodeadm: only from 4 vCPUs and 7 GiB."""
    small = dataclasses.replace(G5_2XL, name="small.large", vcpu=vcpu, memory_mib=memory_mib)
    step = image_pull(IMAGE, small, 500, fast_image_pull=True)
    assert round(step.seconds, 2) == (109.56 if parallel else 205.94)
    assert ("nodeadm ignores FastImagePull" in step.detail) is not parallel


# --- reading the gate back from the emitted objects ---------------------------------------------------

def node_class(name: str, user_data: str | None) -> SimpleNamespace:
    spec = {"userData": user_data} if user_data is not None else {}
    return SimpleNamespace(urn=f"urn:ec2nodeclass:{name}", type=EC2NODECLASS, parent=None,
                           props={"metadata": {"name": name}, "spec": spec})


def node_pool(class_name: str) -> SimpleNamespace:
    return SimpleNamespace(urn="urn:nodepool", type=NODEPOOL, parent=None, props={"spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class_name}}}}})


def managed(user_data: str | None) -> list[SimpleNamespace]:
    """A pool component with its node group and launch template as children (the program's shape)."""
    template = {"userData": base64.b64encode(user_data.encode()).decode()} if user_data is not None else {}
    return [SimpleNamespace(urn="urn:group", type=EKS_MANAGED_NODE_GROUP, parent="urn:pool", props={}),
            SimpleNamespace(urn="urn:lt", type=LAUNCH_TEMPLATE, parent="urn:pool", props=template),
            SimpleNamespace(urn="urn:pool", type="llm-platform:index:GpuNodePool", parent=None, props={})]


PROGRAM = nodeadm_user_data(nodeadm_node_config(local_storage_raid0=True, fast_image_pull=True))
RAID_ONLY = nodeadm_user_data(nodeadm_node_config(local_storage_raid0=True, fast_image_pull=False))
YAML_GATE = ('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\nContent-Type: '
             'application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n'
             '  featureGates:\n    FastImagePull: true\n\n--B--\n')


def two_parts(first: bool, second: bool) -> str:
    parts = [f'{{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {{"featureGates": '
             f'{{"FastImagePull": {str(v).lower()}}}}}}}' for v in (first, second)]
    return ('MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
            + "".join(f"--B\nContent-Type: application/node.eks.aws\n\n{p}\n\n" for p in parts) + "--B--\n")


@pytest.mark.parametrize("user_data, expected", [
    (PROGRAM, True),
    (RAID_ONLY, False),
    (None, False),
    (two_parts(True, False), False),   # nodeadm merges NodeConfigs in order: the later value wins
    (two_parts(False, True), True),
    (PROGRAM.replace("FastImagePull", "FastImagePul"), False),  # an unknown gate is ignored by nodeadm
    (YAML_GATE, False),  # the pack reads JSON only: never a faster start than the objects prove
])
def test_the_gate_is_read_from_what_the_nodes_boot_with(user_data, expected):
    assert fast_image_pull([node_pool("gpu"), node_class("gpu", user_data)], "urn:nodepool") is expected
    assert fast_image_pull(managed(user_data), "urn:group") is expected


def test_a_pool_reads_its_own_node_class():
    resources = [node_pool("gpu"), node_class("gpu", RAID_ONLY), node_class("other", PROGRAM)]
    assert fast_image_pull(resources, "urn:nodepool") is False
