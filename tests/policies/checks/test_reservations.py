"""reserved-capacity-usable over the pack's real gRPC path: a CAPACITY_BLOCK managed group's launch template
sets the capacity-block market type, the block's reservation target and its instance type, and the group
lists no instance types and one subnet (EKS user guide, "Create a managed node group with Capacity Blocks for
ML"); a NodePool admitting ``reserved`` has a node class that selects
capacity reservations (Karpenter docs, tasks/odcrs). And karpenter-v1-valid reads the selector terms
against the 1.14.1 CRD."""

from __future__ import annotations

from tests.policies.builders import (
    DELETE,
    UNKNOWN,
    auto_mode_nodepool,
    ec2nodeclass,
    gpu_node_group,
    launch_template,
    nodepool,
    patch,
    resource,
)
from tests.policies.checks.test_capacity_simulation import KARPENTER, OVER, SIM, scaler, server
from tests.policies.conftest import one

RESERVED, VALID = "reserved-capacity-usable", "karpenter-v1-valid"
BLOCK = "cr-0123456789abcdef0"
OWNER = resource("llm-platform:index:GpuNodePool", "reserved-h100", {})
TARGET = {"capacityReservationTarget": {"capacityReservationId": BLOCK}}


def _group(**inputs):
    """A Capacity Block group as EKS creates it: no instanceTypes of its own, the block's zone's one subnet."""
    group = gpu_node_group(name="reserved-h100", **{"capacityType": "CAPACITY_BLOCK", "subnetIds": ["subnet-a"],
                                                    **inputs})
    group = patch(group, {"instanceTypes": DELETE}) if "instanceTypes" not in inputs else group
    return resource(group["type"], group["name"], group["inputs"], parent=OWNER)


def _template(**inputs):
    template = launch_template(name="reserved-h100-lt", **inputs)
    return resource(template["type"], template["name"], template["inputs"], parent=OWNER)


def _block_template(**changes):
    template = _template(instanceMarketOptions={"marketType": "capacity-block"},
                         capacityReservationSpecification=TARGET, instanceType="p5.48xlarge")
    return patch(template, changes)


def test_a_capacity_block_group_in_the_shape_eks_accepts_passes(pack):
    assert pack.stack_messages([OWNER, _group(), _block_template()], RESERVED) == []


def test_the_textbook_group_that_lists_its_type_is_refused(pack):
    """The textbook group names its instance types on the group like any other; EKS takes a Capacity Block's
    type only from the launch template and refuses a group that has both, or neither (terraform-aws-eks
    eks-managed-node-group ``main.tf``: ``instance_types = null`` for CAPACITY_BLOCK)."""
    template = _block_template(instanceType=DELETE)
    messages = pack.stack_messages([OWNER, _group(instanceTypes=["p5.48xlarge"]), template], RESERVED)
    assert [m.split("\n", 1)[1] for m in messages] == [
        "ManagedNodeGroup 'reserved-h100' has capacityType CAPACITY_BLOCK but lists instanceTypes p5.48xlarge on the "
        "group; EKS takes a Capacity Block's type only from the launch template (instanceType) and refuses both. "
        "Drop instanceTypes.",
        "ManagedNodeGroup 'reserved-h100' has capacityType CAPACITY_BLOCK but its LaunchTemplate 'reserved-h100-lt' "
        "lacks instanceType, the block's instance type (has none); EKS refuses to create the group. Set them on the "
        "launch template.",
    ]
    # the type in both places is refused too: the group's list goes
    one(pack.stack_messages([OWNER, _group(instanceTypes=["p5.48xlarge"]), _block_template()], RESERVED),
        "lists instanceTypes p5.48xlarge on the group")


def test_a_capacity_block_group_over_several_subnets_is_refused(pack):
    group = _group(subnetIds=["subnet-a", "subnet-b", "subnet-c"])
    one(pack.stack_messages([OWNER, group, _block_template()], RESERVED),
        "ManagedNodeGroup 'reserved-h100' has capacityType CAPACITY_BLOCK but launches in 3 subnets; a Capacity Block "
        "lives in one Availability Zone and EKS wants only the subnet in the block's zone.")


