"""One request wakes a cold model: the real gateway (the pinned LiteLLM proxy on the emitted config)
falls back to Bedrock for a model at zero replicas, a real Prometheus scrapes it as the
ServiceMonitor says, and the ScaledObject's own demand query, read as KEDA reads it, activates the
model at the first scrape after that single request. ``rate()`` alone needs two samples of the
counter, which appears only with the model's first request (at 1), so it read nothing here."""

from __future__ import annotations

import time

import pytest

from tests.components.serving.test_gateway_proxy import CHAT, Gateway
from tests.support.keda_model import Autoscaler, scaled_object, trigger_queries
from tests.support.prometheus_tools import PrometheusServer

COLD = "llama-3-1-8b-instruct"
SCRAPE_SECONDS = 1


@pytest.fixture(scope="module")
def fresh_gateway(dev_plan, tmp_path_factory):
    """A proxy of its own: no request for the cold model has ever been counted."""
    gateway = Gateway(dev_plan, tmp_path_factory.mktemp("gateway-wake"), cold={COLD})
    yield gateway
    gateway.stop()


def scraping(gateway, workdir) -> PrometheusServer:
    endpoint = gateway.given["endpoint"]
    return PrometheusServer(workdir, {
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "scrape_configs": [{
            "job_name": "llm-gateway",
            "metrics_path": endpoint["path"],
            "authorization": {"type": endpoint["authorization"]["type"], "credentials": gateway.given["scrape_token"]},
            "static_configs": [{"targets": [f"127.0.0.1:{gateway.proxy.port}"],
                                "labels": {"namespace": "llm-gateway", "service": "llm-gateway"}}],
        }],
    })


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_a_single_request_through_the_gateway_activates_the_cold_model(fresh_gateway, dev_plan, tmp_path):
    (demand,) = [t for t in trigger_queries(dev_plan, COLD) if t.name == "gateway-demand"]
    prometheus = scraping(fresh_gateway, tmp_path).start()
    try:
        idle = wait_for(lambda: prometheus.query(demand.query), 30)
        assert [s.value for s in idle] == [0.0], "a scraped gateway with no demand reads 0"
        spec = scaled_object(dev_plan, COLD)["spec"]
        assert spec["minReplicaCount"] == 0, "the dev model scales to zero"
        keda = Autoscaler(spec, replicas=0)
        assert keda.poll(time.time(), lambda t: [s.value for s in prometheus.query(t.query)]) == 0

        status, body = fresh_gateway.proxy.call(
            "/v1/chat/completions", {"model": COLD, **CHAT}, token=fresh_gateway.given["master_key"])
        assert status == 200, body
        assert fresh_gateway.bedrock.calls, "the cold model's request was served by the Bedrock fallback"
        served = time.monotonic()

        # one scrape after the request (the proxy counts once it has answered), then KEDA's next poll
        woken = wait_for(lambda: [s.value for s in prometheus.query(demand.query) if s.value > demand.activation], 10)
        assert woken, f"one request did not lift demand above activation {demand.activation}"
        assert time.monotonic() - served < 10
        assert woken[0] == pytest.approx(1 / 120, rel=0.05), "one request over the two-minute window"
        assert keda.poll(time.time(), lambda t: [s.value for s in prometheus.query(t.query)]) >= 1

        # The textbook query on the same scrapes: a new counter's lone sample (or two equal ones) is
        # no rate, so the cold model would have stayed at zero.
        series = f'litellm_proxy_total_requests_metric_total{{requested_model="{COLD}"}}'
        rate = [s.value for s in prometheus.query(f"sum(rate({series}[120s]))")]
        assert rate in ([], [0.0]), f"rate() alone read {rate}"
    finally:
        prometheus.stop()
