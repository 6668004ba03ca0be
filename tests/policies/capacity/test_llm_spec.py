"""Model memory (policies/capacity/llm.py) as a specification: figures worked by hand from the
checkpoints' config.json values in model_catalog.json and the quantizations' bits per weight."""

from __future__ import annotations

import pytest

from policies.capacity.llm import (
    GIB,
    MIB,
    Architecture,
    architecture_from_json,
    by_hugging_face_id,
    memory_fit,
    model_catalog,
)

LLAMA_8B = {"parameters": 8030261248, "vocabSize": 128256, "hiddenSize": 4096, "tiedEmbeddings": False,
            "layers": 32, "kvHeads": 8, "headDim": 128, "quantization": "bf16", "maxPositionEmbeddings": 131072}


def test_units():
    assert (GIB, MIB) == (1073741824, 1048576)


@pytest.mark.parametrize(
    "quantization, weight_bytes",
    [
        ("bf16", 16060522496),  # 8030261248 x 2 bytes, embeddings included
        ("fp16", 16060522496),
        # fp8 leaves the 2 x 128256 x 4096 = 1050673152 embedding parameters in 16 bits:
        # (8030261248 - 1050673152) x 1 + 1050673152 x 2
        ("fp8", 9080934400),
        # int4 at 4.16 bits (group scales): 6979588096 x 4.16 / 8 + 1050673152 x 2
        ("awq-int4", 5730732113.92),
        ("gptq-int4", 5730732113.92),
    ],
)
def test_weight_bytes_by_quantization(quantization, weight_bytes):
    arch = architecture_from_json("llama", {**LLAMA_8B, "quantization": quantization})
    assert arch.weight_bytes() == pytest.approx(weight_bytes, rel=1e-12)


def test_tied_embeddings_count_once():
    """Tied: 128256 x 4096 = 525336576 embedding parameters stay 16-bit under fp8."""
    arch = architecture_from_json("tied", {**LLAMA_8B, "tiedEmbeddings": True, "quantization": "fp8"})
    assert arch.embedding_parameters == 525336576
    assert arch.weight_bytes() == (8030261248 - 525336576) * 1 + 525336576 * 2


def test_kv_heads_split_over_tensor_parallel_gpus_rounding_up():
    """8 KV heads over 3 GPUs: 3 per GPU (ceil); per token 2 x 32 layers x heads x 128 x 2 bytes."""
    arch = architecture_from_json("llama", LLAMA_8B)
    assert arch.kv_bytes_per_gpu(1, 1) == 131072
    assert arch.kv_bytes_per_gpu(1, 3) == 2 * 32 * 3 * 128 * 2
    assert arch.kv_bytes_per_gpu(1000, 2) == 2 * 32 * 4 * 128 * 2 * 1000
    assert arch.kv_bytes_per_gpu(10, 1, kv_bytes=1) == 2 * 32 * 8 * 128 * 1 * 10


def test_memory_fit_boundary_and_description():
    arch = architecture_from_json("llama", LLAMA_8B)
    fit = memory_fit(arch, max_model_len=8192, tensor_parallel=1, gpu_memory_mib=22888, utilization=0.9)
    assert (fit.weights_per_gpu, fit.kv_per_gpu) == (16060522496, 1073741824)
    assert fit.budget_per_gpu == pytest.approx(0.9 * 22888 * 1048576)
    assert fit.need_per_gpu == 17134264320 and fit.fits is True
    assert fit.describe() == "weights 15.0 GiB + KV cache 1.0 GiB = 16.0 GiB per GPU"
    exact = memory_fit(arch, max_model_len=8192, tensor_parallel=1, gpu_memory_mib=17134264320 / 1048576,
                       utilization=1.0)
    assert exact.fits is True, "need equal to the budget fits"
    short = memory_fit(arch, max_model_len=8192, tensor_parallel=2, gpu_memory_mib=8000, utilization=0.9)
    assert (short.weights_per_gpu, short.kv_per_gpu) == (8030261248, 536870912)
    assert short.fits is False


def test_architecture_from_json_and_back():
    arch = architecture_from_json("llama", LLAMA_8B)
    assert arch == Architecture("llama", 8030261248, 128256, 4096, False, 32, 8, 128, "bf16", 131072)
    assert arch.to_json() == {"name": "llama", **LLAMA_8B}
    bare = {k: v for k, v in LLAMA_8B.items() if k not in ("maxPositionEmbeddings", "tiedEmbeddings")}
    plain = architecture_from_json("plain", bare)
    assert plain.tied_embeddings is False and plain.max_position_embeddings is None
    assert "maxPositionEmbeddings" not in plain.to_json()
    with pytest.raises(ValueError) as caught:
        architecture_from_json("x", {**LLAMA_8B, "quantization": "int3"})
    assert str(caught.value) == "unknown quantization 'int3'; allowed: bf16, fp16, fp8, awq-int4, gptq-int4"


