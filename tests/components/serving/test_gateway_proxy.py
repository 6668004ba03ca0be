"""The real LiteLLM proxy with the emitted config: metrics reachable by the platform's scraper, demand
counted under the model the caller asked for (also when a fallback served it), fallbacks of the same
kind only, and KEDA's demand query answered by a real Prometheus scraping the proxy."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest

from components import versions
from components.specs.gateway import DEMAND_METRIC
from tests.support.keda_model import Autoscaler, scaled_object, trigger_queries
from tests.support.litellm_proxy import Proxy, emitted, localized, model_api_keys
from tests.support.model_standin import Behaviour, ModelStandIn
from tests.support.prometheus_tools import PrometheusServer

CHAT = {"messages": [{"role": "user", "content": "hello"}]}


def closed_port_url() -> str:
    """An address nothing listens on: what a Service with no ready pod looks like to the proxy."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def counter(metrics: str, name: str, **labels: str) -> float:
    """Sum of ``name`` samples whose labels include ``labels`` in Prometheus text."""
    total = 0.0
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def demand(gateway, model: str, at_least: float, timeout: float = 15) -> float:
    """The demand counter for ``model`` once it reaches ``at_least`` (the proxy counts after it answers)."""
    deadline = time.monotonic() + timeout
    while True:
        value = counter(gateway.scrape_as_service_monitor()[1], DEMAND_METRIC, requested_model=model)
        if value >= at_least or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


class Gateway:
    """Stand-ins, the proxy on the emitted config, and what the plan says about scraping it."""

    def __init__(self, plan, workdir, cold: set[str]):
        self.given = emitted(plan)
        self.vllm = ModelStandIn("vllm", api_keys=model_api_keys(plan)).start()
        self.bedrock = ModelStandIn("bedrock").start()
        hosted = [r["model_name"] for r in self.given["config"]["model_list"] if r["litellm_params"]["model"].startswith("hosted_vllm/")]
        bases = {name: closed_port_url() if name in cold else f"{self.vllm.url}/v1" for name in hosted}
        self.proxy = Proxy(workdir, localized(self.given["config"], bases, self.bedrock.url), self.given["master_key"], self.given["env"]).start()

    def scrape_as_service_monitor(self) -> tuple[int, str]:
        return self.proxy.call(self.given["endpoint"]["path"], token=self.given["scrape_token"])

    def stop(self) -> None:
        self.proxy.stop()
        self.vllm.stop()
        self.bedrock.stop()


@pytest.fixture(scope="module")
def dev_gateway(dev_plan, tmp_path_factory):
    gateway = Gateway(dev_plan, tmp_path_factory.mktemp("gateway-dev"), cold={"llama-3-1-8b-instruct"})
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def prod_gateway(prod_plan, tmp_path_factory):
    gateway = Gateway(prod_plan, tmp_path_factory.mktemp("gateway-prod"), cold=set())
    yield gateway
    gateway.stop()


def test_tests_run_the_pinned_release():
    from tests.support.litellm_proxy import GATEWAY_VENV

    pins = (GATEWAY_VENV.parent / "requirements-gateway.txt").read_text()
    assert f"litellm=={versions.LITELLM_IMAGE.tag.removeprefix('v')}" in pins.splitlines()


def test_metrics_need_the_key_and_the_service_monitor_has_it(dev_gateway):
    status, _ = dev_gateway.proxy.call(dev_gateway.given["endpoint"]["path"])
    assert status == 401, "an unauthenticated scrape is refused"
    status, body = dev_gateway.scrape_as_service_monitor()
    assert status == 200 and "# TYPE" in body


def test_cold_model_demand_is_counted_under_its_own_name(dev_gateway):
    before = counter(dev_gateway.scrape_as_service_monitor()[1], DEMAND_METRIC, requested_model="llama-3-1-8b-instruct")
    status, body = dev_gateway.proxy.call(
        "/v1/chat/completions", {"model": "llama-3-1-8b-instruct", **CHAT}, token=dev_gateway.given["master_key"]
    )
    assert status == 200, body
    assert "answer from bedrock" in body, "the cold model's request was served by its Bedrock fallback"
    assert [c.model for c in dev_gateway.bedrock.calls][-1] == "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert demand(dev_gateway, "llama-3-1-8b-instruct", before + 1) == before + 1


def test_warm_model_is_served_by_vllm(dev_gateway):
    status, body = dev_gateway.proxy.call(
        "/v1/chat/completions", {"model": "qwen2-5-7b-instruct", **CHAT}, token=dev_gateway.given["master_key"]
    )
    assert status == 200 and "answer from vllm" in body
    assert dev_gateway.vllm.rejected == [], "the gateway presents each tier's model API key"


