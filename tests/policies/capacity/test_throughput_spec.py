"""The cost-per-token estimate at a tier's KV-cache target, worked by hand from the model catalog, the
instance catalog and NVIDIA's bandwidth figures.

Llama 3.1 70B AWQ (prod's interactive model) on a g5.12xlarge, tensor-parallel 4, 0.92 of each A10G
(22,888 MiB), max-model-len 8192, KV-cache target 0.75:
- weights: (70,562,938,880 - 2,101,346,304 embedding parameters) x 4.16 / 8 + 2,101,346,304 x 2 bytes
  = 39,802,720,747.52 bytes, 9,950,680,186.88 per GPU;
- vLLM's share: 0.92 x 22,888 x 1,048,576 = 22,079,822,888.96 bytes; KV cache 12,129,142,702.08, in use
  at 0.75: 9,096,857,026.56;
- one sequence at 4,096 tokens (half of 8192): 2 x 80 layers x 2 KV heads per GPU x 128 x 2 bytes x 4096
  = 335,544,320 bytes, so 27.11 sequences;
- a step reads 19,047,537,213.44 bytes per GPU at 600 GB/s: 31.75 ms; 27.11 / 0.03175 = 854.0 tokens/s;
- 4 GPUs x $5.672 / 4 = $5.672 an hour / (854.0 x 3600) tokens x 1e6 = $1.845 per million output
  tokens, $0.461 per million input tokens.
"""

from __future__ import annotations

import pytest

from policies.capacity.llm import model_catalog
from policies.capacity.throughput import decode_tokens_per_second, token_cost_estimate

LLAMA_70B_AWQ = model_catalog()["llama-3.1-70b-instruct-awq"]


def test_the_70b_on_four_a10g_at_its_target():
    estimate = token_cost_estimate(LLAMA_70B_AWQ, gpus=4, tensor_parallel=4, gpu_name="a10g", gpu_memory_mib=22888,
                                   usd_per_gpu_hour=1.418, utilization=0.92, max_model_len=8192, kv_cache_target=0.75)
    assert estimate is not None
    assert estimate.tokens_per_second == pytest.approx(854.0, abs=0.1)
    assert estimate.usd_per_million_output == pytest.approx(1.845, abs=0.001)
    assert estimate.usd_per_million_input == pytest.approx(0.461, abs=0.001)


def test_more_of_the_cache_in_use_means_more_tokens_per_second_but_not_proportionally():
    """Each step reads the weights once whatever the batch: doubling the sequences in flight less than
    doubles the rate, because the KV cache read grows with them."""
    def rate(target: float) -> float:
        value = decode_tokens_per_second(LLAMA_70B_AWQ, tensor_parallel=4, gpu_memory_mib=22888, utilization=0.92,
                                         max_model_len=8192, kv_cache_target=target, bandwidth_gbps=600)
        assert value is not None
        return value

    assert rate(0.75) / rate(0.375) == pytest.approx(2 * (9.9507 + 4.5484) / (9.9507 + 9.0969), abs=0.001)


def test_no_estimate_without_a_known_bandwidth_or_room_for_a_kv_cache():
    common = {"gpus": 1, "tensor_parallel": 1, "usd_per_gpu_hour": 1.0, "utilization": 0.9, "max_model_len": 8192,
              "kv_cache_target": 0.75}
    assert token_cost_estimate(LLAMA_70B_AWQ, gpu_name="mi300x", gpu_memory_mib=196608, **common) is None
    # 40 GB of weights on one 22 GiB GPU: no KV cache at all.
    assert token_cost_estimate(LLAMA_70B_AWQ, gpu_name="a10g", gpu_memory_mib=22888, **common) is None
