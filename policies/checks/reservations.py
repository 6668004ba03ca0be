"""Reserved capacity (Capacity Blocks for ML, On-Demand Capacity Reservations) that could never be used.

- A managed node group with ``capacityType: CAPACITY_BLOCK`` is created by EKS only in this shape (EKS user
  guide, "Create a managed node group with Capacity Blocks for ML"; otherwise "the create request will be
  rejected"): a launch template with ``instanceMarketOptions.marketType: capacity-block``, a
  ``capacityReservationSpecification.capacityReservationTarget.capacityReservationId`` naming the block and
  the block's ``instanceType``; no ``instanceTypes`` on the group (a template that sets the type forbids them
  there, EKS user guide, "Customize managed nodes with launch templates"; terraform-aws-eks
  ``modules/eks-managed-node-group/main.tf`` sets ``instance_types = null`` for ``CAPACITY_BLOCK``); and
  only the subnet in the block's Availability Zone.
- A Capacity Block group's ``maxSize`` beyond the block's instance count never launches the rest, and after
  the block's end (recorded in the group's reservation tag) EC2 launches nothing from it; a NodePool that
  admits only ``reserved`` on blocks that have all ended launches nothing either. The day is today (UTC) or
  ``LLM_PLATFORM_TODAY``, as for the program's settings.
- A NodePool that admits ``karpenter.sh/capacity-type: reserved`` gets reserved offerings only from the
  reservations its node class selects (``capacityReservationSelectorTerms`` on the EC2NodeClass; Karpenter
  docs, tasks/odcrs). Without terms ``reserved`` is dead; EKS Auto Mode's built-in ``default`` NodeClass
  selects none.

The launch template of a group is found as the program and pulumi-eks lay it out: a sibling of the group
under the component that owns it (``lib.pools.node_group_template``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

from capacity.cost import CAPACITY_BLOCK as CAPACITY_BLOCK_RESERVATION
from capacity.cost import RESERVATION_KEY, Reservation, parse_reservations
from lib.catalog import load_catalog
from lib.kit import MANDATORY, Stack, stack_policy
from lib.pools import node_group_template
from lib.resources import AWS_NODE_GROUP, EC2NODECLASS, EKS_MANAGED_NODE_GROUP, NODEPOOL, Resource
from lib.values import UNKNOWN, as_list, contains_unknown, dig

#: Karpenter 1.14.1's EC2NodeClass CRD, ``capacityReservationSelectorTerms[].id``.
RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")
#: The same CRD: ``ownerID`` and ``instanceMatchCriteria`` of a selector term.
OWNER_ID = re.compile(r"^[0-9]{12}$")
MATCH_CRITERIA = ("open", "targeted")
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


def _today() -> date:
    """The day blocks are judged on: today (UTC), or ``LLM_PLATFORM_TODAY`` (YYYY-MM-DD), the same day and
    override the program's settings judge a block's end on."""
    override = os.environ.get("LLM_PLATFORM_TODAY", "")
    try:
        return date.fromisoformat(override) if override else datetime.now(UTC).date()
    except ValueError:
        return datetime.now(UTC).date()


def _ended(reservation: Reservation) -> bool:
    """A Capacity Block whose recorded end is before today: EC2 gives no instances from it any more."""
    if reservation.type != CAPACITY_BLOCK_RESERVATION or not reservation.end:
        return False
    try:
        end = datetime.fromisoformat(reservation.end.replace("Z", "+00:00")).date()
    except ValueError:
        return False
    return end < _today()


def _block_size_problems(group: Resource) -> Iterator[str]:
    """Against the block the group records (its reservation tag): more nodes than the block holds never
    launch, and a block that has ended launches none."""
    max_size = group.get("scalingConfig", "maxSize")
    for block in parse_reservations(group.get("tags", RESERVATION_KEY)):
        if block.type != CAPACITY_BLOCK_RESERVATION:
            continue
        if isinstance(max_size, (int, float)) and not isinstance(max_size, bool) and max_size > block.count:
            yield (f"can grow to {max_size:g} nodes, but its Capacity Block {block.id} holds {block.count} x "
                   f"{block.instance_type}: the nodes beyond {block.count} never launch (Cluster Autoscaler keeps "
                   f"retrying them). Set scalingConfig.maxSize to {block.count}")
        if _ended(block):
            yield (f"launches into Capacity Block {block.id}, which ended on {block.end}: EC2 gives no instances "
                   "from it any more. Buy a new block and point the group at it, or remove the group")


def _group_problems(stack: Stack, group: Resource) -> Iterator[tuple[str, str | None]]:
    if group.get("capacityType") != "CAPACITY_BLOCK":
        return
    if group.type == EKS_MANAGED_NODE_GROUP and any(
            r.type == AWS_NODE_GROUP and group.urn in stack.ancestors(r) for r in stack.resources):
        return  # judged at its aws:eks NodeGroup child, which a real preview shows
    for problem in _group_shape_problems(group):
        yield f"{group.label} has capacityType CAPACITY_BLOCK but {problem}.", group.urn
    for problem in _block_size_problems(group):
        yield f"{group.label} {problem}.", group.urn
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


def _capacity_values(pool: Resource) -> list[Any] | None:
    """The values of the NodePool's ``karpenter.sh/capacity-type`` In requirement (None: none known)."""
    requirements = pool.get("spec", "template", "spec", "requirements", default=[])
    for requirement in as_list(requirements) if requirements is not UNKNOWN else []:
        if isinstance(requirement, dict) and requirement.get("key") == "karpenter.sh/capacity-type":
            values = requirement.get("values")
            if requirement.get("operator") == "In" and values is not UNKNOWN:
                return as_list(values)
    return None


