"""dra-workloads-on-managed-nodes, as a specification: every DRA workload is judged, after any number
of workloads that use no DRA."""

from __future__ import annotations

from tests.policies.builders import UNKNOWN, nodepool, patch, template_path, workload
from tests.policies.conftest import one

DRA = "dra-workloads-on-managed-nodes"
SPEC = template_path("Deployment")


def test_a_dra_workload_after_one_without_claims_is_judged(pack):
    plain = workload(name="plain", gpus=None)
    dra = patch(workload(name="claims", gpus=None, selector={"karpenter.sh/nodepool": "gpu-inference"}),
                {f"{SPEC}.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]})
    message = one(pack.stack_messages([nodepool(), plain, dra], DRA),
                  "Deployment 'claims' uses DRA resourceClaims but selects nodes by karpenter.sh/nodepool; Karpenter "
                  "cannot provision for DRA pods. Select a managed node group's labels instead.")
    assert "'plain'" not in message
    assert pack.stack_messages([nodepool(), plain], DRA) == []


def test_a_dra_workload_after_one_whose_selection_is_not_known_yet_is_judged(pack):
    unknown = patch(workload(name="unknown", gpus=None, selector={}),
                    {f"{SPEC}.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     f"{SPEC}.nodeSelector": UNKNOWN})
    dra = patch(workload(name="claims", gpus=None, selector={"karpenter.sh/nodepool": "gpu-inference"}),
                {f"{SPEC}.resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]})
    message = one(pack.stack_messages([nodepool(), unknown, dra], DRA), "Deployment 'claims' uses DRA resourceClaims")
    assert "'unknown'" not in message
