"""Post-deploy checks and load balancer clean-up against an in-process fake kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from automation.driver import postdeploy
from automation.driver.postdeploy import GpuTarget, KubectlCli, KubectlError, Poller
from components import contract


class FakeKubectl:
    """Answers ``get <kind>`` from a dict of item lists and records every call."""

    def __init__(self, **items):
        self.items = items
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, input: str | None = None) -> str:
        self.calls.append(args)
        if args[0] == "get":
            return json.dumps({"items": self.items.get(args[1], [])})
        return ""


def node(name: str, gpu: bool = False, ready: bool = True, gpus: str = "1") -> dict:
    labels = {contract.GPU_PRESENT_LABEL: "true"} if gpu else {}
    allocatable = {contract.GPU_RESOURCE: gpus} if gpu else {}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "allocatable": allocatable}}


def plugin_pod(node_name: str, ready: bool = True) -> dict:
    return {"spec": {"nodeName": node_name},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


DAEMONSET = {"metadata": {"name": "nvidia-device-plugin"}, "status": {"desiredNumberScheduled": 2, "numberReady": 2}}


def test_smoke_job_schedules_by_the_contract():
    for purpose in (contract.GPU_INFERENCE_PURPOSE, contract.GPU_TRAINING_PURPOSE):
        namespace, job = postdeploy.smoke_job_manifests(GpuTarget(pool="train", purpose=purpose, nodes=1))
        pod = job["spec"]["template"]["spec"]
        assert pod["tolerations"] == contract.workload_tolerations(purpose)
        assert contract.gpu_toleration() in pod["tolerations"]
        assert pod["nodeSelector"] == {contract.GPU_PRESENT_LABEL: "true", contract.POOL_LABEL: "train"}
        (container,) = pod["containers"]
        assert container["resources"]["limits"] == {contract.GPU_RESOURCE: 1}, "toleration and request together"
        assert container["image"] == str(postdeploy.SMOKE_IMAGE) and ":latest" not in container["image"]
        assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
        assert namespace["metadata"]["name"] == job["metadata"]["namespace"]


def test_nodes_ready_names_the_laggards():
    ok, detail = postdeploy.nodes_ready(FakeKubectl(nodes=[node("a"), node("b", ready=False)]))
    assert not ok and "1 of 2 node(s) not Ready: b" in detail
    assert postdeploy.nodes_ready(FakeKubectl(nodes=[]))[0] is False
    assert postdeploy.nodes_ready(FakeKubectl(nodes=[node("a")])) == (True, "1 node(s) Ready")


PLUGIN = postdeploy.gpu_software_target("device-plugin")
OPERATOR = postdeploy.gpu_software_target("gpu-operator")


def test_device_plugin_must_run_on_every_gpu_node():
    kubectl = FakeKubectl(nodes=[node("cpu"), node("g1", gpu=True), node("g2", gpu=True)],
                          daemonsets=[DAEMONSET], pods=[plugin_pod("g1"), plugin_pod("g2", ready=False)])
    ok, detail = postdeploy.device_plugin_ready(kubectl, PLUGIN)
    assert not ok and detail == "no Ready device plugin pod of nvidia-device-plugin (device-plugin) on GPU node(s) g2"
    kubectl.items["pods"] = [plugin_pod("g1"), plugin_pod("g2")]
    assert postdeploy.device_plugin_ready(kubectl, PLUGIN)[0] is True
    assert ("get", "daemonsets", "-n", "nvidia-device-plugin", "-l",
            postdeploy.DEVICE_PLUGIN_SELECTOR, "-o", "json") in kubectl.calls
    assert postdeploy.device_plugin_ready(FakeKubectl(nodes=[node("g1", gpu=True)]), PLUGIN)[0] is False


def test_gpu_operator_plugin_is_looked_for_where_the_operator_runs_it():
    """The operator's operand DaemonSet, in the operator's namespace, skipping nodes labelled not to run it."""
    opted_out = node("auto", gpu=True)
    opted_out["metadata"]["labels"][postdeploy.DEPLOY_PLUGIN_LABEL] = "false"
    kubectl = FakeKubectl(nodes=[node("g1", gpu=True), opted_out], daemonsets=[DAEMONSET], pods=[plugin_pod("g1")])
    ok, detail = postdeploy.device_plugin_ready(kubectl, OPERATOR)
    assert ok, detail
    operand = ("get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-device-plugin-daemonset", "-o", "json")
    assert operand in kubectl.calls
    assert not any("nvidia-device-plugin" == c[3] for c in kubectl.calls if c[:2] == ("get", "daemonsets"))


def test_allocatable_gpus_on_every_gpu_node():
    ok, detail = postdeploy.gpus_allocatable(FakeKubectl(nodes=[node("g1", gpu=True), node("g2", gpu=True, gpus="0")]))
    assert not ok and "g2" in detail
    assert postdeploy.gpus_allocatable(FakeKubectl(nodes=[node("cpu")]))[0] is False
    assert postdeploy.gpus_allocatable(FakeKubectl(nodes=[node("g1", gpu=True, gpus="4")])) == (
        True, f"4 allocatable {contract.GPU_RESOURCE} on 1 node(s)")


def test_teardown_deletes_karpenter_nodes_then_load_balancers_and_lists_what_stays():
    from automation.driver.teardown import prepare_destroy

    services = [
        {"metadata": {"namespace": "serving", "name": "gateway"}, "spec": {"type": "LoadBalancer"}},
        {"metadata": {"namespace": "default", "name": "kubernetes"}, "spec": {"type": "ClusterIP"}},
        {"metadata": {"namespace": "obs", "name": "grafana"}, "spec": {"type": "LoadBalancer"}},
    ]
    kubectl = FakeKubectl(services=services, **{"nodepools.karpenter.sh": [{"metadata": {"name": "inference"}}],
                                                "ingresses": [{"metadata": {"namespace": "web", "name": "ui"}}]})
    report = prepare_destroy(kubectl)
    deletes = [c for c in kubectl.calls if c[0] == "delete"]
    assert deletes == [("delete", "nodepool.karpenter.sh", "inference", "--wait=true", "--timeout=10m"),
                       ("delete", "ingress", "ui", "--namespace", "web", "--wait=true", "--timeout=10m"),
                       ("delete", "service", "gateway", "--namespace", "serving", "--wait=true", "--timeout=10m"),
                       ("delete", "service", "grafana", "--namespace", "obs", "--wait=true", "--timeout=10m")]
    assert report.leftovers == ["ingress/web/ui", "service/serving/gateway", "service/obs/grafana"], (
        "this fake never forgets an object, so everything is still listed afterwards")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_poller_retries_until_the_deadline_and_stops_on_final_failures():
    clock = Clock()
    poller = Poller(timeout=60, interval=10, clock=clock, sleep=clock.sleep)
    clock.now = 1800.0  # `up` takes half an hour between making the poller and the first check
    attempts = []

    def never() -> tuple[bool, str]:
        attempts.append(clock.now)
        return False, "not yet"

    result = poller.until("never", never)
    assert not result.ok and result.detail == "not yet (gave up after 60s)"
    assert attempts == [1800, 1810, 1820, 1830, 1840, 1850, 1860], "the full timeout, counted from the first check"
    assert poller.until("later", lambda: (False, "no")).detail == "no (gave up after 60s)", "the deadline is shared"

    attempts.clear()
    poller = Poller(timeout=60, interval=10, clock=clock, sleep=clock.sleep)
    assert poller.until("final", lambda: (attempts.append(1), (False, "failed", True))[1]).detail == "failed"
    assert attempts == [1]


def test_kubectl_errors_are_retried_like_failed_checks():
    clock = Clock()
    answers = iter([KubectlError("connection refused"), (True, "fine")])

    def flaky():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    result = Poller(timeout=60, interval=5, clock=clock, sleep=clock.sleep).until("flaky", flaky)
    assert result.ok and clock.now == 5


def test_real_kubectl_wrapper_reports_a_missing_binary(tmp_path: Path):
    kubectl = KubectlCli(tmp_path / "kubeconfig", binary=str(tmp_path / "no-kubectl"))
    with pytest.raises(KubectlError, match="not found"):
        kubectl("get", "nodes")


def test_kubeconfig_file_is_private_and_removed():
    with postdeploy.kubeconfig_file({"apiVersion": "v1", "kind": "Config"}) as path:
        assert json.loads(path.read_text())["kind"] == "Config"
        assert path.stat().st_mode & 0o077 == 0
    assert not path.exists()


def pool_node(name: str, pool: str, ready: bool = True, gpus: str = "1") -> dict:
    n = node(name, gpu=True, ready=ready, gpus=gpus)
    n["metadata"]["labels"][contract.POOL_LABEL] = pool
    return n


def test_gpu_pools_are_chosen_from_ready_nodes_by_the_pool_label():
    kubectl = FakeKubectl(nodes=[node("cpu"), pool_node("k1", "karpenter-inf"), pool_node("k2", "karpenter-inf"),
                                 pool_node("m1", "managed-a10g"), pool_node("n1", "training", ready=False)])
    pools = {"managed-a10g": contract.GPU_INFERENCE_PURPOSE, "karpenter-inf": contract.GPU_INFERENCE_PURPOSE,
             "training": contract.GPU_TRAINING_PURPOSE, "claims": contract.GPU_DRA_PURPOSE}
    targets, skipped = postdeploy.gpu_pool_targets(kubectl, pools)
    assert targets == [GpuTarget("managed-a10g", contract.GPU_INFERENCE_PURPOSE, 1),
                       GpuTarget("karpenter-inf", contract.GPU_INFERENCE_PURPOSE, 2)]
    assert [(r.name, r.status) for r in skipped] == [("gpu pool training", "SKIP"), ("gpu pool claims", "SKIP")]
    assert "no Ready node" in skipped[0].detail and "DRA" in skipped[1].detail


def test_per_pool_checks_look_only_at_the_chosen_pools():
    nodes = [pool_node("g1", "inf"), pool_node("d1", "claims", gpus="0")]
    assert postdeploy.gpus_allocatable(FakeKubectl(nodes=nodes), {"inf"}) == (
        True, f"1 allocatable {contract.GPU_RESOURCE} on 1 node(s)")
    assert postdeploy.gpus_allocatable(FakeKubectl(nodes=nodes))[0] is False
    present = postdeploy.gpu_nodes_present(FakeKubectl(nodes=nodes), GpuTarget("inf", "gpu-inference", 2))
    assert present == (False, f"1 Ready GPU node(s) in pool inf ({contract.POOL_LABEL}), want 2")


def test_model_health_needs_port_forward_not_the_service_proxy():
    kubectl = FakeKubectl()
    model = postdeploy.ModelTarget("m", "serving-x", "chat", True)
    assert postdeploy.model_healthy(kubectl, model) == (False, "this kubectl cannot port-forward", True)
    assert kubectl.calls == [], "no call through the API server's service proxy"
