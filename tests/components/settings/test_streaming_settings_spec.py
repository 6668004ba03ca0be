"""Streamed weights' settings against the container's memory in every unit Kubernetes reads, and a
``streaming`` block where it does nothing.

The base is prod's 70B model (4 GPUs, weights: stream, streaming.memoryLimitGib 8): four 8 GiB streamer
buffers (one per tensor-parallel rank) are 32 GiB, which must be at most half the container's memory,
so 64Gi is the least memory it takes.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.settings.serving import ServedModel

MODEL = {"name": "llama-3-1-70b-instruct-awq",
         "source": {"s3": "s3://llm-platform-models-prod/meta-llama/Llama-3.1-70B-Instruct-AWQ/"},
         "pool": "gpu-interactive", "gpusPerReplica": 4, "catalog": "llama-3.1-70b-instruct-awq", "maxModelLen": 8192,
         "gpuMemoryUtilization": 0.92, "replicas": {"min": 2, "max": 4}, "cpu": "40", "memory": "160Gi",
         "weights": "stream", "streaming": {"concurrency": 32, "memoryLimitGib": 8}}
BUFFERS = ("4 streamer buffers of 8 GiB (one per tensor-parallel rank) would take more than half of the "
           "container's memory {memory}; lower streaming.memoryLimitGib or raise memory")


def errors(**changes) -> list[tuple[tuple, str]]:
    try:
        ServedModel.model_validate({**MODEL, **changes})
    except ValidationError as exc:
        return [(tuple(e["loc"]) + tuple((e.get("ctx") or {}).get("path", ())), e["msg"]) for e in exc.errors()]
    return []


@pytest.mark.parametrize("memory", ["64Gi", "68719476736", "68719476736000m", "65536Mi", "67108864Ki"])
def test_the_least_memory_for_the_buffers_is_accepted_in_every_unit(memory):
    assert errors(memory=memory) == []


@pytest.mark.parametrize("memory", ["63Gi", "68719476735", "68719476735000m", "65535Mi"])
def test_less_memory_than_twice_the_buffers_is_refused_in_every_unit(memory):
    assert errors(memory=memory) == [(("streaming", "memoryLimitGib"), BUFFERS.format(memory=memory))]


@pytest.mark.parametrize("memory", ["500m", "1023Mi", "1000000"])
def test_memory_under_a_gibibyte_is_refused(memory):
    [(loc, msg)] = errors(memory=memory)
    assert loc == ("memory",)
    assert msg == (f"Value error, {memory!r} is less than 1Gi; vLLM's own host-side state (tokenizer, CUDA contexts, "
                   "engine) needs several GiB (write memory as e.g. '32Gi'; 'm' is millibytes)")


def test_a_streaming_block_beside_downloaded_weights_is_refused():
    assert errors(weights="download") == [
        (("streaming",), "is read only with weights: stream, and this model's weights are download; remove "
                         "streaming, or set weights: stream")]
    without = {k: v for k, v in MODEL.items() if k != "streaming"}
    ServedModel.model_validate({**without, "weights": "download"})  # no streaming block: nothing to say