def test_a_capacity_block_group_whose_template_has_none_of_it_is_refused(pack):
    one(pack.stack_messages([OWNER, _group(), _template()], RESERVED),
        "ManagedNodeGroup 'reserved-h100' has capacityType CAPACITY_BLOCK but its LaunchTemplate 'reserved-h100-lt' "
        "lacks instanceMarketOptions.marketType capacity-block (has none) and "
        "capacityReservationSpecification.capacityReservationTarget.capacityReservationId naming the block (has none) "
        "and instanceType, the block's instance type (has none); EKS refuses to create the group.")


def test_the_target_without_the_market_option_is_refused(pack):
    template = _block_template(instanceMarketOptions=DELETE)
    message = one(pack.stack_messages([OWNER, _group(), template], RESERVED),
                  "lacks instanceMarketOptions.marketType capacity-block (has none);")
    assert "capacityReservationId" not in message and "instanceType," not in message


def test_a_real_preview_shape_is_judged_once_at_the_aws_node_group(pack):
    """A real preview shows aws:eks/nodeGroup:NodeGroup under eks:index:ManagedNodeGroup: one finding."""
    component = _group()
    child = gpu_node_group("aws:eks/nodeGroup:NodeGroup", name="reserved-h100-ng", capacityType="CAPACITY_BLOCK",
                           subnetIds=["subnet-a"])
    child = patch(child, {"instanceTypes": DELETE})
    child = resource(child["type"], child["name"], child["inputs"], parent=component)
    one(pack.stack_messages([OWNER, component, child, _template()], RESERVED), "NodeGroup 'reserved-h100-ng'")
    assert pack.stack_messages([OWNER, component, child, _block_template()], RESERVED) == []


def test_a_capacity_block_group_without_a_launch_template_is_refused(pack):
    group = patch(_group(), {"launchTemplate": None})
    one(pack.stack_messages([OWNER, group], RESERVED), "has capacityType CAPACITY_BLOCK but no launch template")


def test_an_unknown_template_field_is_not_judged(pack):
    template = _block_template(instanceMarketOptions={"marketType": UNKNOWN})
    assert pack.stack_messages([OWNER, _group(), template], RESERVED) == []


def _reserved_pool():
    pool = nodepool()
    return patch(pool, {"spec.template.spec.requirements.2.values": ["reserved", "on-demand"]})


def test_a_reserved_nodepool_on_a_class_without_selector_terms_is_refused(pack):
    one(pack.stack_messages([_reserved_pool(), ec2nodeclass()], RESERVED),
        "NodePool 'gpu-inference' admits karpenter.sh/capacity-type reserved, but EC2NodeClass 'gpu' has no "
        "capacityReservationSelectorTerms")


def test_a_reserved_nodepool_on_a_class_with_selector_terms_passes(pack):
    node_class = ec2nodeclass(capacityReservationSelectorTerms=[{"id": BLOCK}])
    assert pack.stack_messages([_reserved_pool(), node_class], RESERVED) == []
    assert pack.messages(node_class, VALID) == []


def test_an_on_demand_nodepool_needs_no_selector_terms(pack):
    assert pack.stack_messages([nodepool(), ec2nodeclass()], RESERVED) == []


