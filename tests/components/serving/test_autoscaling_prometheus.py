"""Every KEDA query, recording rule and dashboard panel the stacks emit, evaluated by a real
Prometheus over synthetic series (backfilled with promtool), and what KEDA would do with the answers.

The synthetic day of one model: idle with a healthy gateway scrape (A), sustained load (B), idle
again for longer than the cooldown (C), then the gateway's scrape breaks (D). KEDA's decisions come
from :mod:`tests.support.keda_model` fed with the real answers: a cold model wakes on its first requests,
reaches ``maxReplicaCount`` under load, returns to ``minReplicaCount`` after the cooldown, and holds
replicas when Prometheus has no data or is down.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error

import pytest

from tests.support.keda_model import SCALED_OBJECT, Autoscaler, Trigger, triggers_of
from tests.support.prometheus_tools import PrometheusServer, backfill, free_port

STEP = 15
MIN = 60
A_END, B_END, C_END, D_END = 10 * MIN, 40 * MIN, 100 * MIN, 115 * MIN
GPU_HISTORY_DAYS = 31
GATEWAY_UP = {"namespace": "llm-gateway", "service": "llm-gateway", "job": "llm-gateway", "instance": "10.0.0.9:4000"}
NODE = "ip-10-40-1-7.ec2.internal"


def _labels(mapping: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(mapping.items())) + "}"


class OpenMetrics:
    """Samples by family, written in the order promtool's OpenMetrics parser expects."""

    def __init__(self) -> None:
        self.families: dict[str, dict[str, list[tuple[float, float]]]] = {}

    def add(self, name: str, labels: dict[str, str], at: float, value: float) -> None:
        self.families.setdefault(name, {}).setdefault(_labels(labels), []).append((at, value))

    def text(self) -> str:
        lines = []
        for name, series in self.families.items():
            lines.append(f"# TYPE {name} unknown")
            for labels, samples in series.items():
                lines += [f"{name}{labels} {value} {at:.0f}" for at, value in samples]
        return "\n".join(lines) + "\n# EOF\n"


def scaler_specs(plan) -> list[dict]:
    return [r.inputs for r in plan.of_type(SCALED_OBJECT)]


def threshold(spec: dict, name: str) -> float:
    return next(t.threshold for t in triggers_of(spec["spec"]) if t.name == name)


def synthetic_day(plans, start: float) -> OpenMetrics:
    data = OpenMetrics()
    ttft_bounds = ["0.5", "1", "2.5", "5", "10", "+Inf"]
    for t in range(0, D_END + STEP, STEP):
        at = start + t
        if t < C_END:
            data.add("up", GATEWAY_UP, at, 1)
        else:
            data.add("up", GATEWAY_UP, at, 0)
        for plan in plans:
            for so in scaler_specs(plan):
                model, namespace = so["metadata"]["name"], so["metadata"]["namespace"]
                top = so["spec"]["maxReplicaCount"]
                rps = threshold(so, "gateway-demand") * top * 2
                if A_END <= t < C_END:  # counter exists from the first request on
                    count = rps * (min(t, B_END) - A_END)
                    data.add("litellm_proxy_total_requests_metric_total", {"requested_model": model, "job": "llm-gateway"}, at, count)
                if t < A_END:
                    continue  # no vLLM pod before the model woke
                busy = t < B_END
                sel = {"namespace": namespace, "model_name": model, "tier": namespace.removeprefix("serving-"), "pod": f"{model}-0"}
                data.add("vllm:num_requests_waiting", sel, at, threshold(so, "waiting-requests") * top * 2 if busy else 0)
                data.add("vllm:num_requests_running", sel, at, 24 if busy else 0)
                data.add("vllm:kv_cache_usage_perc", sel, at, 0.95 if busy else 0.02)
                served = min(t, B_END) - A_END
                data.add("vllm:generation_tokens_total", sel, at, 50 * served)
                data.add("vllm:num_preemptions_total", sel, at, 0.1 * served)
                for le in ttft_bounds:
                    slow = le in ("5", "10", "+Inf")
                    data.add("vllm:time_to_first_token_seconds_bucket", {**sel, "le": le}, at, served * 2 if slow else 0)
                    data.add("vllm:inter_token_latency_seconds_bucket", {**sel, "le": le}, at, served * 40 if le != "0.5" else served * 30)
        gpu = {"Hostname": NODE, "gpu": "0", "modelName": "NVIDIA A10G"}
        data.add("DCGM_FI_DEV_GPU_UTIL", gpu, at, 97 if t < B_END else 3)
        data.add("DCGM_FI_DEV_FB_USED", gpu, at, 21186)
        data.add("DCGM_FI_DEV_FB_FREE", gpu, at, 1842)
        data.add("DCGM_FI_DEV_POWER_USAGE", gpu, at, 290 if t < B_END else 60)
        data.add("kube_node_labels", {"node": NODE, "label_llm_platform_io_pool": "inference", "label_llm_platform_io_accelerator": "a10g"}, at, 1)
    return data


def gpu_history(data: OpenMetrics, start: float, gpus: int) -> None:
    """31 days of allocatable GPUs (kube-state-metrics), every 5 minutes, ending at ``start + D_END``."""
    end = start + D_END
    for at in range(int(end - GPU_HISTORY_DAYS * 86400), int(end) + 1, 300):
        data.add("kube_node_status_allocatable", {"node": NODE, "resource": "nvidia_com_gpu", "unit": "integer"}, at, gpus)


