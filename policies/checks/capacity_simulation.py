"""Every workload lands, fits, loads and scales: the capacity simulation as stack policies.

The stack's resources go through :mod:`capacity.engine` into the neutral model and
:func:`capacity.simulate` judges them (see that package for the rules and where each figure comes
from). ``capacity-simulation`` reports the blocking findings; ``capacity-overcommit`` reports, as
advice, shared pools whose workloads cannot all peak at once. Stacks that declare no pools
(workloads for a cluster owned elsewhere) are not judged; a stack whose deciding fields are not
known yet (preview) is not judged either.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity import simulate
from capacity.engine import SELF_METRIC_PREFIXES, WORKLOADS, cluster_from_resources, reservations_from_resources
from capacity.kinds import INFERENCE_SERVICE
from capacity.model import Cluster
from capacity.simulate import Simulation, reserved_findings
from lib.catalog import load_catalog
from lib.kit import ADVISORY, MANDATORY, Stack, stack_policy
from lib.resources import (
    ASG_TAG,
    AWS_NODE_GROUP,
    DAEMONSET,
    EC2NODECLASS,
    EKS_ADDON,
    EKS_MANAGED_NODE_GROUP,
    HELM_TYPES,
    LAUNCH_TEMPLATE,
    NODEPOOL,
    RESOURCE_QUOTA,
    SCALED_OBJECT,
)
from lib.values import contains_unknown

#: Inputs that decide the simulation, per resource type; an unknown there means "can't judge".
_DECISIVE: dict[str, tuple[tuple[str, ...], ...]] = {
    EKS_MANAGED_NODE_GROUP: (("instanceTypes",), ("scalingConfig",), ("labels",), ("taints",)),
    AWS_NODE_GROUP: (("instanceTypes",), ("scalingConfig",), ("labels",), ("taints",)),
    # a Capacity Block group's type is its launch template's
    LAUNCH_TEMPLATE: (("instanceType",),),
    NODEPOOL: (("spec",),),
    EC2NODECLASS: (("spec", "kubelet"), ("metadata",)),
    ASG_TAG: (("tag",),),
    SCALED_OBJECT: (("spec",), ("metadata",)),
    RESOURCE_QUOTA: (("spec",), ("metadata",)),
    DAEMONSET: (("spec", "template"),),
    **{t: (("chart",), ("version",), ("values",)) for t in HELM_TYPES},
    **{t: (("spec",), ("metadata",)) for t in (*WORKLOADS, INFERENCE_SERVICE)},
}


def _knowable(stack: Stack) -> bool:
    for resource in stack.resources:
        paths = _DECISIVE.get(resource.type, ())
        if not paths:
            continue
        for path in paths:
            if contains_unknown(resource.get(*path)):
                return False
    return True


#: Every type whose properties the simulation reads: the decisive ones and the EKS add-ons (which agents
#: run as add-ons rather than charts). Other resources count only by URN, type and parent.
_READS = frozenset(_DECISIVE) | {EKS_ADDON}


def stack_simulation(stack: Stack, prefixes: tuple[str, ...] = SELF_METRIC_PREFIXES) -> tuple[Cluster, Simulation] | None:
    """The stack as the capacity model sees it and its simulation, priced for the stack's region; ``None``
    when the stack declares no pools or its deciding fields are not known yet.

    Worked out once per AnalyzeStack call and shared by the stack policies that read it (this module's
    two and ``cold-start-budget``), so each judges the same placement. Readers must not change it.
    """
    def compute() -> tuple[Cluster, Simulation] | None:
        if not _knowable(stack):
            return None
        cluster = cluster_from_resources(stack.resources, self_prefixes=prefixes, catalog=load_catalog())
        if not cluster.pools:
            return None
        # Prices only rank fitting types (cheapest first, unpriced last): no price is borrowed.
        return cluster, simulate(cluster)

    return stack.derived("capacity simulation", prefixes, compute, reads=_READS)


def _findings(stack: Stack, config: dict[str, Any]):
    """The simulation's findings (``None``: not judged), worked out once per stack and metric prefixes."""
    prefixes = tuple(config.get("selfMetricPrefixes") or SELF_METRIC_PREFIXES)

    def judge():
        simulated = stack_simulation(stack, prefixes)
        if simulated is None:
            return None
        _, simulation = simulated
        reservations = reservations_from_resources(stack.resources, catalog=load_catalog())
        return tuple(simulation.findings) + tuple(reserved_findings(simulation, reservations))

    return stack.derived("capacity findings", prefixes, judge)


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    for finding in _findings(stack, config) or []:
        if finding.blocking:
            yield finding.message, finding.workload_key or finding.where_key or None


def _check_overcommit(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    for finding in _findings(stack, config) or []:
        if not finding.blocking:
            yield finding.message, finding.where_key or None


_PARAMS = {
    "selfMetricPrefixes": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "default": list(SELF_METRIC_PREFIXES),
        "description": "Metric name prefixes a model server emits itself; a scale-to-zero trigger that reads only "
                       "these never wakes the model.",
    }
}

POLICIES = [
    stack_policy(
        name="capacity-simulation",
        description=(
            "Make every workload land, fit, load and scale: give each pool a capacity source (and Cluster "
            "Autoscaler node-template tags when it sits at zero), size pods within a node's allocatable after "
            "DaemonSets, keep min and max replicas within pool maximums and GPU limits, keep vLLM's tensor-parallel "
            "size within the pod's GPUs, fit model weights plus KV cache in GPU memory, cover max replicas plus "
            "surge in quotas, and wake scale-to-zero models from outside their pods."
        ),
        check=_check,
        enforcement=MANDATORY,
        params=_PARAMS,
    ),
    stack_policy(
        name="capacity-overcommit",
        description="Know which shared pools cannot hold every workload at max replicas at once (reported, not refused).",
        check=_check_overcommit,
        enforcement=ADVISORY,
        params=_PARAMS,
    ),
]
