"""capacity-simulation's model lookup as a specification: a vLLM ``--model`` Hugging Face id finds its
catalog architecture by the id itself, not only through the name fallback.

The pack first matches ``--model`` against each catalog entry's ``huggingFace`` id (case-insensitive),
then falls back to the id's last path segment as a catalog name. For meta-llama/Llama-3.1-8B-Instruct
both give llama-3.1-8b-instruct, so a broken id lookup passes every test that uses such ids. The
AWQ checkpoint below is only reachable through the id: its last segment
(meta-llama-3.1-70b-instruct-awq-int4) is no catalog name.
"""

from __future__ import annotations

import pytest

from tests.policies.builders import nodepool, patch
from tests.policies.checks.test_capacity_simulation import KARPENTER, OVER, SIM, scaled_stack, scaler, server
from tests.policies.conftest import one

AWQ_70B = "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"


@pytest.mark.parametrize("model", [AWQ_70B, AWQ_70B.lower(), "Hugging-Quants/META-LLAMA-3.1-70B-INSTRUCT-AWQ-INT4"])
def test_a_checkpoint_found_only_by_its_hugging_face_id_is_judged(pack, model):
    """llama-3.1-70b-instruct-awq on one A10G (g5.2xlarge, 22888 MiB): weights = 68461592576 non-embedding
    parameters x 4.16 bits + 2101346304 embedding parameters x 2 bytes = 39802720747.5 bytes = 37.1 GiB;
    KV cache of 8192 tokens = 2 x 80 layers x 8 heads x 128 x 2 bytes x 8192 = 2.5 GiB; need 39.6 GiB
    against 0.9 x 22888 MiB = 20.1 GiB."""
    args = ["--model", model, "--max-model-len", "8192"]
    message = one(pack.stack_messages(scaled_stack(args=args), SIM),
                  "vllm (llama-3.1-70b-instruct-awq, awq-int4, tensor parallel 1, max-model-len 8192) needs "
                  "weights 37.1 GiB + KV cache 2.5 GiB = 39.6 GiB per GPU, but 0.9 of a 22.4 GiB GPU on "
                  "'inference' is 20.1 GiB: it will not load.")
    assert "llama-3.1-70b-instruct," not in message and "bf16" not in message


def test_the_same_name_under_another_organisation_is_not_that_checkpoint(pack):
    """No catalog entry has this id, and its last segment is no catalog name: the model is not judged."""
    args = ["--model", "someone-else/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "--max-model-len", "8192"]
    assert pack.stack_messages(scaled_stack(args=args), SIM) == []


def test_a_catalog_name_as_model_uses_the_fallback(pack):
    args = ["--model", "/models/llama-3.1-70b-instruct-awq", "--max-model-len", "8192"]
    one(pack.stack_messages(scaled_stack(args=args), SIM), "vllm (llama-3.1-70b-instruct-awq, awq-int4,",
        "need", "39.6 GiB per GPU")


def test_a_nodepool_requirement_that_a_gpu_label_does_not_exist_admits_only_cpu_types(pack):
    """instance-gpu-count DoesNotExist keeps a g5/m7i NodePool to m7i types (Karpenter sets the label on
    GPU types only), so a 1-GPU server fits none of them."""
    def pool(*requirements: dict) -> dict:
        return patch(nodepool(), {"spec.template.spec.requirements": [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "m7i"]}, *requirements]})

    selector = {"llm-platform.io/pool": "gpu-inference"}
    cpu_only = pool({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"})
    message = one(pack.stack_messages([KARPENTER, cpu_only, server(selector=selector), scaler()], SIM),
                  "vllm requests 1 of nvidia.com/gpu per pod but the roomiest usable node of Karpenter NodePool "
                  "'gpu-inference' (m7i.")
    assert "(g5." not in message
    assert pack.stack_messages([KARPENTER, pool(), server(selector=selector), scaler()], SIM) == []


def test_overcommit_advice_is_attached_to_the_pool(pack):
    """capacity-overcommit names the shared pool's resource, so the finding shows on it in a preview."""
    stack = [*scaled_stack(max_size=3), server("other"), scaler("other", low=0, high=2,
                                                                query='sum(rate(litellm_requests_total{model="other"}[2m]))')]
    [violation] = pack.analyze_stack(stack, OVER)
    group = next(r for r in stack if r["type"] == "eks:index:ManagedNodeGroup")
    assert violation.urn == group["urn"]