@pytest.mark.parametrize(
    "repo, name",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "llama-3.1-70b-instruct-awq"),
        ("HUGGING-QUANTS/meta-llama-3.1-70b-instruct-awq-int4", "llama-3.1-70b-instruct-awq"),
        ("Qwen/Qwen2.5-32B-Instruct-AWQ", "qwen2.5-32b-instruct-awq"),
        ("BAAI/bge-m3", "bge-m3"),
    ],
)
def test_lookup_by_hugging_face_id(repo, name):
    arch = by_hugging_face_id(repo)
    assert arch is not None and arch.name == name
    assert arch == model_catalog()[name]


@pytest.mark.parametrize("repo", ["someone/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", "llama-3.1-8b-instruct", ""])
def test_lookup_by_hugging_face_id_needs_the_whole_id(repo):
    assert by_hugging_face_id(repo) is None


def test_catalog_is_a_fresh_mapping():
    catalog = model_catalog()
    catalog.pop("bge-m3")
    assert "bge-m3" in model_catalog()
    assert len(model_catalog()) == 9


def test_llama_405b_fp8_keeps_attention_and_the_outer_layers_in_16_bits():
    """Meta's FP8 checkpoint quantizes the MLPs of layers 2-125 only (Llama 3 paper, section 6.2):
    405853388800 - 4202692608 embeddings - 77112229888 kept = 324538466304 at 1 byte, the rest at 2."""
    arch = model_catalog()["llama-3.1-405b-instruct-fp8"]
    assert arch.weight_bytes() == 324538466304 + (4202692608 + 77112229888) * 2 == 487168311296


def test_pipeline_stages_split_layers_and_each_holds_one_embedding_matrix():
    """Two stages of 126 layers hold 63 each; untied embeddings: the first stage the input matrix, the
    last the output head, each 128256 x 16384 x 2 bytes. Per GPU of 8: (layers' bytes / 2 + one matrix) / 8."""
    arch = model_catalog()["llama-3.1-405b-instruct-fp8"]
    layers = 487168311296 - 8405385216
    assert arch.weight_bytes_per_gpu(8, 2) == pytest.approx((layers * 63 / 126 + 4202692608) / 8, rel=1e-12)
    assert arch.weight_bytes_per_gpu(8, 1) == 487168311296 / 8
    # 8 KV heads over 8 ranks, 63 layers per stage: 2 x 63 x 1 x 128 x 2 bytes per token.
    assert arch.kv_bytes_per_gpu(1, 8, pipeline_parallel=2) == 2 * 63 * 1 * 128 * 2


def test_uneven_stages_size_the_fullest_one():
    """61 layers over 2 stages: vLLM gives 31 and 30; the fullest (31) decides the fit."""
    arch = model_catalog()["deepseek-v3-fp8"]
    assert arch.stage_layers(2) == 31
    assert arch.stage_layers(1) == 61


def test_mla_caches_one_latent_per_layer_on_every_rank():
    """DeepSeek-V3: 576 values (512 + 64) per token and layer, bf16, not split over tensor-parallel ranks
    (the textbook per-head split would give 2 x 61 x 16 x 128 x 2 = 499712 bytes per token at TP 8)."""
    arch = model_catalog()["deepseek-v3-fp8"]
    assert arch.kv_bytes_per_gpu(1, 8) == 61 * 576 * 2 == 70272
    assert arch.kv_bytes_per_gpu(1, 1) == 70272
    assert arch.query_heads == 128


def test_deepseek_v3_fp8_needs_two_h100_nodes():
    """671026558976 parameters, 1853358080 of them BF16 embeddings: 672879917056 bytes. On 8 H100s
    (0.9 x 81920 MiB = 72 GiB each) that is 78.3 GiB per GPU: no fit; over 2 nodes (31 of 61 layers per
    stage) 39.8 GiB: fits."""
    arch = model_catalog()["deepseek-v3-fp8"]
    assert arch.weight_bytes() == 669173200896 + 1853358080 * 2 == 672879917056
    one = memory_fit(arch, max_model_len=8192, tensor_parallel=8, gpu_memory_mib=81920, utilization=0.9)
    two = memory_fit(arch, max_model_len=8192, tensor_parallel=8, gpu_memory_mib=81920, utilization=0.9,
                     pipeline_parallel=2)
    assert not one.fits and two.fits
    assert f"{one.weights_per_gpu / GIB:.1f}" == "78.3" and f"{two.weights_per_gpu / GIB:.1f}" == "39.8"
