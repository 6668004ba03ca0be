"""DRA workloads (``spec.resourceClaims``) run on managed node groups, never on Karpenter.

Karpenter cannot simulate Dynamic Resource Allocation, so it never provisions a node for a pod
with resource claims; such a pod that can land on a NodePool waits forever. It must select a
managed node group (scaled by Cluster Autoscaler) and tolerate that group's taints.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lib.kit import MANDATORY, Stack, stack_policy, stack_workloads
from lib.placement import node_selection, pod_uses_key
from lib.pools import Pool, labels_match, stack_pools, untolerated_taints

from checks.gpu_workloads import uses_dra


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    pools = stack_pools(stack)
    for template in stack_workloads(stack, config):
        resource = template.resource
        if not isinstance(template.spec, dict) or not uses_dra(template):
            continue
        alternatives = node_selection(template.spec)
        if alternatives is None:
            continue
        if pod_uses_key(alternatives, "karpenter.sh/nodepool"):
            yield (f"{template.label} uses DRA resourceClaims but selects nodes by karpenter.sh/nodepool; Karpenter "
                   f"cannot provision for DRA pods. Select a managed node group's labels instead.", resource.urn)
            continue
        reachable: list[Pool] = []
        managed: list[Pool] = []
        undecided = False
        for pool in pools:
            labels_ok, _ = labels_match(pool, alternatives)
            missing = untolerated_taints(pool, template.tolerations)
            if labels_ok is None or missing is None:
                undecided = True
                continue
            if labels_ok and not missing:
                (reachable if pool.karpenter else managed).append(pool)
        if reachable:
            names = ", ".join(p.label for p in reachable)
            yield (f"{template.label} uses DRA resourceClaims and can be placed on {names}, where Karpenter will "
                   f"never provision for it. Narrow its node selector to a managed node group's labels.", resource.urn)
        elif not managed and not undecided:
            yield (f"{template.label} uses DRA resourceClaims but no managed node group in the stack matches its "
                   f"node selection and tolerations. Add a managed node group for DRA workloads and select it.",
                   resource.urn)


POLICIES = [
    stack_policy(
        name="dra-workloads-on-managed-nodes",
        description="Schedule pods with DRA resourceClaims only onto managed node groups, never Karpenter NodePools.",
        check=_check,
        enforcement=MANDATORY,
        custom_workloads=True,
    ),
]
