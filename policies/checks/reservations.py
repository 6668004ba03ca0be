"""Reserved capacity (Capacity Blocks for ML, On-Demand Capacity Reservations) that could never be used.

- A managed node group with ``capacityType: CAPACITY_BLOCK`` is created by EKS only in this shape (EKS user
  guide, "Create a managed node group with Capacity Blocks for ML"; otherwise "the create request will be
  rejected"): a launch template with ``instanceMarketOptions.marketType: capacity-block``, a
  ``capacityReservationSpecification.capacityReservationTarget.capacityReservationId`` naming the block and
  the block's ``instanceType``; no ``instanceTypes`` on the group (a template that sets the type forbids them
  there, EKS user guide, "Customize managed nodes with launch templates"; terraform-aws-eks
  ``modules/eks-managed-node-group/main.tf`` sets ``instance_types = null`` for ``CAPACITY_BLOCK``); and
  only the subnet in the block's Availability Zone.
- A NodePool that admits ``karpenter.sh/capacity-type: reserved`` gets reserved offerings only from the
  reservations its node class selects (``capacityReservationSelectorTerms`` on the EC2NodeClass; Karpenter
  docs, tasks/odcrs). Without terms ``reserved`` is dead; EKS Auto Mode's built-in ``default`` NodeClass
  selects none.

The launch template of a group is found as the program and pulumi-eks lay it out: a sibling of the group
under the component that owns it (``lib.pools.node_group_template``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lib.kit import MANDATORY, Stack, stack_policy
from lib.pools import node_group_template
from lib.resources import AWS_NODE_GROUP, EC2NODECLASS, EKS_MANAGED_NODE_GROUP, NODEPOOL, Resource
from lib.values import UNKNOWN, as_list, contains_unknown, dig

#: Karpenter 1.14.1's EC2NodeClass CRD, ``capacityReservationSelectorTerms[].id``.
RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
CAPACITY_BLOCK_MARKET = "capacity-block"
AUTO_MODE_NODE_CLASS_GROUP = "eks.amazonaws.com"
AUTO_MODE_NODE_CLASS = "kubernetes:eks.amazonaws.com/v1:NodeClass"


def _group_shape_problems(group: Resource) -> Iterator[str]:
    """What EKS refuses on the group itself: instance types beside the template's, more than one subnet."""
    types = group.get("instanceTypes")
    if types is not None and not contains_unknown(types) and as_list(types):
        yield (f"lists instanceTypes {', '.join(map(str, as_list(types)))} on the group; EKS takes a Capacity "
               "Block's type only from the launch template (instanceType) and refuses both. Drop instanceTypes")
    subnets = group.get("subnetIds")
    if subnets is not None and not contains_unknown(subnets) and len(as_list(subnets)) > 1:
        yield (f"launches in {len(as_list(subnets))} subnets; a Capacity Block lives in one Availability Zone and "
               "EKS wants only the subnet in the block's zone")


def _group_problems(stack: Stack, group: Resource) -> Iterator[tuple[str, str | None]]:
    if group.get("capacityType") != "CAPACITY_BLOCK":
        return
    if group.type == EKS_MANAGED_NODE_GROUP and any(
            r.type == AWS_NODE_GROUP and group.urn in stack.ancestors(r) for r in stack.resources):
        return  # judged at its aws:eks NodeGroup child, which a real preview shows
    for problem in _group_shape_problems(group):
        yield f"{group.label} has capacityType CAPACITY_BLOCK but {problem}.", group.urn
    if group.get("launchTemplate") is None:
        yield (f"{group.label} has capacityType CAPACITY_BLOCK but no launch template; a Capacity Block is used "
               "only through a launch template with instanceMarketOptions.marketType capacity-block, the "
               "block's capacityReservationTarget and its instanceType.", group.urn)
        return
    template = node_group_template(stack, group)
    if template is None:
        return  # the template is not where the program puts it: not judged here
    market = template.get("instanceMarketOptions", "marketType")
    target = template.get("capacityReservationSpecification", "capacityReservationTarget", "capacityReservationId")
    instance_type = template.get("instanceType")
    if UNKNOWN in (market, target, instance_type):
        return
    missing = []
    if market != CAPACITY_BLOCK_MARKET:
        missing.append(f"instanceMarketOptions.marketType capacity-block (has {market or 'none'})")
    if not (isinstance(target, str) and RESERVATION_ID.match(target)):
        missing.append("capacityReservationSpecification.capacityReservationTarget.capacityReservationId "
                       f"naming the block (has {target or 'none'})")
    if not (isinstance(instance_type, str) and instance_type):
        missing.append("instanceType, the block's instance type (has none)")
    if missing:
        yield (f"{group.label} has capacityType CAPACITY_BLOCK but its {template.label} lacks "
               + " and ".join(missing) + "; EKS refuses to create the group. Set them on the launch template.",
               group.urn)