def _reserved_only(pool: Resource) -> bool:
    return _capacity_values(pool) == ["reserved"]


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
        return
    blocks = parse_reservations(classes[0].get("metadata", "annotations", RESERVATION_KEY))
    if _reserved_only(pool) and blocks:
        requirements = pool.get("spec", "template", "spec", "requirements", default=[])
        admitted = None if requirements is UNKNOWN else load_catalog().selectable(as_list(requirements))
        if admitted is not None:
            names = {instance.name for instance in admitted}
            if all(b.instance_type not in names for b in blocks):
                yield (f"{pool.label} launches only reserved capacity, but its requirements admit none of the "
                       f"instance types {classes[0].label}'s reservations hold "
                       f"({', '.join(sorted({b.instance_type for b in blocks}))}): Karpenter never launches into them "
                       "and the NodePool launches nothing. Admit the reserved type in its requirements.", pool.urn)
                return
    if _reserved_only(pool) and blocks and all(_ended(b) for b in blocks):
        yield (f"{pool.label} launches only reserved capacity, and every reservation {classes[0].label} records "
               f"({', '.join(f'{b.id} ended {b.end}' for b in blocks)}) is a Capacity Block that has ended: it can "
               "launch nothing. Select a current reservation, or admit spot or on-demand too.", pool.urn)


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    for group in stack.of_type(EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP):
        yield from _group_problems(stack, group)
    for pool in stack.of_type(NODEPOOL):
        yield from _nodepool_problems(stack, pool)


def selector_term_problems(terms: Any) -> Iterator[str]:
    """``spec.capacityReservationSelectorTerms`` against the 1.14.1 CRD (karpenter.k8s.aws_ec2nodeclasses.yaml),
    as the API server applies it: at most 30 terms; each with tags, id or instanceMatchCriteria; ``id``
    matching ``^cr-[0-9a-z]+$``, ``ownerID`` ``^[0-9]{12}$``, ``instanceMatchCriteria`` ``open`` or
    ``targeted``; at most 20 tags, none with an empty key or value.

    The id rule as the engine has it, not as its message reads: the CRD's CEL rule is
    ``!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))``, so the
    API server refuses the list only when EVERY term pairs an id with other fields; a list where one term
    does and another does not is admitted (the message, "'id' is mutually exclusive", suggests any term)."""
    if terms is None or terms is UNKNOWN:
        return
    items = as_list(terms)
    if len(items) > 30:
        yield f"spec.capacityReservationSelectorTerms has {len(items)} terms; at most 30"
    known = [t for t in items if isinstance(t, dict) and UNKNOWN not in t.values()]
    for i, term in enumerate(items):
        where = f"spec.capacityReservationSelectorTerms[{i}]"
        if not isinstance(term, dict) or UNKNOWN in term.values():
            continue
        if not any(term.get(k) is not None for k in ("tags", "id", "instanceMatchCriteria")):
            yield f"{where} needs tags, id or instanceMatchCriteria"
        rid = dig(term, "id")
        if rid is not None and not RESERVATION_ID.match(str(rid)):
            yield f"{where}.id '{str(rid)[:40]}' is not a capacity reservation id (cr- and lowercase letters or digits)"
        owner = term.get("ownerID")
        if owner is not None and not (isinstance(owner, str) and OWNER_ID.match(owner)):
            yield f"{where}.ownerID '{str(owner)[:40]}' is not an AWS account id (12 digits)"
        criteria = term.get("instanceMatchCriteria")
        if criteria is not None and criteria not in MATCH_CRITERIA:
            yield f"{where}.instanceMatchCriteria '{str(criteria)[:40]}' is not one of {', '.join(MATCH_CRITERIA)}"
        tags = term.get("tags")
        if isinstance(tags, dict):
            if len(tags) > 20:
                yield f"{where}.tags has {len(tags)} tags; at most 20"
            if any(k == "" or v == "" for k, v in tags.items()):
                yield f"{where}.tags has an empty key or value; the CRD refuses them"
    if known and len(known) == len(items) and all(
            t.get("id") is not None and any(t.get(k) is not None for k in ("tags", "ownerID", "instanceMatchCriteria"))
            for t in known):
        yield ("spec.capacityReservationSelectorTerms: every term sets id with other fields; the CRD refuses the "
               "list ('id' is mutually exclusive): give the id a term of its own")


POLICIES = [
    stack_policy(
        name="reserved-capacity-usable",
        description=(
            "Make reserved capacity usable: a CAPACITY_BLOCK managed group's launch template sets the capacity-block "
            "market type, the block's reservation target and its instance type, the group lists no instance types "
            "and one subnet (the block's zone), grows no larger than the block and launches into a block that has "
            "not ended; a NodePool admitting reserved has a node class that selects capacity reservations, and one "
            "admitting only reserved has a current one."
        ),
        check=_check,
        enforcement=MANDATORY,
    ),
]
