"""The llm-platform-gpu policy pack: only assembly; each concern lives in its own module.

The CLI runs this file with the pack directory as working directory and first ``sys.path`` entry,
so sibling modules import by their plain names.
"""

from pulumi_policy import EnforcementLevel, PolicyPack

import autoscaling
import capacity_simulation
import dra
import gpu_agents
import gpu_capacity
import gpu_labels
import gpu_taints
import gpu_workloads
import karpenter_validity
import pinning
import reliability
import request_cache
import scheduling
import security

request_cache.install()

PolicyPack(
    name="llm-platform-gpu",
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=[
        *gpu_taints.POLICIES,
        *gpu_labels.POLICIES,
        *gpu_workloads.POLICIES,
        *gpu_agents.POLICIES,
        *pinning.POLICIES,
        *gpu_capacity.POLICIES,
        *karpenter_validity.POLICIES,
        *security.POLICIES,
        *reliability.POLICIES,
        *scheduling.POLICIES,
        *autoscaling.POLICIES,
        *dra.POLICIES,
        *capacity_simulation.POLICIES,
    ],
)