def _reserved(pool: Resource) -> bool:
    requirements = pool.get("spec", "template", "spec", "requirements", default=[])
    for requirement in as_list(requirements) if requirements is not UNKNOWN else []:
        if isinstance(requirement, dict) and requirement.get("key") == "karpenter.sh/capacity-type":
            values = requirement.get("values")
            return requirement.get("operator") == "In" and values is not UNKNOWN and "reserved" in as_list(values)
    return False


def _nodepool_problems(stack: Stack, pool: Resource) -> Iterator[tuple[str, str | None]]:
    if not _reserved(pool):
        return
    ref = pool.get("spec", "template", "spec", "nodeClassRef", default={})
    if not isinstance(ref, dict) or UNKNOWN in ref.values():
        return
    name = ref.get("name")
    if ref.get("group") == AUTO_MODE_NODE_CLASS_GROUP:
        classes = [r for r in stack.of_type(AUTO_MODE_NODE_CLASS) if r.get("metadata", "name") == name]
        if name == "default" and not classes:
            yield (f"{pool.label} admits karpenter.sh/capacity-type reserved on EKS Auto Mode's built-in NodeClass "
                   "'default', which selects no capacity reservation; reserved is never used. Use a NodeClass with "
                   "capacityReservationSelectorTerms.", pool.urn)
            return
    else:
        classes = [r for r in stack.of_type(EC2NODECLASS) if r.get("metadata", "name") == name]
    if len(classes) != 1:
        return  # the class is not in this stack: not judged
    terms = classes[0].get("spec", "capacityReservationSelectorTerms")
    if terms is UNKNOWN:
        return
    if not as_list(terms):
        yield (f"{pool.label} admits karpenter.sh/capacity-type reserved, but {classes[0].label} has no "
               "capacityReservationSelectorTerms, so Karpenter has no reserved offering for it. Select the "
               "reservations (id or tags) on the node class, or drop reserved.", pool.urn)


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    for group in stack.of_type(EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP):
        yield from _group_problems(stack, group)
    for pool in stack.of_type(NODEPOOL):
        yield from _nodepool_problems(stack, pool)


def selector_term_problems(terms: Any) -> Iterator[str]:
    """``spec.capacityReservationSelectorTerms`` against the 1.14.1 CRD: at most 30 terms, each with tags,
    id or instanceMatchCriteria, an id matching ``^cr-[0-9a-z]+$`` and standing alone in its term."""
    if terms is None or terms is UNKNOWN:
        return
    items = as_list(terms)
    if len(items) > 30:
        yield f"spec.capacityReservationSelectorTerms has {len(items)} terms; at most 30"
    for i, term in enumerate(items):
        where = f"spec.capacityReservationSelectorTerms[{i}]"
        if not isinstance(term, dict) or UNKNOWN in term.values():
            continue
        if not any(term.get(k) is not None for k in ("tags", "id", "instanceMatchCriteria")):
            yield f"{where} needs tags, id or instanceMatchCriteria"
        rid = dig(term, "id")
        if rid is not None:
            if not RESERVATION_ID.match(str(rid)):
                yield f"{where}.id '{rid}' is not a capacity reservation id (cr- and lowercase letters or digits)"
            if any(term.get(k) is not None for k in ("tags", "ownerID", "instanceMatchCriteria")):
                yield f"{where} sets id with other fields; an id term stands alone"


POLICIES = [
    stack_policy(
        name="reserved-capacity-usable",
        description=(
            "Make reserved capacity usable: a CAPACITY_BLOCK managed group's launch template sets the capacity-block "
            "market type, the block's reservation target and its instance type, the group lists no instance types "
            "and one subnet (the block's zone); a NodePool admitting reserved has a node class that selects "
            "capacity reservations."
        ),
        check=_check,
        enforcement=MANDATORY,
    ),
]
