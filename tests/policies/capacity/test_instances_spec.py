"""Instance facts (policies/capacity/instances.py) as a specification: Karpenter's well-known labels of
a node, and allocatable by EKS's AL2023 bootstrap (awslabs/amazon-eks-ami nodeadm kubelet config), the
figures worked by hand."""

from __future__ import annotations

import pytest

from policies.capacity.instances import Instance, Resources, allocatable, load_instances, reserved_cpu_m

CATALOG = load_instances()


def test_a_gpu_node_carries_gpu_labels_under_both_prefixes():
    labels = CATALOG.instances["g5.2xlarge"].labels()
    karpenter = {k: v for k, v in labels.items() if k.startswith("karpenter.k8s.aws/")}
    assert karpenter == {
        "karpenter.k8s.aws/instance-category": "g",
        "karpenter.k8s.aws/instance-family": "g5",
        "karpenter.k8s.aws/instance-size": "2xlarge",
        "karpenter.k8s.aws/instance-generation": "5",
        "karpenter.k8s.aws/instance-cpu": "8",
        "karpenter.k8s.aws/instance-memory": "32768",
        "karpenter.k8s.aws/instance-gpu-count": "1",
        "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
        "karpenter.k8s.aws/instance-gpu-name": "a10g",
        "karpenter.k8s.aws/instance-gpu-memory": "22888",
    }
    assert {k.replace("eks.amazonaws.com/", "karpenter.k8s.aws/"): v for k, v in labels.items()
            if k.startswith("eks.amazonaws.com/")} == karpenter
    assert (labels["kubernetes.io/os"], labels["kubernetes.io/arch"], labels["node.kubernetes.io/instance-type"]) \
        == ("linux", "amd64", "g5.2xlarge")
    assert len(labels) == 23


def test_a_cpu_node_has_no_gpu_labels_at_all():
    labels = CATALOG.instances["m7i.xlarge"].labels()
    assert not [k for k in labels if "gpu" in k]
    assert labels["karpenter.k8s.aws/instance-generation"] == "7"


def test_a_family_with_a_suffix_keeps_its_generation_digit():
    instance = Instance("p4d.24xlarge", "p", "p4d", 96, 1179648, 8, "a100", 40960, 32.77, 737)
    assert instance.labels()["karpenter.k8s.aws/instance-generation"] == "4"
    nameless = Instance("x", "g", "g9", 4, 1024, 1, None, None, 1.0, 10)
    assert "karpenter.k8s.aws/instance-gpu-name" not in nameless.labels()
    assert "karpenter.k8s.aws/instance-gpu-memory" not in nameless.labels()
    assert nameless.labels()["karpenter.k8s.aws/instance-size"] == ""


@pytest.mark.parametrize("vcpu, millicores", [(1, 60), (2, 70), (3, 75), (4, 80), (5, 82.5), (96, 310)])
def test_reserved_cpu(vcpu, millicores):
    """6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% of every core after."""
    assert reserved_cpu_m(vcpu) == pytest.approx(millicores)


def test_allocatable_of_a_g5_12xlarge():
    """48 vCPU: 48000 - (60 + 10 + 10 + 110) = 47810m. Memory 196608 MiB x 0.925 = 181862.4, less
    11 x 737 + 255 = 8362 reserved and 100 eviction = 173400.4 MiB. No disk given: storage unbounded."""
    assert allocatable(CATALOG.instances["g5.12xlarge"]) == Resources(47810.0, pytest.approx(173400.4), 4, float("inf"),
                                                                      737)


def test_allocatable_with_max_pods_and_a_root_volume():
    """maxPods 110: memory 181862.4 - (11 x 110 + 255) - 100 = 180297.4; 200 GiB disk: 204800 x 0.9 - 1024
    = 183296 MiB ephemeral storage."""
    found = allocatable(CATALOG.instances["g5.12xlarge"], max_pods=110, disk_gib=200)
    assert (found.memory_mib, found.ephemeral_mib, found.pods) == (pytest.approx(180297.4), pytest.approx(183296.0),
                                                                   110)


def test_resources_arithmetic_and_shortfalls():
    free = Resources(cpu_m=4000, memory_mib=8192, gpus=1, ephemeral_mib=1000, pods=10)
    pod = Resources(cpu_m=1000, memory_mib=2048, gpus=1, ephemeral_mib=0, pods=1)
    assert free - pod == Resources(3000, 6144, 0, 1000, 9)
    assert free + pod == Resources(5000, 10240, 2, 1000, 11)
    assert pod.scaled(3) == Resources(3000, 6144, 3, 0, 3)
    assert free.shortfalls(pod) == []
    big = Resources(cpu_m=4000.5, memory_mib=8192, gpus=2, ephemeral_mib=2000, pods=11)
    assert free.shortfalls(big) == [("cpu", 4000.5, 4000), ("nvidia.com/gpu", 2, 1),
                                    ("ephemeral-storage", 2000, 1000), ("pods", 11, 10)]
    assert free.shortfalls(big, ephemeral=False) == [("cpu", 4000.5, 4000), ("nvidia.com/gpu", 2, 1), ("pods", 11, 10)]


def test_catalog_lookups():
    assert CATALOG.get("g5.xlarge").gpus == 1
    assert CATALOG.get("m9.huge") is None and CATALOG.get(None) is None and CATALOG.get(["g5.xlarge"]) is None
    assert all(t.gpus > 0 for t in CATALOG.gpu_types())
    assert "m7i.xlarge" in CATALOG.names() and "m7i.xlarge" not in CATALOG.gpu_names()
    assert CATALOG.names() == sorted(CATALOG.names()) and CATALOG.gpu_names() == sorted(CATALOG.gpu_names())
    assert CATALOG.hours_per_month == 730
    assert CATALOG.instances["g6e.xlarge"].hourly_usd == pytest.approx(1.861)
