"""Edges of the simulation stated as literals (found by mutation testing of policies/capacity/simulate.py):
a pod that fits the pool only on a type other than the one replicas are planned on, a reserved-only pool
after a pool with a fallback, and what the wake-up finding says about the triggers it read.

Figures (instance_catalog.json, EKS allocatable): g6.12xlarge has 4 GPUs and 48 vCPUs, g6.16xlarge 1 GPU
and 64 vCPUs; g5.xlarge 1 GPU.
"""

from __future__ import annotations

from policies.capacity.cost import Reservation
from policies.capacity.instances import Resources, load_instances
from policies.capacity.model import Cluster, ModelServing, Pool, Selection, Workload
from policies.capacity.simulate import reserved_findings, simulate

CATALOG = load_instances()


def pool(name: str, *types: str, kind: str = "Managed node group", source: str = "Cluster Autoscaler",
         flexible: dict | None = None) -> Pool:
    return Pool(name=name, kind=kind, instances=[CATALOG.instances[t] for t in types], labels={}, taints=[],
                min_nodes=1, max_nodes=10, capacity_source=source, flexible=flexible or {}, key=f"urn:{name}")


def workload(name: str, gpus: int, replicas: int, cpu_m: float, **extra) -> Workload:
    requests = Resources(cpu_m=cpu_m, memory_mib=8192, gpus=gpus, pods=1)
    return Workload(name=name, kind="Deployment", namespace="llm", requests=requests, limits=requests,
                    tolerations=[], selection=extra.pop("selection", Selection.of()), min_replicas=replicas,
                    max_replicas=replicas, **extra)


def test_pods_that_fit_only_another_type_each_count_a_node_and_the_rest_still_pack():
    """A managed group plans on its roomiest type (g6.12xlarge, 4 GPUs). 'wide' needs 60 CPUs: it fits the
    group's g6.16xlarge (1 GPU, 64 vCPUs), not a g6.12xlarge, so each of its 2 replicas counts one node of its
    own; 'narrow' (1 GPU, 4 CPUs, 5 replicas) packs 4 + 1 onto 2 more: 4 nodes at min and at max."""
    cluster = Cluster(pools=[pool("gpu", "g6.12xlarge", "g6.16xlarge")],
                      workloads=[workload("wide", 1, 2, 60000), workload("narrow", 1, 5, 4000)])
    [plan] = simulate(cluster).plans
    assert plan.planning.instance.name == "g6.12xlarge"
    assert [w.name for w in plan.workloads] == ["wide", "narrow"]
    assert (plan.nodes_at_min, plan.nodes_at_max) == (4, 4)


def test_a_reserved_only_pool_after_one_with_a_fallback_is_still_judged():
    """Two Karpenter pools; the second admits only reserved capacity, whose one reservation holds 2 g5.xlarge
    (2 GPUs), and its workload needs 3 at min replicas: one blocking finding, for the second pool."""
    karpenter = {"kind": "Karpenter NodePool", "source": "Karpenter"}
    fallback = pool("a-on-demand", "g5.xlarge", flexible={"karpenter.sh/capacity-type": frozenset({"on-demand"})},
                    **karpenter)
    reserved = pool("b-reserved", "g5.xlarge", flexible={"karpenter.sh/capacity-type": frozenset({"reserved"})},
                    **karpenter)
    first = workload("first", 1, 1, 2000, selection=Selection.of({"pool": "a"}))
    second = workload("second", 1, 3, 2000, selection=Selection.of({"pool": "b"}))
    fallback.labels, reserved.labels = {"pool": "a"}, {"pool": "b"}
    simulation = simulate(Cluster(pools=[fallback, reserved], workloads=[first, second]))
    held = [("urn:b-reserved", Reservation("cr-0abc", "default", "g5.xlarge", 2, "us-east-1a"),
             CATALOG.instances["g5.xlarge"])]
    found = [(f.check, f.where, f.need, f.have, f.blocking) for f in reserved_findings(simulation, held)]
    assert found == [("reserved", "b-reserved", "3", "2", True)]


def test_the_wake_up_finding_names_what_the_triggers_read():
    names = {"prometheus on vllm:num_requests_waiting": "(prometheus on vllm:num_requests_waiting)",
             "": "(no external trigger)"}
    for detail, quoted in names.items():
        idle = workload("idle", 1, 0, 2000, scale_to_zero=True, wake_signal=False, wake_detail=detail)
        [finding] = [f for f in simulate(Cluster(pools=[pool("gpu", "g5.xlarge")], workloads=[idle])).findings
                     if f.check == "wake-up"]
        assert f"idle may scale to zero but every trigger reads only what its own pods emit {quoted}, so once at " \
               "zero nothing wakes it." in finding.message
        assert finding.have == (detail or "only self-signals")


# --- replica bounds, multi-GPU reservations, a context past the model's positions ------------------------


def test_max_replicas_equal_to_min_add_no_nodes():
    """g5.xlarge holds one 1-GPU pod: min = max = 2 plans 2 nodes at both ends; max 3 plans a third."""
    fixed = simulate(Cluster(pools=[pool("gpu", "g5.xlarge")], workloads=[workload("fixed", 1, 2, 2000)]))
    assert (fixed.plans[0].nodes_at_min, fixed.plans[0].nodes_at_max) == (2, 2)
    growing = workload("growing", 1, 2, 2000)
    growing.max_replicas = 3
    grows = simulate(Cluster(pools=[pool("gpu", "g5.xlarge")], workloads=[growing]))
    assert (grows.plans[0].nodes_at_min, grows.plans[0].nodes_at_max) == (2, 3)


def _reserved_g5_12xlarge(min_replicas: int):
    karpenter = {"kind": "Karpenter NodePool", "source": "Karpenter"}
    reserved = pool("reserved", "g5.12xlarge", flexible={"karpenter.sh/capacity-type": frozenset({"reserved"})},
                    **karpenter)
    simulation = simulate(Cluster(pools=[reserved], workloads=[workload("llm", 1, min_replicas, 2000)]))
    held = [("urn:reserved", Reservation("cr-0abc", "default", "g5.12xlarge", 2, "us-east-1a"),
             CATALOG.instances["g5.12xlarge"])]
    return [(f.check, f.need, f.have, f.blocking) for f in reserved_findings(simulation, held)]


def test_a_reservation_of_multi_gpu_instances_holds_count_times_their_gpus():
    """2 x g5.12xlarge (4 A10G each) hold 8 GPUs: 8 one-GPU replicas fit, a 9th does not."""
    assert _reserved_g5_12xlarge(8) == []
    assert _reserved_g5_12xlarge(9) == [("reserved", "9", "8", True)]


def test_a_max_model_len_past_the_models_positions_is_a_finding():
    """Llama 3.1 8B has 131072 positions (config.json max_position_embeddings): 131072 passes, 131073 does not."""
    from policies.capacity.llm import model_catalog

    arch = model_catalog()["llama-3.1-8b-instruct"]
    assert arch.max_position_embeddings == 131072

    def findings(length: int) -> list[tuple[str, str, str]]:
        served = workload("llama", 1, 1, 2000, model=ModelServing(arch, length, 1, 0.9))
        simulation = simulate(Cluster(pools=[pool("gpu", "p4d.24xlarge")], workloads=[served]))
        return [(f.need, f.have, f.message) for f in simulation.findings if f.resource == "max-model-len"]

    assert findings(131072) == []
    assert findings(131073) == [("131073", "131072", "llama sets max-model-len 131073 above llama-3.1-8b-instruct's "
                                                      "131072 positions; vLLM refuses to start. Lower maxModelLen.")]
