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
    downloaded = ("is read only when the weights are streamed, and this model's are downloaded (weights: download, a "
                  "huggingFace source or source.format pytorch); remove streaming")
    assert errors(weights="download") == [(("streaming",), downloaded)]
    # Downloaded by default: a pytorch checkpoint, which the streamer cannot read.
    assert errors(weights=None, source={**MODEL["source"], "format": "pytorch"}) == [(("streaming",), downloaded)]
    without = {k: v for k, v in MODEL.items() if k != "streaming"}
    ServedModel.model_validate({**without, "weights": "download"})  # no streaming block: nothing to say


def test_a_default_streamed_model_is_told_its_buffers_come_with_the_default():
    """``weights`` unset: the model streams because its source is s3 in safetensors, so the refusal says so and
    offers the opt-out. 4 ranks x 8 GiB = 32 GiB against 63Gi (at most 31.5 GiB allowed)."""
    assert errors(weights=None, memory="63Gi") == [(("streaming", "memoryLimitGib"), (
        "4 streamer buffers of 8 GiB (one per tensor-parallel rank) would take more than half of the container's "
        "memory 63Gi; streamed by default as an s3 source in safetensors; lower streaming.memoryLimitGib, raise memory "
        "or set weights: download"))]
