"""The real LiteLLM proxy on the config a prefix-aware dev copy emits: the routed model's requests go to
its picker's address (not its Service), are served there when the pool has a ready pod, and fall back to
Bedrock, counted under the model asked for, when the picker answers what it answers with no endpoint
(503 and its error text: llm-d/llm-d-router v0.10.0 pkg/epp/requestcontrol/director.go and
pkg/common/error/error.go ``BuildErrResponse``; docs/prefix-aware-routing.md)."""

from __future__ import annotations

import copy
import time

import pytest

from components.specs.gateway import DEMAND_METRIC
from components.specs.routing import NO_ENDPOINT_BODY, NO_ENDPOINT_STATUS
from tests.components.serving.test_gateway_proxy import CHAT, counter
from tests.components.serving.test_prefix_aware_routing import ROUTED, routed_serving
from tests.conftest import plan_with
from tests.support.litellm_proxy import Proxy, emitted, model_api_keys
from tests.support.model_standin import Behaviour, ModelStandIn

#: The routed model's address as the program must emit it: the picker Service's Envoy port.
PICKER_URL = "http://llama-3-1-8b-instruct-epp.serving-interactive.svc.cluster.local:8081/v1"
BATCH_URL = "http://qwen2-5-7b-instruct.serving-batch.svc.cluster.local:8000/v1"
FALLBACK = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


def by_address(config: dict, addresses: dict[str, str], bedrock_url: str) -> dict:
    """The emitted config with each self-hosted ``api_base`` replaced by the stand-in listening for that
    exact address (an address the test does not expect fails with KeyError), Bedrock by its stand-in."""
    local = copy.deepcopy(config)
    for route in local["model_list"]:
        params = route["litellm_params"]
        if params["model"].startswith("hosted_vllm/"):
            params["api_base"] = addresses[params["api_base"]]
        elif params["model"].startswith("bedrock/"):
            params["aws_bedrock_runtime_endpoint"] = bedrock_url
    return local


class RoutedGateway:
    def __init__(self, plan, workdir, picker: Behaviour):
        self.given = emitted(plan)
        keys = model_api_keys(plan)
        self.picker = ModelStandIn("picker", behaviour=picker, api_keys=keys).start()
        self.service = ModelStandIn("vllm", api_keys=keys).start()
        self.bedrock = ModelStandIn("bedrock").start()
        config = by_address(self.given["config"], {PICKER_URL: f"{self.picker.url}/v1", BATCH_URL: f"{self.service.url}/v1"},
                            self.bedrock.url)
        self.proxy = Proxy(workdir, config, self.given["master_key"], self.given["env"]).start()

    def chat(self, model: str) -> tuple[int, str]:
        return self.proxy.call("/v1/chat/completions", {"model": model, **CHAT}, token=self.given["master_key"])

    def demand(self, model: str) -> float:
        endpoint = self.given["endpoint"]
        return counter(self.proxy.call(endpoint["path"], token=self.given["scrape_token"])[1], DEMAND_METRIC, requested_model=model)

    def stop(self) -> None:
        self.proxy.stop()
        for stand_in in (self.picker, self.service, self.bedrock):
            stand_in.stop()


@pytest.fixture(scope="module")
def routed_plan():
    return plan_with("dev", serving=routed_serving())


@pytest.fixture(scope="module")
def warm(routed_plan, tmp_path_factory):
    gateway = RoutedGateway(routed_plan, tmp_path_factory.mktemp("routed-warm"), Behaviour())
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def cold(routed_plan, tmp_path_factory):
    no_endpoint = Behaviour(status=NO_ENDPOINT_STATUS, text=NO_ENDPOINT_BODY)
    gateway = RoutedGateway(routed_plan, tmp_path_factory.mktemp("routed-cold"), no_endpoint)
    yield gateway
    gateway.stop()


def test_the_picker_answers_503_with_its_error_text():
    assert (NO_ENDPOINT_STATUS, NO_ENDPOINT_BODY) == (
        503, "inference error: ServiceUnavailable - failed to find endpoint candidates for serving the request")


def test_the_routed_model_is_served_through_its_picker(warm):
    status, body = warm.chat(ROUTED)
    assert status == 200 and "answer from picker" in body, body
    assert [c.model for c in warm.picker.calls] == [ROUTED]
    assert warm.picker.rejected == [], "the tier's model API key reaches the model through Envoy"
    assert warm.service.calls == [] and warm.bedrock.calls == []


def test_a_service_routed_model_still_goes_to_its_service(warm):
    status, body = warm.chat("qwen2-5-7b-instruct")
    assert status == 200 and "answer from vllm" in body
    assert [c.model for c in warm.service.calls] == ["qwen2-5-7b-instruct"]


def test_no_endpoint_falls_back_to_bedrock_and_counts_the_model(cold):
    before = cold.demand(ROUTED)
    status, body = cold.chat(ROUTED)
    assert status == 200, body
    assert "answer from bedrock" in body
    assert len(cold.picker.calls) >= 1 and {c.model for c in cold.picker.calls} == {ROUTED}, "the routed path was tried first"
    assert [c.model for c in cold.bedrock.calls] == [FALLBACK]
    for _ in range(50):  # the proxy counts after it answers
        if cold.demand(ROUTED) >= before + 1:
            break
        time.sleep(0.3)
    assert cold.demand(ROUTED) == before + 1, "the demand KEDA wakes the model on"
