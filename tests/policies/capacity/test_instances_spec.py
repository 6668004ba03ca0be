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


#: Every NVIDIA instance type Karpenter's reference lists on x86_64 with whole GPUs (aws/karpenter-provider-aws
#: website/content/en/docs/reference/instance-types.md at 1d927085dd81): none is left out of the catalog.
SOLD_NVIDIA_X86 = (
    "g4dn.xlarge g4dn.2xlarge g4dn.4xlarge g4dn.8xlarge g4dn.12xlarge g4dn.16xlarge g4dn.metal "
    "g5.xlarge g5.2xlarge g5.4xlarge g5.8xlarge g5.12xlarge g5.16xlarge g5.24xlarge g5.48xlarge "
    "g6.xlarge g6.2xlarge g6.4xlarge g6.8xlarge g6.12xlarge g6.16xlarge g6.24xlarge g6.48xlarge "
    "g6e.xlarge g6e.2xlarge g6e.4xlarge g6e.8xlarge g6e.12xlarge g6e.16xlarge g6e.24xlarge g6e.48xlarge "
    "g7.2xlarge g7.4xlarge g7.8xlarge g7.12xlarge g7.24xlarge g7.48xlarge "
    "g7e.2xlarge g7e.4xlarge g7e.8xlarge g7e.12xlarge g7e.24xlarge g7e.48xlarge gr6.4xlarge gr6.8xlarge "
    "p3dn.24xlarge p4d.24xlarge p4de.24xlarge p5.4xlarge p5.48xlarge p5e.48xlarge p5en.48xlarge "
    "p6-b200.48xlarge p6-b300.48xlarge"
).split()


def test_the_catalog_hides_no_nvidia_type():
    assert set(SOLD_NVIDIA_X86) <= set(CATALOG.gpu_names())
    big = CATALOG.instances["g5.16xlarge"]
    assert (big.gpus, big.vcpu, big.gpu_name, big.hourly_usd, big.max_pods) == (1, 64, "a10g", 4.096, 234)
    assert CATALOG.instances["g6e.48xlarge"].hourly_usd == 30.13118
    assert (CATALOG.instances["p5en.48xlarge"].gpus, CATALOG.instances["p5en.48xlarge"].hourly_usd) == (8, 63.296)
