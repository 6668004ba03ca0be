"""Pool recognition (policies/lib/pools.py) as a specification, through the decisions it drives.

Is a pool GPU capacity? Each GPU-only form of a NodePool requirement, node group AMI or instance type
is paired with its non-GPU twin; the verdict is read from ``gpu-pools-tainted``, which asks every GPU
pool (and no other) for the GPU taint. Then the labels a pool offers, read from
``gpu-workload-schedulable``: a key a requirement constrains stays decidable, so a selector that
contradicts it is still reported.

Karpenter sets ``instance-gpu-count`` (and the other ``instance-gpu-*`` labels) only on GPU
instance types (Karpenter's well-known labels reference), so a requirement is GPU-only when every
value it admits is at least 1.
"""

from __future__ import annotations

import pytest

from tests.policies.builders import GPU, UNKNOWN, nodepool, patch, resource, workload
from tests.policies.conftest import one

TAINTED, SCHEDULABLE = "gpu-pools-tainted", "gpu-workload-schedulable"
REQUIREMENTS = "spec.template.spec.requirements"
K, A = "karpenter.k8s.aws/", "eks.amazonaws.com/"


def untainted_nodepool(*requirements: dict, auto_mode: bool = False) -> dict:
    """A NodePool with no taint and no GPU limit: only its requirements can make it GPU capacity."""
    changes = {REQUIREMENTS: list(requirements), "spec.template.spec.taints": [], "spec.limits": {"cpu": "64"}}
    if auto_mode:
        changes["spec.template.spec.nodeClassRef"] = {"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"}
    return patch(nodepool("pool"), changes)


