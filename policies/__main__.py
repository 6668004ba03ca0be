"""The llm-platform-gpu policy pack: only assembly; each concern lives in its own module.

Served by pulumi_policy as shipped: ``PolicyPack(...)`` starts its gRPC server and serves until stopped.

The CLI runs this file with the pack directory as working directory and first ``sys.path`` entry,
so sibling modules import by their plain names.

The process's collector is set for the work it does (``gc.set_threshold``, the interpreter's own
setting; nothing of pulumi_policy is touched): for every policy and every call, pulumi_policy builds
each resource's properties again as dicts, lists and proxies (about 100 objects per resource, 470,000
on a 500-model stack for each of its 11 stack policies), nearly all freed by reference counting when
the policy returns. With the interpreter's defaults (a young pass every 700 objects, an older one every
10 of those) the collector rescans those live objects over and over: 8 of the 15 s AnalyzeStack takes
on a 500-model stack. With a young pass every 500,000 objects it takes 7 s, and the process's peak
memory does not change (benchmarks/README.md).
"""

import gc

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
    inference_routing,
    karpenter,
    keep_awake,
    pinning,
    reservations,
    scheduling,
    security,
    system_pool,
    weight_streaming,
)
from pulumi_policy import EnforcementLevel, PolicyPack

#: A young collection every this many objects allocated net (the interpreter's default: 700) ...
YOUNG_OBJECTS = 500_000
#: ... the middle generation every 8 young passes, the oldest (which holds the policies, the
#: catalogues and pulumi_policy itself, alive for the whole process) every 100 middle ones.
MIDDLE_PASS_EVERY, OLD_PASS_EVERY = 8, 100

gc.set_threshold(YOUNG_OBJECTS, MIDDLE_PASS_EVERY, OLD_PASS_EVERY)

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
        *weight_streaming.POLICIES,
        *inference_routing.POLICIES,
        *keep_awake.POLICIES,
    ],
)
