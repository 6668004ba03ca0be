"""The llm-platform-gpu policy pack: only assembly; each concern lives in its own module.

Served by pulumi_policy as shipped: ``PolicyPack(...)`` starts its gRPC server and serves until stopped.

The CLI runs this file with the pack directory as working directory and first ``sys.path`` entry,
so sibling modules import by their plain names.
"""

from checks import (
    amis,
    autoscaling,
    capacity_simulation,
    cold_start,
    dra,
    gpu_agents,
    gpu_capacity,
    gpu_labels,
    gpu_taints,
    gpu_workloads,
    karpenter,
    pinning,
    reservations,
    scheduling,
    security,
    system_pool,
)
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(
    name="llm-platform-gpu",
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=[
        *gpu_taints.POLICIES,
        *amis.POLICIES,
        *gpu_labels.POLICIES,
        *gpu_workloads.POLICIES,
        *gpu_agents.POLICIES,
        *pinning.POLICIES,
        *gpu_capacity.POLICIES,
        *karpenter.POLICIES,
        *reservations.POLICIES,
        *security.POLICIES,
        *system_pool.POLICIES,
        *scheduling.POLICIES,
        *autoscaling.POLICIES,
        *dra.POLICIES,
        *capacity_simulation.POLICIES,
        *cold_start.POLICIES,
    ],
)
