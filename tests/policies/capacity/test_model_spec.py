"""The cluster model's Kubernetes rules (policies/capacity/model.py) as a specification: toleration
matching (k8s.io/api core/v1 toleration.go ToleratesTaint), node selection (nodeSelector plus required
node affinity, component-helpers nodeaffinity), quantities (apimachinery resource.Quantity), a pod's
effective requests (init containers: the larger of their max and the app sum) and rollout surge."""

from __future__ import annotations

import pytest

from policies.capacity.instances import Resources
from policies.capacity.model import (
    Selection,
    Taint,
    cpu_m,
    mib,
    pod_requests,
    quantity,
    resources_of,
    surge_pods,
    tolerates,
    untolerated,
)

GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")


@pytest.mark.parametrize(
    "toleration, ok",
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, True),  # operator defaults to Equal
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key with Exists tolerates everything
        ({"operator": "Equal", "value": "true"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal"}, False),  # "" is not "true"
        ("not a toleration", False),
    ],
)
def test_toleration_matching(toleration, ok):
    assert tolerates([toleration], GPU_TAINT) is ok


def test_equal_with_empty_values_matches_an_empty_taint_value():
    assert tolerates([{"key": "dedicated", "operator": "Equal"}], Taint("dedicated", "", "NoSchedule")) is True
    assert tolerates([], GPU_TAINT) is False and tolerates(None, GPU_TAINT) is False


def test_only_hard_taints_need_tolerating():
    soft = Taint("spot", "true", "PreferNoSchedule")
    execute = Taint("maintenance", "", "NoExecute")
    assert untolerated([], [GPU_TAINT, soft, execute]) == [GPU_TAINT, execute]
    assert untolerated([{"operator": "Exists"}], [GPU_TAINT, execute]) == []


NODE = {"node.kubernetes.io/instance-type": "g5.2xlarge", "karpenter.k8s.aws/instance-gpu-count": "1",
        "team": "ml"}


def affinity(*expressions: tuple) -> Selection:
    terms = [{"matchExpressions": [{"key": k, "operator": op, "values": list(v)} for k, op, *v in expressions]}]
    return Selection.of(None, terms)


@pytest.mark.parametrize(
    "selection, fixed, flexible, ok",
    [
        (Selection.of({"team": "ml"}), NODE, {}, True),
        (Selection.of({"team": "search"}), NODE, {}, False),
        (Selection.of({"zone": "a"}), NODE, {"zone": None}, True),  # the pool may pick any zone
        (Selection.of({"zone": "a"}), NODE, {"zone": frozenset({"b"})}, False),
        (Selection.of({"zone": "a"}), NODE, {}, False),
        (affinity(("karpenter.k8s.aws/instance-gpu-count", "Gt", "0")), NODE, {}, True),
        (affinity(("karpenter.k8s.aws/instance-gpu-count", "Gt", "1")), NODE, {}, False),
        (affinity(("karpenter.k8s.aws/instance-gpu-count", "Lt", "2")), NODE, {}, True),
        (affinity(("karpenter.k8s.aws/instance-gpu-count", "Lt", "1")), NODE, {}, False),
        (affinity(("karpenter.k8s.aws/instance-gpu-count", "Gt", "x")), NODE, {}, False),
        (affinity(("gpus", "Gt", "3")), {}, {"gpus": None}, True),
        (affinity(("gpus", "Gt", "3")), {}, {"gpus": frozenset({"1", "8"})}, True),
        (affinity(("gpus", "Gt", "3")), {}, {"gpus": frozenset({"1", "2"})}, False),
        (affinity(("team", "NotIn", "ml")), NODE, {}, False),
        (affinity(("team", "NotIn", "search")), NODE, {}, True),
        (affinity(("missing", "NotIn", "x")), NODE, {}, True),
        (affinity(("zone", "NotIn", "a")), {}, {"zone": frozenset({"a"})}, False),
        (affinity(("zone", "NotIn", "a")), {}, {"zone": frozenset({"a", "b"})}, True),
        (affinity(("zone", "NotIn", "a")), {}, {"zone": None}, True),
        (affinity(("team", "Exists")), NODE, {}, True),
        (affinity(("missing", "Exists")), NODE, {}, False),
        (affinity(("missing", "DoesNotExist")), NODE, {}, True),
        (affinity(("team", "DoesNotExist")), NODE, {}, False),
        (affinity(("zone", "DoesNotExist")), {}, {"zone": None}, True),  # a flexible label may be left off
        (affinity(("team", "In", "ml", "search")), NODE, {}, True),
        (affinity(("team", "In", "search")), NODE, {}, False),
        (affinity(("zone", "In", "a")), {}, {"zone": frozenset({"b", "a"})}, True),
        (affinity(("team", "Unknown", "ml")), NODE, {}, False),
    ],
)
def test_node_selection(selection, fixed, flexible, ok):
    assert selection.admits(fixed, flexible) is ok


