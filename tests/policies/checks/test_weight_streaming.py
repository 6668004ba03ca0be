"""weight-streamer-buffers-fit over gRPC: the streamer's CPU buffers (one per tensor-parallel rank) at most
half of the server container's memory limit, as the settings judge streaming.memoryLimitGib.

Figures: 4 ranks x 8 GiB (8589934592 bytes) = 32 GiB of buffers, so 64Gi is the least memory that passes."""

from __future__ import annotations

import pytest

from tests.policies.builders import patch, workload
from tests.policies.conftest import one

POLICY = "weight-streamer-buffers-fit"


def streamed(memory: str, *, limit: str = "8589934592", ranks: int = 4, load_format: str = "runai_streamer") -> dict:
    return patch(workload(name="llama-70b", namespace="serving-interactive", gpus=ranks), {
        "spec.template.spec.containers.0": {
            "name": "vllm", "image": "vllm/vllm-openai:v0.33.0",
            "args": ["s3://models/llama/", "--load-format", load_format, "--tensor-parallel-size", str(ranks)],
            "env": [{"name": "RUNAI_STREAMER_MEMORY_LIMIT", "value": limit}],
            "resources": {"limits": {"memory": memory, "nvidia.com/gpu": str(ranks)}},
        }})


@pytest.mark.parametrize("memory", ["64Gi", "68719476736", "160Gi"])
def test_buffers_within_half_the_memory_pass(pack, memory):
    assert pack.messages(streamed(memory), POLICY) == []


def test_buffers_over_half_the_memory_are_refused(pack):
    one(pack.messages(streamed("63Gi"), POLICY),
        "Deployment 'llama-70b': container 'vllm' streams its weights with 4 streamer buffer(s) of 8 GiB "
        "(RUNAI_STREAMER_MEMORY_LIMIT, one per tensor-parallel rank), 32 GiB in all, more than half of its memory "
        "limit of 63 GiB")


def test_a_buffer_larger_than_the_whole_container_is_refused(pack):
    one(pack.messages(streamed("16Gi", limit="34359738368", ranks=1), POLICY),
        "1 streamer buffer(s) of 32 GiB", "more than half of its memory limit of 16 GiB")


def test_downloaded_weights_and_unset_limits_are_not_judged(pack):
    assert pack.messages(streamed("8Gi", load_format="safetensors"), POLICY) == []
    unset = patch(streamed("8Gi"), {"spec.template.spec.containers.0.env": []})
    assert pack.messages(unset, POLICY) == []
