"""Will a model load: weights plus the KV cache of one max-length sequence within vLLM's share of GPU memory.

vLLM preallocates ``--gpu-memory-utilization`` of every GPU at start; tensor parallelism splits the
weights and the KV heads over ``--tensor-parallel-size`` GPUs (KV heads are replicated when there
are fewer of them than GPUs). Pipeline parallelism (``--pipeline-parallel-size``, one stage per node
of a multi-node replica) gives each stage a contiguous run of layers: vLLM's ``get_pp_indices``
(vllm/distributed/utils.py) hands out ``layers // pp`` each and the remainder to some stages, so the
fullest stage holds ``ceil(layers / pp)`` layers, their weights and their KV cache; the input
embeddings sit on the first stage and the output head on the last. Multi-head latent attention
(DeepSeek-V3's MLA) caches one compressed latent per token and layer (``kv_lora_rank +
qk_rope_head_dim`` values), which every tensor-parallel rank holds whole. The architecture comes
from ``model_catalog.json`` or an explicit override with the same fields.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

CATALOG_PATH = Path(__file__).resolve().parent / "model_catalog.json"
GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class Architecture:
    """What decides a model's GPU memory: parameters, their precision, and the KV cache shape."""

    name: str
    parameters: int
    vocab_size: int
    hidden_size: int
    tied_embeddings: bool
    layers: int
    kv_heads: int
    head_dim: int
    quantization: str
    max_position_embeddings: int | None = None
    #: Parameters besides the embeddings that a quantized checkpoint keeps in 16 bits (Meta's FP8
    #: Llama 3.1 405B leaves self-attention and the first and last layers' MLPs unquantized); 0: none.
    unquantized_parameters: int = 0
    #: Attention (query) heads when they are not ``hidden_size / head_dim`` (MLA models); ``None``: that ratio.
    attention_heads: int | None = None
    #: MLA's cached latent per token and layer (``kv_lora_rank + qk_rope_head_dim``); ``None``: not MLA.
    mla_kv_dim: int | None = None

    @property
    def embedding_parameters(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def query_heads(self) -> int:
        """The attention heads vLLM shards over tensor-parallel ranks."""
        if self.attention_heads is not None:
            return self.attention_heads
        return self.hidden_size // self.head_dim if self.head_dim else 0

    def _embedding_bytes(self) -> float:
        quant = quantizations()[self.quantization]
        embeddings = min(self.embedding_parameters, self.parameters)
        return embeddings * (float(quant["bitsPerWeight"]) / 8 if quant["embeddingsQuantized"] else 2)

    def weight_bytes(self) -> float:
        quant = quantizations()[self.quantization]
        bits = float(quant["bitsPerWeight"])
        if quant["embeddingsQuantized"]:
            return self.parameters * bits / 8
        embeddings = min(self.embedding_parameters, self.parameters)
        kept = min(self.unquantized_parameters, self.parameters - embeddings)
        return (self.parameters - embeddings - kept) * bits / 8 + (embeddings + kept) * 2

    def stage_layers(self, pipeline_parallel: int) -> int:
        """Layers of the fullest pipeline stage (vLLM ``get_pp_indices``: ``layers // pp``, remainder spread)."""
        return math.ceil(self.layers / max(pipeline_parallel, 1))

    def weight_bytes_per_gpu(self, tensor_parallel: int, pipeline_parallel: int = 1) -> float:
        """Weights one GPU of the fullest stage holds: its layers' share over the tensor-parallel ranks,
        plus the embedding matrix its stage holds (both at one stage; one of two when untied and split)."""
        if pipeline_parallel <= 1:
            return self.weight_bytes() / tensor_parallel
        embeddings = self._embedding_bytes()
        layers = self.weight_bytes() - embeddings
        stage_embeddings = embeddings if self.tied_embeddings else embeddings / 2
        return (layers * self.stage_layers(pipeline_parallel) / self.layers + stage_embeddings) / tensor_parallel

    def kv_bytes_per_gpu(self, tokens: int, tensor_parallel: int, kv_bytes: int = 2, pipeline_parallel: int = 1) -> float:
        layers = self.stage_layers(pipeline_parallel)
        if self.mla_kv_dim is not None:
            return layers * self.mla_kv_dim * kv_bytes * tokens
        heads_per_gpu = math.ceil(self.kv_heads / tensor_parallel)
        return 2 * layers * heads_per_gpu * self.head_dim * kv_bytes * tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "parameters": self.parameters, "vocabSize": self.vocab_size,
            "hiddenSize": self.hidden_size, "tiedEmbeddings": self.tied_embeddings, "layers": self.layers,
            "kvHeads": self.kv_heads, "headDim": self.head_dim, "quantization": self.quantization,
            **({"maxPositionEmbeddings": self.max_position_embeddings} if self.max_position_embeddings else {}),
            **({"unquantizedParameters": self.unquantized_parameters} if self.unquantized_parameters else {}),
            **({"attentionHeads": self.attention_heads} if self.attention_heads is not None else {}),
            **({"mlaKvDim": self.mla_kv_dim} if self.mla_kv_dim is not None else {}),
        }