def req(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


#: gpu-pools-tainted's description heads each of its messages.
TAINT_POLICY = ("Give every GPU node group and GPU Karpenter NodePool a NoSchedule taint with the GPU taint key "
                "(NO_SCHEDULE in the EKS API).\n")
NODEPOOL_MESSAGE = TAINT_POLICY + (
    "NodePool 'pool' selects GPU capacity but has no taint with key 'nvidia.com/gpu'. Add "
    "spec.template.spec.taints: [{key: nvidia.com/gpu, value: \"true\", effect: NoSchedule}] so only pods "
    "that tolerate it (GPU workloads and agents) land on its nodes."
)


@pytest.mark.parametrize(
    "requirement",
    [
        req(K + "instance-gpu-count", "In", "1"),
        req(K + "instance-gpu-count", "In", "0", "4"),
        req(K + "instance-gpu-count", "Gte", "1"),
        req(K + "instance-gpu-count", "Gte", "2"),
        req(K + "instance-gpu-count", "Gt", "0"),
        req(K + "instance-gpu-count", "Exists"),
        req(K + "instance-gpu-name", "In", "a10g"),
        req(K + "instance-gpu-manufacturer", "In", "nvidia"),
        req(K + "instance-gpu-memory", "Gt", "20000"),
        req(K + "instance-gpu-name", "Exists"),
        req(K + "instance-category", "In", "m", "g"),
        req(K + "instance-family", "In", "m7i", "g6e"),
        req("node.kubernetes.io/instance-type", "In", "m7i.xlarge", "g5.2xlarge"),
        req(A + "instance-gpu-count", "Gte", "1"),
        req(A + "instance-category", "In", "p"),
        # Lt/Lte need the label, which only GPU types carry
        req(K + "instance-gpu-count", "Lt", "2"),
        req(K + "instance-gpu-count", "Lte", "4"),
        req(K + "instance-gpu-memory", "Lt", "20000"),
        # Any bound on the count needs the label (Karpenter: Gt/Gte is "exists, with a lower bound"): Gte 0
        # reads as "any type" in the textbook and admits only GPU types in Karpenter.
        req(K + "instance-gpu-count", "Gte", "0"),
        req(A + "instance-gpu-count", "Gte", "0"),
    ],
    ids=["count-in-1", "count-in-0-or-4", "count-gte-1", "count-gte-2", "count-gt-0", "count-exists", "gpu-name",
         "manufacturer", "gpu-memory-gt", "gpu-name-exists", "category-g", "family-g6e", "type-g5", "auto-count-gte-1",
         "auto-category-p", "count-lt-2", "count-lte-4", "gpu-memory-lt", "count-gte-0", "auto-count-gte-0"],
)
def test_gpu_only_requirements_make_gpu_capacity(pack, requirement):
    assert pack.messages(untainted_nodepool(requirement), TAINTED) == [NODEPOOL_MESSAGE]


@pytest.mark.parametrize(
    "requirement",
    [
        req(K + "instance-gpu-count", "In", "0"),
        req(K + "instance-gpu-count", "In", "0", "none"),
        req(K + "instance-gpu-count", "DoesNotExist"),
        req(K + "instance-gpu-count", "NotIn", "8"),
        req(K + "instance-gpu-count", "Gt"),
        req(K + "instance-gpu-name", "NotIn", "a10g"),
        req(K + "instance-category", "In", "m", "c"),
        req(K + "instance-category", "NotIn", "g", "p"),
        req(K + "instance-family", "In", "m7i"),
        req("node.kubernetes.io/instance-type", "In", "m7i.xlarge"),
        req("node.kubernetes.io/instance-type", "NotIn", "g5.xlarge"),
        req("karpenter.k8s.aws/instance-gpu-count-typo", "Gte", "1"),
    ],
    ids=["count-in-0", "count-in-0-or-junk",
         "count-does-not-exist", "count-not-in-8", "count-gt-no-value", "gpu-name-not-in",
         "category-m-c", "category-not-in-g-p", "family-m7i", "type-m7i", "type-not-in-g5", "other-key"],
)
def test_the_non_gpu_twins_are_not_gpu_capacity(pack, requirement):
    assert pack.messages(untainted_nodepool(requirement), TAINTED) == []


def test_a_gpu_limit_alone_makes_gpu_capacity(pack):
    limited = patch(untainted_nodepool(req(K + "instance-family", "In", "m7i")), {"spec.limits": {GPU: "8"}})
    assert pack.messages(limited, TAINTED) == [NODEPOOL_MESSAGE]


@pytest.mark.parametrize("limit, gpu", [("0", False), ("1", True), ("4", True)])
def test_a_gpu_limit_of_zero_is_a_guard_and_one_is_gpu_capacity(pack, limit, gpu):
    """``limits: {nvidia.com/gpu: "0"}`` keeps GPUs out of a CPU pool; any positive limit admits them."""
    limited = patch(untainted_nodepool(req(K + "instance-family", "In", "m7i")), {"spec.limits": {GPU: limit}})
    assert pack.messages(limited, TAINTED) == ([NODEPOOL_MESSAGE] if gpu else [])


@pytest.mark.parametrize("requirement, gpu", [
    (req(K + "instance-gpu-count", "Lte", "1"), True),   # one-GPU types only
    (req(K + "instance-gpu-count", "Lt", "1"), False),   # no type carries a count below 1
    (req(K + "instance-gpu-count", "Lte", "0"), False),
    (req(K + "instance-gpu-memory", "Lt", "1"), True),   # the label exists on GPU types only
    (req(K + "instance-gpu-memory", "Lt", "0"), False),  # admits nothing
], ids=["count-lte-1", "count-lt-1", "count-lte-0", "memory-lt-1", "memory-lt-0"])
def test_upper_bounds_on_gpu_labels_at_their_edges(pack, requirement, gpu):
    assert pack.messages(untainted_nodepool(requirement), TAINTED) == ([NODEPOOL_MESSAGE] if gpu else [])


# --- node groups: AMI, gpu flag, instance types --------------------------------------------------


def managed_group(**inputs) -> dict:
    base = {"instanceTypes": ["m7i.xlarge"], "taints": [], "scalingConfig": {"minSize": 1, "maxSize": 2}}
    return resource("eks:index:ManagedNodeGroup", "group", {**base, **inputs})


def self_managed_group(**inputs) -> dict:
    return resource("eks:index:NodeGroupV2", "self", {"minSize": 1, "maxSize": 2, **inputs})


def managed_message(why: str) -> str:
    return TAINT_POLICY + (f"ManagedNodeGroup 'group' is GPU capacity ({why}) but has no taint with key 'nvidia.com/gpu'. Set "
            "taints: [{key: nvidia.com/gpu, value: \"true\", effect: NO_SCHEDULE}] so CPU pods cannot take its GPU nodes.")


@pytest.mark.parametrize(
    "inputs, why",
    [
        ({"amiType": "AL2023_x86_64_NVIDIA"}, "amiType AL2023_x86_64_NVIDIA"),
        ({"amiType": "BOTTLEROCKET_x86_64_NVIDIA"}, "amiType BOTTLEROCKET_x86_64_NVIDIA"),
        ({"amiType": "AL2_x86_64_GPU"}, "amiType AL2_x86_64_GPU"),
        ({"amiType": "AL2023_x86_64_STANDARD", "gpu": True}, "gpu: true"),
        ({"amiType": "AL2023_x86_64_STANDARD", "instanceTypes": ["m7i.xlarge", "g6e.xlarge"]},
         "instance types m7i.xlarge, g6e.xlarge"),
    ],
    ids=["nvidia-ami-on-cpu-types", "bottlerocket-nvidia", "al2-gpu", "gpu-flag", "one-gpu-type"],
)
def test_a_node_group_is_gpu_by_its_ami_flag_or_one_gpu_type(pack, inputs, why):
    """The NVIDIA AMI alone (on m7i.xlarge, a CPU type) is enough: the group is meant for GPUs."""
    assert pack.messages(managed_group(**inputs), TAINTED) == [managed_message(why)]


@pytest.mark.parametrize(
    "inputs",
    [
        {"amiType": "AL2023_x86_64_STANDARD"},
        {"amiType": "BOTTLEROCKET_x86_64"},
        {"amiType": "AL2023_x86_64_STANDARD", "gpu": False},
        {},
        {"amiType": "AL2023_x86_64_STANDARD", "instanceTypes": []},
    ],
    ids=["standard-ami", "bottlerocket", "gpu-false", "no-ami", "default-type-t3-medium"],
)
def test_the_cpu_twins_of_a_node_group_are_not_gpu(pack, inputs):
    assert pack.messages(managed_group(**inputs), TAINTED) == []


def test_a_self_managed_group_is_gpu_by_its_single_instance_type(pack):
    gpu = self_managed_group(instanceType="g5.xlarge", amiType="AL2023_x86_64_STANDARD")
    assert pack.messages(gpu, TAINTED) == [
        TAINT_POLICY + "NodeGroupV2 'self' is GPU capacity (instance types g5.xlarge) but has no taint with key "
        "'nvidia.com/gpu'. Set taints: {\"nvidia.com/gpu\": {value: \"true\", effect: NoSchedule}} so CPU pods "
        "cannot take its GPU nodes."
    ]
    assert pack.messages(self_managed_group(instanceType="m7i.xlarge", amiType="AL2023_x86_64_STANDARD"), TAINTED) == []
    # without instanceType pulumi-eks launches t3.medium, a CPU type
    assert pack.messages(self_managed_group(amiType="AL2023_x86_64_STANDARD"), TAINTED) == []


def test_a_self_managed_groups_instance_type_decides_where_a_gpu_pod_lands(pack):
    """gpu-workload-schedulable reads the self-managed group's one type for its GPU count."""
    tainted = {"nvidia.com/gpu": {"value": "true", "effect": "NoSchedule"}}
    labels = {"node.kubernetes.io/purpose": "gpu-inference"}
    small = self_managed_group(instanceType="g5.xlarge", amiType="AL2023_x86_64_NVIDIA", taints=tainted, labels=labels)
    big = self_managed_group(instanceType="g5.12xlarge", amiType="AL2023_x86_64_NVIDIA", taints=tainted, labels=labels)
    pod = patch(workload(), {("spec", "template", "spec", "containers", 0, "resources", "limits", GPU): 4})
    assert pack.stack_messages([big, pod], SCHEDULABLE) == []
    message = one(pack.stack_messages([small, pod], SCHEDULABLE),
                  "self-managed node group 'self': its largest node has 1 GPUs, the pod needs 4")
    assert "it has no GPUs" not in message


def test_a_cpu_only_self_managed_group_has_no_gpus_for_a_gpu_pod(pack):
    cpu = self_managed_group(instanceType="m7i.xlarge", amiType="AL2023_x86_64_STANDARD",
                             labels={"node.kubernetes.io/purpose": "gpu-inference"})
    message = one(pack.stack_messages([cpu, workload()], SCHEDULABLE), "self-managed node group 'self': it has no GPUs")
    assert "largest node" not in message


# --- keys a requirement constrains stay decidable ----------------------------------------------------


@pytest.mark.parametrize(
    "requirement, selector, fits",
    [
        (req(K + "instance-family", "In", "g5"), {K + "instance-family": "g5"}, True),
        (req(K + "instance-family", "In", "g5"), {K + "instance-family": "p5"}, False),
        (req(K + "instance-family", "NotIn", "p5"), {K + "instance-family": "p5"}, False),
        (req(K + "instance-family", "NotIn", "p5"), {K + "instance-family": "g6e"}, True),
        (req(K + "instance-gpu-count", "Gte", "2"), {K + "instance-gpu-count": "1"}, False),
        (req(K + "instance-gpu-count", "Gte", "2"), {K + "instance-gpu-count": "2"}, True),
        (req(K + "instance-gpu-count", "Lt", "4"), {K + "instance-gpu-count": "4"}, False),
        (req("team", "In", "ml"), {"team": "ml"}, True),
        (req("team", "In", "ml"), {"team": "search"}, False),
    ],
    ids=["family-in-match", "family-in-contradicted", "family-notin-contradicted", "family-notin-match",
         "count-gte-contradicted", "count-gte-match", "count-lt-contradicted", "custom-in-match",
         "custom-in-contradicted"],
)
def test_a_requirement_constrained_key_is_judged_not_left_undecided(pack, requirement, selector, fits):
    pool = patch(nodepool("pool"), {REQUIREMENTS: [req(K + "instance-category", "In", "g"), requirement]})
    messages = pack.stack_messages([pool, workload(selector=selector)], SCHEDULABLE)
    if fits:
        assert messages == []
    else:
        key = next(iter(selector))
        message = one(messages, f"Karpenter NodePool 'pool': its nodes cannot satisfy '{key}'")
        assert "no selector term matches" not in message


def test_a_key_no_requirement_or_label_sets_is_missing_on_karpenter_nodes(pack):
    pool = patch(nodepool("pool"), {REQUIREMENTS: [req(K + "instance-category", "In", "g")]})
    one(pack.stack_messages([pool, workload(selector={"team": "ml"})], SCHEDULABLE),
        "Karpenter NodePool 'pool': its nodes cannot satisfy 'team'")
    assert pack.stack_messages([pool, workload(selector={K + "instance-family": "g6e"})], SCHEDULABLE) == []


@pytest.mark.parametrize("auto_mode, prefix", [(False, K), (True, A)])
def test_gpu_instance_labels_are_well_known_under_the_pools_own_prefix(pack, auto_mode, prefix):
    """Karpenter (or Auto Mode) sets instance-gpu-* labels on each GPU node it launches, so a pod may
    select on them without a requirement naming them; the other provisioner's prefix is absent."""
    pool = patch(nodepool("pool"), {REQUIREMENTS: [req(prefix + "instance-category", "In", "g")]})
    if auto_mode:
        pool = patch(pool, {"spec.template.spec.nodeClassRef": {"group": "eks.amazonaws.com", "kind": "NodeClass",
                                                                "name": "default"}})
    label = "Auto Mode NodePool" if auto_mode else "Karpenter NodePool"
    own = workload(selector={prefix + "instance-gpu-count": "1"})
    assert pack.stack_messages([pool, own], SCHEDULABLE) == []
    other = (A if prefix == K else K) + "instance-gpu-count"
    one(pack.stack_messages([pool, workload(selector={other: "1"})], SCHEDULABLE),
        f"{label} 'pool': its nodes cannot satisfy '{other}'")


def test_a_requirement_whose_key_is_no_string_is_ignored(pack):
    """A malformed requirement makes nothing GPU capacity and breaks nothing."""
    assert pack.messages(untainted_nodepool({"key": 7, "operator": "In", "values": ["1"]}), TAINTED) == []


def test_a_nodepool_whose_name_is_not_known_yet_admits_a_selector_on_its_name(pack):
    """karpenter.sh/nodepool is the NodePool's name; while the name is computed, any value may match."""
    pool = patch(nodepool("pool"), {("metadata", "name"): UNKNOWN})
    assert pack.stack_messages([pool, workload(selector={"karpenter.sh/nodepool": "gpu"})], SCHEDULABLE) == []


# --- a managed group's scaling without scalingConfig: EKS's defaults, minSize 1 and maxSize 2 -------------

SYSTEM_POOL = "system-pool-on-demand-ha"


def test_a_system_group_without_scaling_config_has_eks_default_min_size_1(pack):
    group = resource("eks:index:ManagedNodeGroup", "system", {
        "instanceTypes": ["m7i.xlarge"], "capacityType": "ON_DEMAND", "taints": [],
        "labels": {"node.kubernetes.io/purpose": "system", "llm-platform.io/capacity-type": "on-demand"}})
    assert pack.messages(group, SYSTEM_POOL) == [
        "Run the system node pool on-demand, untainted, with scalingConfig.minSize of at least 2.\n"
        "ManagedNodeGroup 'system' is the system pool with minSize 1; it needs at least 2 nodes (spread over two "
        "AZs) to survive a node loss. Raise scalingConfig.minSize to 2."]
    sized = patch(group, {"scalingConfig": {"minSize": 2, "maxSize": 3}})
    assert pack.messages(sized, SYSTEM_POOL) == []


def test_a_gpu_group_without_scaling_config_counts_eks_default_max_size_2(pack):
    """2 nodes x 4 GPUs (g5.12xlarge) = 8 GPUs: within a cap of 8, above a cap of 7."""
    group = resource("eks:index:ManagedNodeGroup", "gpu", {
        "amiType": "AL2023_x86_64_NVIDIA", "instanceTypes": ["g5.12xlarge"],
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]})
    pack.configure({"gpu-capacity-cap": {"maxGpus": 8}})
    assert pack.stack_messages([group], "gpu-capacity-cap") == []
    pack.configure({"gpu-capacity-cap": {"maxGpus": 7}})
    [message] = pack.stack_messages([group], "gpu-capacity-cap")
    assert "Worst-case GPU count is 8, above the cap of 7 (managed node group 'gpu': 2 nodes x 4 GPUs at $" in message


def test_a_pods_memory_selection_narrows_the_pools_memory_before_the_need_is_judged(pack):
    """The pool may launch 22888 or 45776 MiB GPUs; a pod that selects the 22888 ones cannot have 40000."""
    memory = "llm-platform.io/gpu-memory-mib"
    pool = patch(nodepool("pool"), {
        "spec.template.metadata.labels": {"node.kubernetes.io/purpose": "gpu-inference"},
        REQUIREMENTS: [req(K + "instance-category", "In", "g"), req(memory, "In", "22888", "45776")]})

    def pod(*sizes: str) -> dict:
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [req(memory, "In", *sizes)]}]}}}
        return patch(workload(annotations={memory: "40000"}), {"spec.template.spec.affinity": affinity})

    assert pack.stack_messages([pool, pod("45776")], SCHEDULABLE) == []
    message = one(pack.stack_messages([pool, pod("22888")], SCHEDULABLE),
                  "Karpenter NodePool 'pool': its GPUs have 22888 MiB, the pod needs 40000 MiB per GPU")
    assert "45776" not in message.split("fits no pool")[1]
