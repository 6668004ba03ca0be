"""What a replica can generate, and so what a token costs, at the KV-cache share its autoscaler aims for.

A decode step of a batch of sequences reads, on every GPU of the replica, that GPU's share of the
weights and the KV cache of every sequence in the batch; on these GPUs the step is bound by memory
bandwidth, not arithmetic (the roofline of autoregressive decoding). So, per replica:

- KV cache per GPU: what vLLM's ``--gpu-memory-utilization`` share of the GPU leaves after the weights
  (:func:`policies.capacity.llm.memory_fit`); at the tier's KV-cache scaling target ``target`` of it is
  in use, since the autoscaler adds replicas above that share and removes them below;
- sequences in flight: that cache over the KV bytes of one sequence at half ``--max-model-len`` (a
  sequence's context grows from its prompt towards the limit; half is the mean of a uniform spread);
- step time: (weights + KV cache in use) per GPU / the GPU's memory bandwidth; one token per sequence
  per step.

It is an estimate of the best case: no time for prefill, scheduling or kernels below peak bandwidth,
so real throughput is lower and the real cost per token higher. It answers "what would a million
tokens cost if the tier ran at its target", the figure to put beside Bedrock's price; the recording
rules measure what they do cost. Embedding models have no decode step and get no estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from .llm import MIB, Architecture

#: Memory bandwidth per GPU (GB/s) by the catalog's GPU name and memory (MiB), from NVIDIA's datasheets:
#: T4 "320+ GB/s"; A10 600 GB/s (the A10G in G5 is its AWS variant, same memory system); L4 300 GB/s;
#: L40S 864 GB/s; A100 SXM 40 GB 1,555 GB/s and 80 GB 2,039 GB/s; H100 SXM 3.35 TB/s; H200 4.8 TB/s;
#: HGX B200 and B300 8 TB/s per GPU; RTX PRO 6000 Blackwell Server Edition 1,792 GB/s.
GPU_MEMORY_BANDWIDTH_GBPS: dict[tuple[str, int], float] = {
    ("t4", 16384): 320, ("a10g", 22888): 600, ("l4", 22888): 300, ("l40s", 45776): 864,
    ("a100", 40960): 1555, ("a100", 81920): 2039, ("h100", 81920): 3350, ("h200", 144384): 4800,
    ("b200", 183359): 8000, ("b300", 275040): 8000, ("rtx-pro-server-6000", 98304): 1792,
}
#: Mean context of a sequence in flight, as a share of ``--max-model-len``.
MEAN_CONTEXT_SHARE = 0.5
#: An output token counts as this many input tokens of GPU time, here and in the token-cost recording
#: rules: the default of Google's GKE Inference Quickstart cost model (``google.cloud.gkerecommender.v1.Cost``,
#: ``output_input_cost_ratio``: "If not provided, 4.0 is used, assuming a 4:1 output:input cost ratio").
OUTPUT_INPUT_COST_RATIO = 4.0


@dataclass(frozen=True)
class TokenCostEstimate:
    """Generated tokens per second of one replica at the target, and USD per million tokens."""

    tokens_per_second: float
    usd_per_million_output: float

    @property
    def usd_per_million_input(self) -> float:
        return self.usd_per_million_output / OUTPUT_INPUT_COST_RATIO


def decode_tokens_per_second(arch: Architecture, *, tensor_parallel: int, gpu_memory_mib: float, utilization: float,
                             max_model_len: int, kv_cache_target: float, bandwidth_gbps: float,
                             pipeline_parallel: int = 1) -> float | None:
    """Generated tokens per second of one replica at ``kv_cache_target`` of its KV cache (``None``: the
    weights leave no KV cache).

    With ``pipeline_parallel`` stages (a multi-node replica) each stage's GPUs hold their layers' weights
    and those layers' KV cache of every sequence; vLLM runs as many micro-batches as stages, so every stage
    is busy: one round, in which each sequence gains a token, reads each stage's weights once per
    micro-batch and the KV cache in use once."""
    weights = arch.weight_bytes_per_gpu(tensor_parallel, pipeline_parallel)
    kv_cache = utilization * gpu_memory_mib * MIB - weights
    if kv_cache <= 0:
        return None
    in_use = kv_cache_target * kv_cache
    context = max(1, round(max_model_len * MEAN_CONTEXT_SHARE))
    sequences = in_use / arch.kv_bytes_per_gpu(context, tensor_parallel, pipeline_parallel=pipeline_parallel)
    round_seconds = (pipeline_parallel * weights + in_use) / (bandwidth_gbps * 1e9)
    return sequences / round_seconds


def token_cost_estimate(arch: Architecture, *, gpus: int, tensor_parallel: int, gpu_name: str | None,
                        gpu_memory_mib: int | None, usd_per_gpu_hour: float, utilization: float, max_model_len: int,
                        kv_cache_target: float, pipeline_parallel: int = 1) -> TokenCostEstimate | None:
    """USD per million generated tokens of a replica of ``gpus`` GPUs at ``usd_per_gpu_hour`` (``None``
    where the GPU's bandwidth is not known or the model leaves no KV cache)."""
    bandwidth = GPU_MEMORY_BANDWIDTH_GBPS.get((gpu_name or "", gpu_memory_mib or 0))
    if bandwidth is None or gpu_memory_mib is None:
        return None
    rate = decode_tokens_per_second(arch, tensor_parallel=tensor_parallel, gpu_memory_mib=gpu_memory_mib,
                                    utilization=utilization, max_model_len=max_model_len,
                                    kv_cache_target=kv_cache_target, bandwidth_gbps=bandwidth,
                                    pipeline_parallel=pipeline_parallel)
    if not rate:
        return None
    return TokenCostEstimate(rate, gpus * usd_per_gpu_hour / (rate * 3600) * 1e6)