def test_affinity_terms_are_ored_and_expressions_anded():
    terms = [{"matchExpressions": [{"key": "team", "operator": "In", "values": ["search"]}]},
             {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]},
                                   {"key": "missing", "operator": "Exists"}]},
             {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]},
                                   {"key": "node.kubernetes.io/instance-type", "operator": "In",
                                    "values": ["g5.2xlarge"]}]}]
    assert Selection.of(None, terms).admits(NODE, {}) is True
    assert Selection.of(None, terms[:2]).admits(NODE, {}) is False
    assert Selection.of({"team": "search"}, terms).admits(NODE, {}) is False, "nodeSelector and affinity both hold"


def test_selection_keys_and_description():
    selection = Selection.of({"b": "2", "a": "1"}, [{"matchExpressions": [{"key": "c", "operator": "Exists"}]},
                                                    {"matchExpressions": [{"key": "d", "operator": "In",
                                                                           "values": ["x", "y"]}]}])
    assert selection.keys() == {"a", "b", "c", "d"}
    assert selection.describe() == "a=1; b=2; (c Exists) or (d In x,y)"
    assert Selection.of().describe() == "any node"


@pytest.mark.parametrize(
    "value, number",
    [("500m", 0.5), ("2", 2.0), ("2Gi", 2147483648.0), ("1Ki", 1024.0), ("1Mi", 1048576.0), ("1Ti", 2**40),
     ("1k", 1000.0), ("1M", 1e6), ("1G", 1e9), ("1T", 1e12), ("1.5", 1.5), ("+3", 3.0), ("-1", -1.0), (4, 4.0),
     (0.25, 0.25), (" 8Gi ", 8 * 2**30), ("1Pi", None), ("abc", None), ("", None), (None, None), (True, None)],
)
def test_quantities(value, number):
    assert quantity(value) == number


def test_cpu_and_memory_units():
    assert (cpu_m("250m"), cpu_m(2), cpu_m("x")) == (250.0, 2000.0, 0.0)
    assert (mib("512Mi"), mib("1Gi"), mib(None)) == (512.0, 1024.0, 0.0)
    assert resources_of({"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1, "ephemeral-storage": "10Gi"}, pods=1) \
        == Resources(4000.0, 16384.0, 1.0, 10240.0, 1)
    assert resources_of(None) == Resources()


def test_pod_requests_take_the_larger_of_app_sum_and_any_init_container():
    pod = {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}},
            {"resources": {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}}},  # limit as request
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "8", "memory": "1Gi"}}},
            {"resources": {"limits": {"memory": "3Gi"}}},
        ],
    }
    requests, limits = pod_requests(pod)
    assert requests == Resources(cpu_m=8000.0, memory_mib=5120.0, gpus=1.0, ephemeral_mib=0.0, pods=1)
    assert limits == Resources(cpu_m=2000.0, memory_mib=6144.0, gpus=1.0, ephemeral_mib=0.0, pods=0)


@pytest.mark.parametrize(
    "surge, replicas, strategy, pods",
    [(None, 4, "RollingUpdate", 1), (None, 5, "RollingUpdate", 2), ("50%", 3, "RollingUpdate", 2),
     ("100%", 3, "RollingUpdate", 3), (2, 4, "RollingUpdate", 2), ("3", 4, "RollingUpdate", 3),
     (0, 4, "RollingUpdate", 0), (1, 4, "Recreate", 0), (None, 0, "RollingUpdate", 0),
     ("x%", 4, "RollingUpdate", 0), ("many", 4, "RollingUpdate", 0)],
)
def test_rollout_surge(surge, replicas, strategy, pods):
    """maxSurge default 25%, percentages round up (Kubernetes intstr.GetScaledValueFromIntOrPercent)."""
    assert surge_pods(surge, replicas, strategy) == pods
