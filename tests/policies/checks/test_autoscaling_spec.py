"""vllm-metric-names-current, as a specification: the advice rewrites only the metric's prefix."""

from __future__ import annotations

from tests.policies.builders import scaled_object
from tests.policies.conftest import one

METRICS = "vllm-metric-names-current"


def test_only_the_vllm_prefix_is_respelled(pack):
    message = one(pack.messages(scaled_object("sum(vllm_lora_vllm_requests)"), METRICS),
                  "uses 'vllm_lora_vllm_requests', an underscore spelling that matches no vLLM metric. Use "
                  "'vllm:lora_vllm_requests'.")
    assert "vllm:lora_vllm:" not in message
