"""The simulation's GPU-memory judgement (policies/capacity/simulate.py) as a specification, on
hand-written resources in engine form: a model is judged on the GPUs of the node types its pod fits
(not on a larger GPU of a type it cannot land on), and the finding names the GPU's size in GiB
(catalog: A10G 22888 MiB = 22.4 GiB, L40S 45776 MiB = 44.7 GiB, H100 81920 MiB = 80.0 GiB).
"""

from __future__ import annotations

from types import SimpleNamespace

from policies.capacity.engine import cluster_from_resources
from policies.capacity.simulate import simulate

KARPENTER = SimpleNamespace(type="kubernetes:helm.sh/v3:Release", name="karpenter", urn="urn:karpenter", parent="",
                            props={"chart": "karpenter", "version": "1.8.0"})


def node_pool(name: str, types: list[str]) -> SimpleNamespace:
    spec = {"limits": {"nvidia.com/gpu": 64}, "template": {"metadata": {"labels": {"llm-platform.io/pool": name}}, "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}]}}}
    return SimpleNamespace(type="kubernetes:karpenter.sh/v1:NodePool", name=name, urn=f"urn:pool:{name}", parent="",
                           props={"metadata": {"name": name}, "spec": spec})


def vllm(model: str, pool: str, cpu: str, gpus: int = 1, tp: int = 1) -> SimpleNamespace:
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.33.0",
                 "args": ["--model", model, "--max-model-len", "8192", "--tensor-parallel-size", str(tp)],
                 "resources": {"requests": {"cpu": cpu, "memory": "16Gi", "nvidia.com/gpu": str(gpus)},
                               "limits": {"memory": "16Gi", "nvidia.com/gpu": str(gpus)}}}
    pod = {"nodeSelector": {"llm-platform.io/pool": pool}, "containers": [container]}
    return SimpleNamespace(type="kubernetes:apps/v1:Deployment", name="llm", urn="urn:llm", parent="", props={
        "metadata": {"name": "llm", "namespace": "serving"}, "spec": {"replicas": 1, "template": {"spec": pod}}})


def memory_findings(*resources) -> list:
    found = simulate(cluster_from_resources([KARPENTER, *resources])).findings
    return [f for f in found if f.check == "model-memory"]


def test_gpu_memory_is_judged_on_the_types_the_pod_fits():
    """A 6-CPU pod fits the g5.2xlarge (8 vCPU, A10G) of the pool, not its g6e.xlarge (4 vCPU, L40S):
    Llama 3.1 70B AWQ does not load in 0.9 of an A10G, whatever the L40S could hold."""
    (finding,) = memory_findings(node_pool("mixed", ["g5.2xlarge", "g6e.xlarge"]),
                                 vllm("llama-3.1-70b-instruct-awq", "mixed", cpu="6"))
    assert (finding.where, finding.resource, finding.have) == ("mixed", "gpu-memory", "20.1 GiB")
    assert "0.9 of a 22.4 GiB GPU on 'mixed' is 20.1 GiB: it will not load" in finding.message
    # with a pod that fits the g6e.xlarge too, the L40S holds it
    assert memory_findings(node_pool("mixed", ["g5.2xlarge", "g6e.xlarge"]),
                           vllm("llama-3.1-70b-instruct-awq", "mixed", cpu="3")) == []


def test_the_finding_names_the_gpu_in_gib():
    """Llama 3.1 70B in bf16 (about 131 GiB of weights) on one H100: 0.9 of 80.0 GiB is 72.0 GiB."""
    (finding,) = memory_findings(node_pool("h100", ["p5.48xlarge"]), vllm("llama-3.1-70b-instruct", "h100", cpu="8"))
    assert (finding.where, finding.have) == ("h100", "72.0 GiB")
    assert "0.9 of a 80.0 GiB GPU on 'h100' is 72.0 GiB: it will not load" in finding.message


def test_a_model_that_fits_no_pool_is_judged_on_the_first_pool_it_selects():
    """A pod with no node selector and 999 CPUs is a candidate for both pools and fits neither; its model is
    still judged (as if it landed) on the first candidate, the A10G pool: Llama 3.1 70B AWQ does not load in
    0.9 of an A10G, though the second pool's L40S would hold it."""
    pod = vllm("llama-3.1-70b-instruct-awq", "any", cpu="999")
    del pod.props["spec"]["template"]["spec"]["nodeSelector"]
    (finding,) = memory_findings(node_pool("a10g", ["g5.2xlarge"]), node_pool("l40s", ["g6e.xlarge"]), pod)
    assert (finding.where, finding.resource, finding.have) == ("a10g", "gpu-memory", "20.1 GiB")
