"""Karpenter v1 objects that the API server (or Karpenter) would reject, caught at preview.

Rules follow the karpenter.sh_nodepools / karpenter.k8s.aws_ec2nodeclasses CRDs of Karpenter
1.14.1: enum and pattern values, the schedule/duration pairing of budgets, the required
``consolidateAfter`` of a written ``disruption`` block, and v1beta1 leftovers (``WhenUnderutilized``,
``kubelet`` on the NodePool, ``disruption.expireAfter``) that seeds still carry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lib.kit import MANDATORY, resource_policy
from lib.resources import EC2NODECLASS, LEGACY_KARPENTER_TYPES, NODEPOOL, Resource
from lib.values import UNKNOWN, as_int, as_list, dig, fmt

from checks.reservations import selector_term_problems

CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
REASONS = ("Underutilized", "Empty", "Drifted")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
CONSOLIDATE_AFTER = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
SCHEDULE = re.compile(r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$")
EXPIRE_AFTER = CONSOLIDATE_AFTER


def _known(value: Any) -> bool:
    return value is not None and value is not UNKNOWN


def _nodepool_problems(resource: Resource) -> Iterator[str]:
    spec = resource.get("spec", default={})
    if spec is UNKNOWN:
        return
    disruption = dig(spec, "disruption")
    if isinstance(disruption, dict):
        policy = disruption.get("consolidationPolicy")
        if policy == "WhenUnderutilized":
            yield ("spec.disruption.consolidationPolicy 'WhenUnderutilized' is the v1beta1 value; use "
                   "'WhenEmptyOrUnderutilized'")
        elif _known(policy) and policy not in CONSOLIDATION_POLICIES:
            yield f"spec.disruption.consolidationPolicy '{policy}' is not one of {', '.join(CONSOLIDATION_POLICIES)}"
        after = disruption.get("consolidateAfter")
        if after is None:
            yield "spec.disruption has no consolidateAfter, which v1 requires once disruption is written (e.g. '5m' or 'Never')"
        elif after is not UNKNOWN and not CONSOLIDATE_AFTER.match(str(after)):
            yield f"spec.disruption.consolidateAfter '{after}' is not a duration like '30s', '5m', '1h30m' or 'Never'"
        if disruption.get("expireAfter") is not None:
            yield "spec.disruption.expireAfter is a v1beta1 field; v1 moved it to spec.template.spec.expireAfter"
        budgets = disruption.get("budgets")
        for i, budget in enumerate(as_list(budgets) if budgets is not UNKNOWN else []):
            yield from _budget_problems(i, budget)
    weight = dig(spec, "weight")
    weight_number = as_int(weight)
    if _known(weight) and not (weight_number is not None and 1 <= weight_number <= 100):
        yield f"spec.weight {fmt(weight)} is not an integer from 1 to 100"
    replicas = dig(spec, "replicas")
    if _known(replicas):
        if _known(weight):
            yield "spec.weight is not supported on static NodePools (spec.replicas set)"
        limits = dig(spec, "limits")
        if isinstance(limits, dict) and set(limits) - {"nodes"}:
            yield "static NodePools (spec.replicas set) support only limits.nodes"
    template_spec = dig(spec, "template", "spec")
    if template_spec is UNKNOWN:
        return
    template_spec = template_spec if isinstance(template_spec, dict) else {}
    ref = template_spec.get("nodeClassRef")
    if ref is not UNKNOWN:
        missing = [k for k in ("group", "kind", "name") if not (isinstance(ref, dict) and ref.get(k) not in (None, ""))]
        if missing:
            yield (f"spec.template.spec.nodeClassRef lacks {', '.join(missing)}; v1 needs "
                   f"{{group: karpenter.k8s.aws, kind: EC2NodeClass, name: <nodeclass>}}")
    requirements = template_spec.get("requirements")
    if requirements is None:
        yield "spec.template.spec.requirements is required in v1"
    for i, requirement in enumerate(as_list(requirements) if requirements is not UNKNOWN else []):
        yield from _requirement_problems(i, requirement)
    if template_spec.get("kubelet") is not None:
        yield "spec.template.spec.kubelet is a v1beta1 field; v1 moved kubelet settings to the EC2NodeClass"
    expire = template_spec.get("expireAfter")
    if _known(expire) and not EXPIRE_AFTER.match(str(expire)):
        yield f"spec.template.spec.expireAfter '{expire}' is not a duration like '720h' or 'Never'"


def _budget_problems(i: int, budget: Any) -> Iterator[str]:
    if not isinstance(budget, dict):
        return
    where = f"spec.disruption.budgets[{i}]"
    nodes = budget.get("nodes")
    if nodes is None:
        yield f"{where}.nodes is required (e.g. '10%' or '2')"
    elif isinstance(nodes, (int, float)) and not isinstance(nodes, bool):
        yield f"{where}.nodes is the number {fmt(nodes)}, but the CRD types it as a string; write '{fmt(nodes)}'"
    elif nodes is not UNKNOWN and not BUDGET_NODES.match(str(nodes)):
        yield f"{where}.nodes '{fmt(nodes)}' must be a node count ('2') or a percentage ('10%')"
    schedule, duration = budget.get("schedule"), budget.get("duration")
    if (schedule is None) != (duration is None):
        yield f"{where} sets {'schedule' if schedule is not None else 'duration'} without " \
              f"{'duration' if schedule is not None else 'schedule'}; they must be set together"
    if _known(duration) and not BUDGET_DURATION.match(str(duration)):
        yield f"{where}.duration '{duration}' must be hours and/or minutes like '9h', '15h30m' or '30m'"
    if _known(schedule) and not SCHEDULE.match(str(schedule)):
        yield f"{where}.schedule '{schedule}' is not a 5-field cron expression or @daily-style macro"
    reasons = budget.get("reasons")
    for reason in as_list(reasons) if reasons is not UNKNOWN else []:
        if _known(reason) and reason not in REASONS:
            yield f"{where}.reasons has '{reason}'; allowed are {', '.join(REASONS)}"


def _requirement_problems(i: int, requirement: Any) -> Iterator[str]:
    if not isinstance(requirement, dict):
        return
    where = f"spec.template.spec.requirements[{i}]"
    operator, values = requirement.get("operator"), requirement.get("values")
    if not _known(operator) or values is UNKNOWN:
        return
    if operator not in OPERATORS:
        yield f"{where}.operator '{operator}' is not one of {', '.join(OPERATORS)}"
    elif operator == "In" and not as_list(values):
        yield f"{where} uses In without values"
    elif operator in ("Gt", "Lt", "Gte", "Lte"):
        items = as_list(values)
        bound = as_int(items[0]) if len(items) == 1 else None
        if bound is None or bound < 0:
            yield f"{where} uses {operator}, which needs exactly one non-negative integer value"


def _nodeclass_problems(resource: Resource) -> Iterator[str]:
    spec = resource.get("spec", default={})
    if not isinstance(spec, dict):
        return
    role, profile = spec.get("role"), spec.get("instanceProfile")
    if UNKNOWN not in (role, profile) and (role is None) == (profile is None):
        yield "spec must set exactly one of role and instanceProfile"
    terms = spec.get("amiSelectorTerms")
    if terms is None:
        yield "spec.amiSelectorTerms is required (e.g. [{alias: al2023@v20251117}])"
    elif terms is not UNKNOWN:
        items = [t for t in as_list(terms) if isinstance(t, dict)]
        if any("alias" in t for t in items) and (
            len(items) != 1 or sum(v is not None for v in items[0].values()) != 1
        ):
            yield "an amiSelectorTerms alias term must stand alone (one term, no other fields)"
    for field_name in ("subnetSelectorTerms", "securityGroupSelectorTerms"):
        if spec.get(field_name) is None:
            yield f"spec.{field_name} is required (select by the cluster's discovery tag)"
    yield from selector_term_problems(spec.get("capacityReservationSelectorTerms"))


def _check(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    if resource.type in LEGACY_KARPENTER_TYPES:
        api = resource.type.split(":")[1]
        yield (f"{resource.label} uses {api}, which Karpenter 1.x no longer serves. Rewrite it as a "
               f"karpenter.sh/v1 NodePool or karpenter.k8s.aws/v1 EC2NodeClass.")
        return
    problems = list(_nodepool_problems(resource) if resource.type == NODEPOOL else _nodeclass_problems(resource))
    if problems:
        yield f"{resource.label} is not a valid Karpenter v1 object: " + "; ".join(problems) + "."


POLICIES = [
    resource_policy(
        name="karpenter-v1-valid",
        description=(
            "Fix Karpenter NodePools and EC2NodeClasses to the v1 schema (consolidation policy, budgets, "
            "durations, weight, nodeClassRef)."
        ),
        types=LEGACY_KARPENTER_TYPES | {NODEPOOL, EC2NODECLASS},
        check=_check,
        enforcement=MANDATORY,
    ),
]
