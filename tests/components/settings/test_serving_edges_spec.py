"""Serving settings at their edges, as literals: a tensor-parallel size against the KV heads, and the upper
bound of the gateway's wake-up threshold."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.settings.serving import ServedModel, TierScaling

#: 24 attention heads (hiddenSize 3072 / headDim 128) and 8 KV heads: 3 and 6 divide the heads but neither
#: divides nor is divided by 8; 4 and 8 split the KV heads, 24 is more GPUs than gpusPerReplica allows.
ARCHITECTURE = {"parameters": 3_000_000_000, "vocabSize": 128256, "hiddenSize": 3072, "layers": 28, "kvHeads": 8,
                "headDim": 128, "quantization": "bf16"}
MODEL = {"name": "custom-3b", "source": {"s3": "s3://models/custom-3b/"}, "pool": "inference",
         "architecture": ARCHITECTURE, "replicas": {"min": 0, "max": 1}, "cpu": "8", "memory": "64Gi"}


def errors(model_class, data) -> list[tuple[tuple, str]]:
    try:
        model_class.model_validate(data)
    except ValidationError as exc:
        return [(tuple(e["loc"]) + tuple((e.get("ctx") or {}).get("path", ())), e["msg"]) for e in exc.errors()]
    return []


@pytest.mark.parametrize("gpus", [3, 6])
def test_a_tensor_parallel_size_that_neither_divides_nor_is_divided_by_the_kv_heads_is_refused(gpus):
    assert errors(ServedModel, {**MODEL, "gpusPerReplica": gpus}) == [
        (("gpusPerReplica",), f"{gpus} GPUs and the model's 8 KV heads: neither divides the other, so vLLM cannot "
                              "split or replicate the KV heads evenly")]


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_a_tensor_parallel_size_that_splits_the_kv_heads_is_accepted(gpus):
    assert errors(ServedModel, {**MODEL, "gpusPerReplica": gpus}) == []


def test_a_size_that_does_not_divide_the_attention_heads_is_refused_first():
    [(loc, msg)] = errors(ServedModel, {**MODEL, "gpusPerReplica": 5})
    assert loc == ("gpusPerReplica",) and msg.startswith("5 GPUs does not divide the model's 24 attention heads")


def test_activation_requests_go_up_to_ten_thousand():
    assert errors(TierScaling, {"activationRequests": 10_000}) == []
    [(loc, msg)] = errors(TierScaling, {"activationRequests": 10_000.5})
    assert loc == ("activationRequests",) and msg == "Input should be less than or equal to 10000"