def test_model_api_keys_are_per_tier_and_required_by_every_model(prod_plan):
    keys = model_api_keys(prod_plan)
    tiers = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["namespace"] for r in prod_plan.of_type("kubernetes:apps/v1:Deployment") if r.inputs["metadata"]["name"] in keys}
    by_tier = {tiers[model]: key for model, key in keys.items()}
    assert len(set(by_tier.values())) == len(by_tier) > 1, "one distinct key per tier"
    assert all(key.startswith("sk-") and len(key) == 51 for key in keys.values())


def test_embedding_requests_fall_back_to_embedding_models_only(prod_gateway):
    key = prod_gateway.given["master_key"]
    status, body = prod_gateway.proxy.call("/v1/embeddings", {"model": "bge-m3", "input": ["hello"]}, token=key)
    assert status == 200 and prod_gateway.vllm.calls[-1].kind == "embedding", body
    prod_gateway.vllm.behaviour = Behaviour(status=503)
    try:
        calls_before = len(prod_gateway.bedrock.calls)
        for _ in range(3):
            status, body = prod_gateway.proxy.call("/v1/embeddings", {"model": "bge-m3", "input": ["hello"]}, token=key)
            assert status == 200, body
        fallbacks = prod_gateway.bedrock.calls[calls_before:]
        assert fallbacks and {c.model for c in fallbacks} <= {"cohere.embed-multilingual-v3", "amazon.titan-embed-text-v2:0"}
        assert all("anthropic" not in c.model for c in fallbacks), "an embedding request reached a chat model"
    finally:
        prod_gateway.vllm.behaviour = Behaviour()
    assert demand(prod_gateway, "bge-m3", 4) >= 4, "fallbacks count under the model asked for"


def test_chat_fallbacks_never_go_to_embedding_models(prod_gateway):
    prod_gateway.vllm.behaviour = Behaviour(status=500)
    try:
        calls_before = len(prod_gateway.bedrock.calls)
        status, body = prod_gateway.proxy.call(
            "/v1/chat/completions", {"model": "qwen2-5-32b-instruct", **CHAT}, token=prod_gateway.given["master_key"]
        )
        assert status == 200, body
        assert {c.model for c in prod_gateway.bedrock.calls[calls_before:]} <= {
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-haiku-4-5-20251001-v1:0"
        }
    finally:
        prod_gateway.vllm.behaviour = Behaviour()


def test_keda_demand_query_on_a_prometheus_scraping_the_proxy_wakes_the_cold_model(dev_gateway, dev_plan, tmp_path):
    """Prometheus scrapes the proxy as the ServiceMonitor says (path, bearer token, target labels);
    the ScaledObject's own gateway-demand query then reads above its activation threshold, and every
    panel of the gateway dashboard answers from the proxy's real series."""
    endpoint = dev_gateway.given["endpoint"]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "llm-gateway",
                "metrics_path": endpoint["path"],
                "authorization": {"type": endpoint["authorization"]["type"], "credentials": dev_gateway.given["scrape_token"]},
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{dev_gateway.proxy.port}"],
                        "labels": {"namespace": "llm-gateway", "service": "llm-gateway"},
                    }
                ],
            }
        ],
    }
    prometheus = PrometheusServer(tmp_path, config).start()
    try:
        (demand,) = [t for t in trigger_queries(dev_plan, "llama-3-1-8b-instruct") if t.name == "gateway-demand"]
        deadline = time.monotonic() + 30
        while not prometheus.query(demand.query) and time.monotonic() < deadline:
            time.sleep(0.5)
        idle = prometheus.query(demand.query)
        # a number, not nothing (this module's gateway may have counted earlier tests' requests
        # within the window; test_single_request_wake.py reads exactly 0 on a fresh one)
        assert len(idle) == 1 and idle[0].value >= 0, "a scraped gateway reads a number, not nothing"
        for _ in range(4):  # a model's first requests: the counter's first sample is not a rate yet
            status, _ = dev_gateway.proxy.call(
                "/v1/chat/completions", {"model": "llama-3-1-8b-instruct", **CHAT}, token=dev_gateway.given["master_key"]
            )
            assert status == 200
            time.sleep(1.2)
        time.sleep(1.5)
        (woken,) = prometheus.query(demand.query)
        assert woken.value > demand.activation, f"demand {woken.value} does not pass activation {demand.activation}"
        spec = scaled_object(dev_plan, "llama-3-1-8b-instruct")["spec"]
        keda = Autoscaler(spec, replicas=0)
        replicas = keda.poll(time.time(), lambda trigger: [s.value for s in prometheus.query(trigger.query)])
        assert replicas >= 1, "KEDA would leave the cold model at zero"
        (board,) = [
            json.loads(r.inputs["data"]["llm-gateway.json"])
            for r in dev_plan.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"]["name"] == "dashboard-llm-gateway"
        ]
        for panel in board["panels"]:
            for target in panel["targets"]:
                assert prometheus.query(target["expr"]), f"gateway panel {panel['title']!r} answered nothing: {target['expr']}"
    finally:
        prometheus.stop()