def test_a_reserved_auto_mode_pool_on_the_built_in_class_is_refused(pack):
    pool = auto_mode_nodepool(requirements=[
        {"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["g5"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
    ])
    one(pack.stack_messages([pool], RESERVED), "on EKS Auto Mode's built-in NodeClass 'default'")


def test_selector_terms_are_read_against_the_crd(pack):
    bad = ec2nodeclass(capacityReservationSelectorTerms=[{"id": "cr-ABC"}, {"id": BLOCK, "tags": {"a": "b"}}])
    one(pack.messages(bad, VALID), "spec.capacityReservationSelectorTerms[0].id 'cr-ABC' is not a capacity reservation id")
    assert pack.messages(ec2nodeclass(capacityReservationSelectorTerms=[{"tags": {"team": "ml"}}]), VALID) == []


def test_id_with_other_fields_is_refused_as_the_crds_cel_rule_has_it(pack):
    """The CRD's rule is ``!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) ||
    has(x.instanceMatchCriteria)))``: the API server refuses the list only when every term pairs an id with
    other fields. The textbook reading of its message ("'id' is mutually exclusive") refuses any such term;
    the engine admits a list where another term does not."""
    alone = ec2nodeclass(capacityReservationSelectorTerms=[{"id": BLOCK, "tags": {"a": "b"}}])
    one(pack.messages(alone, VALID), "spec.capacityReservationSelectorTerms: every term sets id with other fields; "
                                     "the CRD refuses the list ('id' is mutually exclusive)")
    beside = ec2nodeclass(capacityReservationSelectorTerms=[{"id": BLOCK, "ownerID": "123456789012"},
                                                            {"tags": {"team": "ml"}}])
    assert pack.messages(beside, VALID) == []


def test_owner_ids_match_criteria_and_tags_are_read_against_the_crd(pack):
    terms = [{"tags": {"team": "ml"}, "ownerID": "12345"}, {"instanceMatchCriteria": "all"},
             {"tags": {f"k{i}": "v" for i in range(21)}}, {"tags": {"team": ""}}]
    one(pack.messages(ec2nodeclass(capacityReservationSelectorTerms=terms), VALID),
        "spec.capacityReservationSelectorTerms[0].ownerID '12345' is not an AWS account id (12 digits)",
        "spec.capacityReservationSelectorTerms[1].instanceMatchCriteria 'all' is not one of open, targeted",
        "spec.capacityReservationSelectorTerms[2].tags has 21 tags; at most 20",
        "spec.capacityReservationSelectorTerms[3].tags has an empty key or value")
    good = [{"tags": {"team": "ml"}, "ownerID": "123456789012"}, {"instanceMatchCriteria": "targeted"},
            {"tags": {f"k{i}": "v" for i in range(20)}}]
    assert pack.messages(ec2nodeclass(capacityReservationSelectorTerms=good), VALID) == []


# --- a Capacity Block against the block it records --------------------------------------------------

BLOCK_TAG = {"llm-platform.io/capacity-reservations":
             f"id={BLOCK} type=capacity-block instanceType=p5.48xlarge count=2 zone=us-east-1a end=2026-12-20T11:30:00Z"}


def _pack_on(day: str):
    from automation.offline.pack.runner import PolicyPackRunner
    from tests.policies.conftest import Pack

    with PolicyPackRunner(env={"LLM_PLATFORM_TODAY": day}) as runner:
        pack = Pack(runner)
        pack.configure()
        yield pack


def test_a_capacity_block_group_larger_than_its_block_is_refused(pack):
    group = _group(tags=BLOCK_TAG, scalingConfig={"minSize": 0, "desiredSize": 0, "maxSize": 3})
    one(pack.stack_messages([OWNER, group, _block_template()], RESERVED),
        "ManagedNodeGroup 'reserved-h100' can grow to 3 nodes, but its Capacity Block cr-0123456789abcdef0 holds 2 x "
        "p5.48xlarge: the nodes beyond 2 never launch (Cluster Autoscaler keeps retrying them). Set "
        "scalingConfig.maxSize to 2.")
    group = _group(tags=BLOCK_TAG, scalingConfig={"minSize": 0, "desiredSize": 0, "maxSize": 2})
    assert pack.stack_messages([OWNER, group, _block_template()], RESERVED) == []


def test_a_capacity_block_group_whose_block_ended_is_refused():
    group = _group(tags=BLOCK_TAG, scalingConfig={"minSize": 0, "desiredSize": 0, "maxSize": 2})
    for pack in _pack_on("2026-12-21"):
        one(pack.stack_messages([OWNER, group, _block_template()], RESERVED),
            "ManagedNodeGroup 'reserved-h100' launches into Capacity Block cr-0123456789abcdef0, which ended on "
            "2026-12-20T11:30:00Z: EC2 gives no instances from it any more.")
    for pack in _pack_on("2026-12-20"):  # its last day: still launches
        assert pack.stack_messages([OWNER, group, _block_template()], RESERVED) == []


def test_a_reserved_only_nodepool_whose_blocks_ended_is_refused():
    pool = patch(nodepool(), {"spec.template.spec.requirements.2.values": ["reserved"]})
    node_class = patch(ec2nodeclass(capacityReservationSelectorTerms=[{"id": BLOCK}]), {"metadata": {
        "name": "gpu", "annotations": {"llm-platform.io/capacity-reservations":
                                       f"id={BLOCK} type=capacity-block instanceType=g5.2xlarge count=2 "
                                       "zone=us-east-1a end=2026-12-20T11:30:00Z"}}})
    for pack in _pack_on("2026-12-21"):
        one(pack.stack_messages([pool, node_class], RESERVED),
            "NodePool 'gpu-inference' launches only reserved capacity, and every reservation EC2NodeClass 'gpu' "
            "records (cr-0123456789abcdef0 ended 2026-12-20T11:30:00Z) is a Capacity Block that has ended")
        spot_too = patch(pool, {"spec.template.spec.requirements.2.values": ["reserved", "spot"]})
        assert pack.stack_messages([spot_too, node_class], RESERVED) == []


# --- capacity-simulation: a pool that admits only reserved capacity ------------------------------------

SELECTOR = {"llm-platform.io/pool": "gpu-inference"}


def _reserved_only(count: int):
    """A NodePool admitting only reserved g5 capacity on class gpu, whose annotation records one ODCR of
    ``count`` g5.2xlarge (1 GPU each)."""
    pool = patch(nodepool(), {"spec.template.spec.requirements.2.values": ["reserved"]})
    node_class = ec2nodeclass(capacityReservationSelectorTerms=[{"id": BLOCK}])
    node_class = patch(node_class, {"metadata": {"name": "gpu", "annotations": {
        "llm-platform.io/capacity-reservations":
            f"id={BLOCK} type=default instanceType=g5.2xlarge count={count} zone=us-east-1a"}}})
    return [KARPENTER, pool, node_class]


def test_min_replicas_beyond_a_reserved_only_pools_reservations_are_refused(pack):
    stack = [*_reserved_only(1), server(selector=SELECTOR), scaler(low=2, high=3)]
    one(pack.stack_messages(stack, SIM),
        "Karpenter NodePool 'gpu-inference' launches only into capacity reservations, which hold 1 GPUs, but its "
        "workloads (Deployment serving/vllm) need 2 at min replicas; the rest stays Pending.")


def test_max_replicas_beyond_the_reservations_are_advice(pack):
    stack = [*_reserved_only(2), server(selector=SELECTOR), scaler(low=2, high=3)]
    assert pack.stack_messages(stack, SIM) == []
    one(pack.stack_messages(stack, OVER), "launches only into capacity reservations, which hold 2 GPUs; at max "
                                          "replicas its workloads (Deployment serving/vllm) need 3")


def test_reservations_that_hold_the_max_pass(pack):
    stack = [*_reserved_only(4), server(selector=SELECTOR), scaler(low=2, high=3)]
    assert pack.stack_messages(stack, SIM) == [] and pack.stack_messages(stack, OVER) == []


def test_thirty_selector_terms_are_the_crds_most(pack):
    """The EC2NodeClass CRD: capacityReservationSelectorTerms maxItems 30."""
    terms = [{"tags": {"team": f"t{i}"}} for i in range(30)]
    assert pack.messages(ec2nodeclass(capacityReservationSelectorTerms=terms), VALID) == []
    one(pack.messages(ec2nodeclass(capacityReservationSelectorTerms=[*terms, {"tags": {"team": "x"}}]), VALID),
        "spec.capacityReservationSelectorTerms has 31 terms; at most 30")


def _reserved_only_on(reserved_type: str):
    pool = patch(nodepool(), {"spec.template.spec.requirements.2.values": ["reserved"]})
    node_class = patch(ec2nodeclass(capacityReservationSelectorTerms=[{"id": BLOCK}]), {"metadata": {
        "name": "gpu", "annotations": {"llm-platform.io/capacity-reservations":
                                       f"id={BLOCK} type=default instanceType={reserved_type} count=2 zone=us-east-1a"}}})
    return [pool, node_class]


def test_a_reserved_only_nodepool_whose_requirements_exclude_the_reserved_type_is_refused(pack):
    """The NodePool admits g5 sizes only; an ODCR of p5.48xlarge is never launched into."""
    one(pack.stack_messages(_reserved_only_on("p5.48xlarge"), RESERVED),
        "NodePool 'gpu-inference' launches only reserved capacity, but its requirements admit none of the instance "
        "types EC2NodeClass 'gpu''s reservations hold (p5.48xlarge)")
    assert pack.stack_messages(_reserved_only_on("g5.2xlarge"), RESERVED) == []