@dataclass(frozen=True)
class MemoryFit:
    """Per-GPU need and budget (bytes) of one replica."""

    weights_per_gpu: float
    kv_per_gpu: float
    budget_per_gpu: float

    @property
    def need_per_gpu(self) -> float:
        return self.weights_per_gpu + self.kv_per_gpu

    @property
    def fits(self) -> bool:
        return self.need_per_gpu <= self.budget_per_gpu

    def describe(self) -> str:
        return (f"weights {self.weights_per_gpu / GIB:.1f} GiB + KV cache {self.kv_per_gpu / GIB:.1f} GiB = "
                f"{self.need_per_gpu / GIB:.1f} GiB per GPU")


def memory_fit(arch: Architecture, *, max_model_len: int, tensor_parallel: int, gpu_memory_mib: float,
               utilization: float, pipeline_parallel: int = 1) -> MemoryFit:
    """The fullest GPU of a replica: ``tensor_parallel`` GPUs per stage, ``pipeline_parallel`` stages."""
    return MemoryFit(
        weights_per_gpu=arch.weight_bytes_per_gpu(tensor_parallel, pipeline_parallel),
        kv_per_gpu=arch.kv_bytes_per_gpu(max_model_len, tensor_parallel, pipeline_parallel=pipeline_parallel),
        budget_per_gpu=utilization * gpu_memory_mib * MIB,
    )


def architecture_from_json(name: str, spec: dict[str, Any]) -> Architecture:
    """An architecture from catalog/override fields (camelCase, as in ``model_catalog.json``)."""
    quantization = spec["quantization"]
    if quantization not in quantizations():
        raise ValueError(f"unknown quantization {quantization!r}; allowed: {', '.join(quantizations())}")
    return Architecture(
        name=name,
        parameters=int(spec["parameters"]),
        vocab_size=int(spec["vocabSize"]),
        hidden_size=int(spec["hiddenSize"]),
        tied_embeddings=bool(spec.get("tiedEmbeddings", False)),
        layers=int(spec["layers"]),
        kv_heads=int(spec["kvHeads"]),
        head_dim=int(spec["headDim"]),
        quantization=quantization,
        max_position_embeddings=spec.get("maxPositionEmbeddings"),
        unquantized_parameters=int(spec.get("unquantizedParameters", 0)),
        attention_heads=int(spec["attentionHeads"]) if spec.get("attentionHeads") is not None else None,
        mla_kv_dim=int(spec["mlaKvDim"]) if spec.get("mlaKvDim") is not None else None,
    )


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    return json.loads(CATALOG_PATH.read_text())


def quantizations() -> dict[str, dict[str, Any]]:
    return _raw()["quantizations"]


def model_catalog() -> dict[str, Architecture]:
    """The catalog's architectures by name (a fresh mapping; the architectures are frozen)."""
    return dict(_catalog())


@lru_cache(maxsize=1)
def _catalog() -> dict[str, Architecture]:
    """Built once: every served model's settings and every workload the capacity engine reads ask for it."""
    return {name: architecture_from_json(name, spec) for name, spec in _raw()["models"].items()}


def by_hugging_face_id(repo: str) -> Architecture | None:
    for name, spec in _raw()["models"].items():
        if spec.get("huggingFace", "").lower() == repo.lower():
            return architecture_from_json(name, spec)
    return None