@pytest.fixture(scope="module")
def synthetic(dev_plan, prod_plan, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("prometheus")
    start = math.floor((time.time() - 4 * 3600) / 3600) * 3600
    data = synthetic_day([dev_plan, prod_plan], start)
    gpu_history(data, start, gpus=4)
    backfill(data.text(), workdir / "data", workdir)
    server = PrometheusServer(workdir, {"global": {"scrape_interval": "15s"}}, data_dir=workdir / "data").start()
    yield server, start
    server.stop()


def answer(server: PrometheusServer, at: float):
    def ask(trigger: Trigger) -> list[float]:
        return [s.value for s in server.query(trigger.query, at)]

    return ask


def run(spec: dict, ask_at, start: float, until: int, replicas: int | None = None, autoscaler: Autoscaler | None = None, since: int = 0):
    """Poll every ``pollingInterval`` from ``since`` to ``until``; the replica count at each poll."""
    scaler = autoscaler or Autoscaler(spec["spec"], replicas=spec["spec"]["minReplicaCount"] if replicas is None else replicas)
    interval = spec["spec"]["pollingInterval"]
    timeline = {}
    for t in range(since, until, interval):
        timeline[t] = scaler.poll(start + t, ask_at(start + t))
    return scaler, timeline


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_keda_wakes_scales_returns_and_holds(stack, dev_plan, prod_plan, synthetic):
    server, start = synthetic
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    for so in scaler_specs(plan):
        spec, name = so["spec"], so["metadata"]["name"]
        low, high = spec["minReplicaCount"], spec["maxReplicaCount"]
        cooldown = max(spec["cooldownPeriod"], spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"])
        scaler, timeline = run(so, lambda at: answer(server, at), start, D_END)
        idle = [r for t, r in timeline.items() if t < A_END]
        assert set(idle) == {low}, f"{name}: moved while idle with a healthy scrape: {sorted(set(idle))}"
        woke = [t for t, r in timeline.items() if t >= A_END and r >= max(low, 1)]
        assert woke and woke[0] <= A_END + 90, f"{name}: did not wake within 90s of its first requests"
        assert timeline[max(t for t in timeline if t < B_END)] == high, f"{name}: not at max {high} under sustained load"
        settled = B_END + cooldown + (high - max(low, 1) + 2) * 60
        assert settled < C_END, "the synthetic lull is shorter than this tier's cooldown"
        assert timeline[max(t for t in timeline if t < C_END)] == low, f"{name}: not back at min {low} after the cooldown"
        blind = [r for t, r in timeline.items() if t >= C_END + 5 * MIN]
        assert blind and set(blind) == {max(low, 1)}, f"{name}: with the gateway unscraped KEDA must hold, got {sorted(set(blind))}"


def test_keda_holds_at_max_when_prometheus_is_down(prod_plan):
    (so,) = [s for s in scaler_specs(prod_plan) if s["metadata"]["name"] == "llama-3-1-70b-instruct-awq"]
    high = so["spec"]["maxReplicaCount"]
    down = PrometheusServer.__new__(PrometheusServer)
    down.port = free_port()  # nothing listens here

    def unreachable(trigger: Trigger):
        try:
            PrometheusServer.query(down, trigger.query)
        except (urllib.error.URLError, ConnectionError):
            return None
        raise AssertionError("expected Prometheus to be unreachable")

    scaler = Autoscaler(so["spec"], replicas=high)
    replicas = [scaler.poll(float(i * 15), lambda t: unreachable(t)) for i in range(6)]
    assert replicas == [high] * 6


def inline_recordings(expr: str, records: dict[str, str]) -> str:
    """A rule's expression with recorded series replaced by their own expressions, so a backfilled
    Prometheus (which records only from now on) evaluates it over the past."""
    for _ in range(len(records) + 1):  # recordings may build on recordings
        before = expr
        for name, body in sorted(records.items(), key=lambda kv: -len(kv[0])):
            expr = re.sub(rf"{re.escape(name)}(?![\w:])", f"({body})", expr)
        if expr == before:
            return expr
    raise AssertionError(f"recording rules refer to each other in a cycle: {expr}")


def records_of(plan) -> dict[str, str]:
    (rule,) = [r.inputs for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    return {r["record"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"] if "record" in r}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_recording_rules_evaluate_on_prometheus(stack, dev_plan, prod_plan, synthetic):
    server, start = synthetic
    records = records_of({"dev": dev_plan, "prod": prod_plan}[stack])
    at = start + D_END
    (gpus,) = server.query(inline_recordings("llm_platform:gpus_allocatable:sum", records), at)
    assert gpus.value == 4
    (hours,) = server.query(inline_recordings("llm_platform:gpu_hours:30d", records), at)
    assert hours.value == pytest.approx(4 * (30 * 24 * 12 + 1) / 12), "4 GPUs for 30 days"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_dashboard_panel_answers(stack, dev_plan, prod_plan, synthetic):
    """GPU, serving and cost panels on the synthetic series (gateway panels run against the real
    proxy in test_gateway_proxy)."""
    server, start = synthetic
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    records = records_of(plan)
    dashboards = {
        r.inputs["metadata"]["name"].removeprefix("dashboard-"): json.loads(next(iter(r.inputs["data"].values())))
        for r in plan.of_type("kubernetes:core/v1:ConfigMap")
        if r.inputs["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    }
    assert set(dashboards) == {"llm-gpu", "llm-serving", "llm-gateway", "llm-cost", "llm-token-cost"}
    at = start + A_END + 20 * MIN
    for uid, dashboard in dashboards.items():
        if uid in ("llm-gateway", "llm-token-cost"):
            # token cost: on a live Prometheus that evaluates the rules (observability/test_token_cost.py)
            continue
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                result = server.query(inline_recordings(target["expr"], records), at)
                assert result and all(not math.isnan(s.value) for s in result), f"{uid}/{panel['title']}: {target['expr']} answered nothing"
