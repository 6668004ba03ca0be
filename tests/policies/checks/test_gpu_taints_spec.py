"""gpu-pools-tainted, as a specification: with several GPU-key taints, the message names the one
that is misspelled, not whichever sorts last."""

from __future__ import annotations

from tests.policies.builders import nodepool, patch
from tests.policies.conftest import one

POLICY = "gpu-pools-tainted"




def test_a_misspelled_no_schedule_beside_a_soft_taint(pack):
    taints = [{"key": "nvidia.com/gpu", "value": "true", "effect": "PreferNoSchedule"},
              {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    message = one(pack.messages(patch(nodepool(), {"spec.template.spec.taints": taints}), POLICY),
                  "NodePool 'gpu-inference' selects GPU capacity but spells the effect 'NO_SCHEDULE', which the "
                  "Kubernetes API does not accept.")
    assert "'PreferNoSchedule'" not in message
