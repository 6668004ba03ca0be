"""The three-tier cascade with the real LiteLLM proxy on 127.0.0.1 and the config the program emits for a
dev copy with an on-prem tier: the on-prem model fails (503), its cloud twin fails (503), Bedrock answers;
and the demand as the autoscaling triggers read it, from a real Prometheus scraping the proxy: the on-prem
model under its own name, the cloud twin through the fallback hops into it (LiteLLM does not count a
fallen-back request under the model it fell back to: a trigger on the twin's own name alone reads 0)."""

from __future__ import annotations

import time

import pytest

from components.specs.gateway import DEMAND_METRIC, demand_query
from tests.components.cluster.test_hybrid_nodes import hybrid_config
from tests.conftest import plan_with
from tests.support.keda_model import Autoscaler, scaled_object, trigger_queries
from tests.support.litellm_proxy import Proxy, emitted, localized, model_api_keys
from tests.support.model_standin import Behaviour, ModelStandIn
from tests.support.prometheus_tools import PrometheusServer

ONPREM, CLOUD, OTHER = "llama-onprem", "llama-3-1-8b-instruct", "qwen2-5-7b-instruct"
BEDROCK = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
CHAT = {"messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def plan():
    config = hybrid_config()
    return plan_with("dev", **{k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")})


@pytest.fixture(scope="module")
def cascade(plan, tmp_path_factory):
    given = emitted(plan)
    keys = model_api_keys(plan)
    onprem = ModelStandIn("onprem", behaviour=Behaviour(status=503), api_keys=keys).start()
    cloud = ModelStandIn("cloud", behaviour=Behaviour(status=503), api_keys=keys).start()
    other = ModelStandIn("other", api_keys=keys).start()
    bedrock = ModelStandIn("bedrock").start()
    bases = {ONPREM: f"{onprem.url}/v1", CLOUD: f"{cloud.url}/v1", OTHER: f"{other.url}/v1"}
    proxy = Proxy(tmp_path_factory.mktemp("cascade"), localized(given["config"], bases, bedrock.url),
                  given["master_key"], given["env"]).start()
    yield given, proxy, {"onprem": onprem, "cloud": cloud, "bedrock": bedrock}
    proxy.stop()
    for server in (onprem, cloud, other, bedrock):
        server.stop()


def test_the_emitted_chain_is_on_prem_then_cloud_then_bedrock(plan):
    config = emitted(plan)["config"]
    chains = {name: chain for entry in config["router_settings"]["fallbacks"] for name, chain in entry.items()}
    assert chains == {ONPREM: [CLOUD, BEDROCK], CLOUD: [BEDROCK], OTHER: [BEDROCK]}


def test_on_prem_failing_then_cloud_failing_is_served_by_bedrock(cascade):
    given, proxy, servers = cascade
    status, body = proxy.call("/v1/chat/completions", {"model": ONPREM, **CHAT}, token=given["master_key"])
    assert status == 200, body
    assert "answer from bedrock" in body
    # num_retries 1: each self-hosted tier is tried twice before the next, in the cascade's order.
    assert [c.model for c in servers["onprem"].calls] == [ONPREM, ONPREM]
    assert [c.model for c in servers["cloud"].calls] == [CLOUD, CLOUD]
    assert [c.model for c in servers["bedrock"].calls] == [BEDROCK]
    assert servers["onprem"].rejected == [] and servers["cloud"].rejected == [], "each tier's API key was presented"


def test_demand_is_counted_as_the_triggers_read_it(plan, cascade, tmp_path):
    given, proxy, _ = cascade
    endpoint = given["endpoint"]
    prometheus = PrometheusServer(tmp_path, {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": "llm-gateway", "metrics_path": endpoint["path"],
            "authorization": {"type": endpoint["authorization"]["type"], "credentials": given["scrape_token"]},
            "static_configs": [{"targets": [f"127.0.0.1:{proxy.port}"],
                                "labels": {"namespace": "llm-gateway", "service": "llm-gateway"}}],
        }],
    }).start()
    try:
        (onprem_trigger,) = [t for t in trigger_queries(plan, ONPREM) if t.name == "gateway-demand"]
        (cloud_trigger,) = [t for t in trigger_queries(plan, CLOUD) if t.name == "gateway-demand"]
        assert cloud_trigger.query == demand_query(CLOUD, fallback_target=True)
        assert onprem_trigger.query == demand_query(ONPREM)
        for _ in range(4):
            status, _body = proxy.call("/v1/chat/completions", {"model": ONPREM, **CHAT}, token=given["master_key"])
            assert status == 200
            time.sleep(1.2)
        time.sleep(2)
        value = {name: [s.value for s in prometheus.query(q)] for name, q in (
            ("onprem", onprem_trigger.query), ("cloud", cloud_trigger.query),
            ("cloud by its own name only", demand_query(CLOUD)),
            ("requests counted for the cloud twin", f'sum({DEMAND_METRIC}{{requested_model="{CLOUD}"}})'))}
        assert value["onprem"][0] > 0 and value["cloud"][0] > 0, value
        # The textbook trigger (the twin's own requests) reads 0: LiteLLM has no series for it.
        assert value["cloud by its own name only"] == [0.0] and value["requests counted for the cloud twin"] == [], value
        keda = Autoscaler(scaled_object(plan, CLOUD)["spec"], replicas=0)
        replicas = keda.poll(time.time(), lambda trigger: [s.value for s in prometheus.query(trigger.query)])
        assert replicas >= 1, "on-prem overflow must wake the cloud twin from zero"
    finally:
        prometheus.stop()
