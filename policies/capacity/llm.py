"""Will a model load: weights plus the KV cache of one max-length sequence within vLLM's share of GPU memory.

vLLM preallocates ``--gpu-memory-utilization`` of every GPU at start; tensor parallelism splits the
weights and the KV heads over ``--tensor-parallel-size`` GPUs (KV heads are replicated when there
are fewer of them than GPUs). The architecture comes from ``model_catalog.json`` or an explicit
override with the same fields.
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

    @property
    def embedding_parameters(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    def weight_bytes(self) -> float:
        quant = quantizations()[self.quantization]
        bits = float(quant["bitsPerWeight"])
        if quant["embeddingsQuantized"]:
            return self.parameters * bits / 8
        embeddings = min(self.embedding_parameters, self.parameters)
        return (self.parameters - embeddings) * bits / 8 + embeddings * 2

    def kv_bytes_per_gpu(self, tokens: int, tensor_parallel: int, kv_bytes: int = 2) -> float:
        heads_per_gpu = math.ceil(self.kv_heads / tensor_parallel)
        return 2 * self.layers * heads_per_gpu * self.head_dim * kv_bytes * tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "parameters": self.parameters, "vocabSize": self.vocab_size,
            "hiddenSize": self.hidden_size, "tiedEmbeddings": self.tied_embeddings, "layers": self.layers,
            "kvHeads": self.kv_heads, "headDim": self.head_dim, "quantization": self.quantization,
            **({"maxPositionEmbeddings": self.max_position_embeddings} if self.max_position_embeddings else {}),
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
               utilization: float) -> MemoryFit:
    return MemoryFit(
        weights_per_gpu=arch.weight_bytes() / tensor_parallel,
        kv_per_gpu=arch.kv_bytes_per_gpu(max_model_len, tensor_parallel),
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
