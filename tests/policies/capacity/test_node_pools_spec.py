"""The one reader of pool resources (policies/capacity/node_pools.py) as a specification: what a
record says for hand-written resources, each value as EKS, pulumi-eks and Karpenter define it.

- EKS launches ``t3.medium`` for a managed group that names no type, and a Capacity Block group names
  its type on its launch template, not on the group (EKS API, CreateNodegroup ``instanceTypes``);
  pulumi-eks defaults a group's scaling to 1..2 (``ManagedNodeGroup`` ``scalingConfig``).
- Karpenter rewrites deprecated label keys before it reads a requirement (kubernetes-sigs/karpenter
  pkg/apis/v1/labels.go ``NormalizedLabels``), and a bound on the GPU count needs the label, which only
  GPU types carry: ``Gte 0`` admits GPU types only, where the textbook reading "count >= 0" admits every
  type (pkg/scheduling/requirement.go).
- A value a preview does not know yet stays "not known" in the record instead of a guess.
"""

from __future__ import annotations

from types import SimpleNamespace

from policies.capacity.model import Taint
from policies.capacity.node_pools import DeclaredGroup, DeclaredNodePool, declared_pools
from policies.capacity.values import UNKNOWN

MNG, AWS_NG = "eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup"
NODEPOOL, TEMPLATE = "kubernetes:karpenter.sh/v1:NodePool", "aws:ec2/launchTemplate:LaunchTemplate"
OWNER = "urn:pool:reserved"


def resource(type_: str, name: str, props: dict, parent: str = "") -> SimpleNamespace:
    return SimpleNamespace(type=type_, name=name, urn=f"urn:{type_}::{name}", parent=parent, props=props)


def owner() -> SimpleNamespace:
    return SimpleNamespace(type="llm-platform:index:GpuNodePool", name="reserved", urn=OWNER, parent="", props={})


def test_a_capacity_block_group_launches_its_launch_templates_type():
    group = resource(MNG, "reserved", {"capacityType": "CAPACITY_BLOCK", "nodeGroupName": "reserved"}, parent=OWNER)
    template = resource(TEMPLATE, "reserved-lt", {"instanceType": "p5.48xlarge"}, parent=OWNER)
    (pool,) = declared_pools([owner(), group, template])
    assert isinstance(pool, DeclaredGroup)
    assert (pool.instance_types, pool.is_gpu, pool.owner) == (("p5.48xlarge",), True, OWNER)
    assert (pool.capacity_type, pool.min_size, pool.max_size, pool.label) == ("CAPACITY_BLOCK", 1, 2,
                                                                              "managed node group 'reserved'")


def test_a_group_beside_two_templates_launches_the_eks_default():
    group = resource(MNG, "reserved", {}, parent=OWNER)
    templates = [resource(TEMPLATE, f"lt-{i}", {"instanceType": "p5.48xlarge"}, parent=OWNER) for i in (1, 2)]
    (pool,) = declared_pools([owner(), group, *templates])
    assert (pool.instance_types, pool.is_gpu) == (("t3.medium",), False)


def test_the_aws_node_group_child_describes_a_pulumi_eks_group():
    component = resource(MNG, "gpu", {"instanceTypes": ["m7i.xlarge"]})
    child = resource(AWS_NG, "gpu", {"instanceTypes": ["g5.xlarge"], "scalingConfig": {"minSize": 0, "maxSize": 3},
                                     "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]},
                     parent=component.urn)
    (pool,) = declared_pools([component, child])
    assert pool.resource is child
    assert (pool.instance_types, pool.min_size, pool.max_size) == (("g5.xlarge",), 0, 3)
    assert pool.taints == (Taint("nvidia.com/gpu", "true", "NoSchedule"),)


def test_values_not_known_yet_stay_unknown():
    group = resource(MNG, "gpu", {"instanceTypes": UNKNOWN, "scalingConfig": UNKNOWN,
                                  "taints": [{"key": "nvidia.com/gpu", "value": UNKNOWN, "effect": "NO_SCHEDULE"}]})
    (pool,) = declared_pools([group])
    assert (pool.instance_types, pool.is_gpu, pool.taints) == (None, None, None)
    assert (pool.min_size, pool.max_size) == (UNKNOWN, UNKNOWN)


def test_a_self_managed_group_keys_its_taints_by_taint_key():
    group = resource("eks:index:NodeGroupV2", "cpu", {"instanceType": "m7i.xlarge", "spotPrice": "0.2",
                                                      "taints": {"dedicated": {"value": "batch", "effect": "NoSchedule"}}})
    (pool,) = declared_pools([group])
    assert (pool.kind, pool.capacity_type, pool.instance_types) == ("self-managed node group", "SPOT", ("m7i.xlarge",))
    assert pool.taints == (Taint("dedicated", "batch", "NoSchedule"),)


def nodepool(requirements: list[dict], node_class_group: str = "karpenter.k8s.aws") -> SimpleNamespace:
    return resource(NODEPOOL, "pool", {"metadata": {"name": "pool"}, "spec": {"template": {"spec": {
        "requirements": requirements, "nodeClassRef": {"group": node_class_group, "kind": "NodeClass", "name": "gpu"}}}}})


def test_a_deprecated_requirement_key_is_read_under_its_stable_name():
    (pool,) = declared_pools([nodepool([{"key": "beta.kubernetes.io/instance-type", "operator": "In",
                                         "values": ["g5.xlarge"]}])])
    assert isinstance(pool, DeclaredNodePool)
    assert pool.requirements == ({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]},)
    assert (pool.is_gpu, pool.kind) == (True, "Karpenter NodePool")


def test_a_lower_bound_of_zero_on_the_gpu_count_selects_gpu_types_only():
    # textbook: "count >= 0" holds for every type, so the pool would not be GPU capacity
    (pool,) = declared_pools([nodepool([{"key": "eks.amazonaws.com/instance-gpu-count", "operator": "Gte",
                                         "values": ["0"]}], node_class_group="eks.amazonaws.com")])
    assert (pool.is_gpu, pool.kind, pool.label) == (True, "Auto Mode NodePool", "Auto Mode NodePool 'pool'")


def test_a_cpu_nodepool_is_not_gpu_capacity_and_an_unknown_requirement_is_not_judged():
    (cpu,) = declared_pools([nodepool([{"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                                        "values": ["m", "c"]}])])
    (unknown,) = declared_pools([nodepool([{"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                                            "values": UNKNOWN}])])
    assert (cpu.is_gpu, unknown.is_gpu, unknown.requirements) == (False, None, None)
