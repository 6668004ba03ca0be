"""Serving settings: tiers of vLLM models, their scaling, and the gateway."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from components import contract
from components.settings._base import _REGION_RE, _dns_name, _Model, keyed, repeated
from policies.capacity.cold_start import DOWNLOAD, STREAM, WEIGHT_LOADINGS
from policies.capacity.llm import MIB, Architecture, MemoryFit, architecture_from_json, memory_fit, model_catalog
from policies.capacity.model import quantity

_S3_URI_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9!_.*'()/-]+/)$")
_HF_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")
_BEDROCK_MODEL_RE = re.compile(r"^([a-z]{2}\.)?[a-z0-9-]+\.[A-Za-z0-9.:-]+$")
_EMBEDDING_ID_RE = re.compile(r"[.-]embed")
#: IAM's limit on a role name, and what Pulumi's auto-naming adds to a resource's name ("-" and 7
#: random characters).
IAM_ROLE_NAME_MAX = 64
PULUMI_NAME_SUFFIX = 8


def weights_role_name(tier: str, model: str) -> str:
    """The name the program gives a model's S3 reader role: the component names Platform
    (``tier-<tier>``), ServingTier (``<tier component>-<model>``) and ModelServer (``<name>-weights``)
    compose, before Pulumi's suffix; a test holds this equal to the recorded plan's roles."""
    return f"tier-{tier}-{model}-weights"


#: Production rules for the tier that faces users: replicas that survive a node loss, no Spot.
INTERACTIVE_TIER = "interactive"
MIN_INTERACTIVE_REPLICAS = 2


class Replicas(_Model):
    """KEDA bounds. ``min`` 0 scales the model to zero when idle (never in production)."""

    min: int = Field(
        ge=0, le=100,
        description="Fewest replicas KEDA keeps; 0 scales the model to zero when idle (refused in production). "
        "Unit: replicas.",
    )
    max: int = Field(ge=1, le=100, description="Most replicas KEDA scales to. Unit: replicas.")

    @model_validator(mode="after")
    def _ordered(self) -> Replicas:
        if self.min > self.max:
            raise keyed(f"need min <= max, got {self.min} > {self.max}", "min")
        return self


#: A checkpoint's file formats at its source. The one vLLM's Run:ai model streamer reads is safetensors:
#: ``RunaiModelStreamerLoader`` lists ``*.safetensors`` under the model's path and fails the start with
#: "Cannot find any safetensors model weights" when there are none (vllm-project/vllm,
#: vllm/model_executor/model_loader/runai_streamer_loader.py ``_prepare_weights``, and the class docstring
#: "can load safetensors files from local FS, S3, GCS, or Azure Blob Storage" at docs.vllm.ai v0.24.0, the newest
#: release read here, not the pinned tag itself; docs.vllm.ai models/extensions/runai_model_streamer: "vLLM
#: supports loading weights in Safetensors format").
CHECKPOINT_FORMATS = ("safetensors", "pytorch")
STREAMABLE_FORMAT = CHECKPOINT_FORMATS[0]


class ModelSource(_Model):
    """Where weights come from: exactly one of ``s3`` or ``huggingFace``; ``format`` says what the files are,
    which decides whether they are streamed or downloaded by default."""

    s3: str | None = Field(
        default=None,
        description="An S3 prefix of the model's files, such as s3://my-models/llama-3.1-8b-instruct/ (trailing /); "
        "the bucket is yours to create and fill.",
    )
    hugging_face: str | None = Field(
        default=None,
        description="A Hugging Face repo id such as meta-llama/Llama-3.1-8B-Instruct; needs huggingFaceToken.",
    )
    format: Literal[CHECKPOINT_FORMATS] = Field(  # type: ignore[valid-type]
        default=STREAMABLE_FORMAT,
        description="The checkpoint's file format at the source: safetensors (default; *.safetensors files) or "
        "pytorch (*.bin/*.pt files). vLLM's Run:ai model streamer reads safetensors only, so a pytorch checkpoint "
        "is downloaded.",
    )

    @field_validator("s3")
    @classmethod
    def _s3(cls, value: str | None) -> str | None:
        if value is not None and not _S3_URI_RE.match(value):
            raise ValueError(f"{value!r} is not an S3 prefix like s3://my-models/llama-3.1-8b-instruct/ (trailing /)")
        return value

    @field_validator("hugging_face")
    @classmethod
    def _hf(cls, value: str | None) -> str | None:
        if value is not None and not _HF_REPO_RE.match(value):
            raise ValueError(f"{value!r} is not a Hugging Face repo id like meta-llama/Llama-3.1-8B-Instruct")
        return value

    @model_validator(mode="after")
    def _one(self) -> ModelSource:
        if (self.s3 is None) == (self.hugging_face is None):
            raise ValueError("set exactly one of s3 or huggingFace")
        return self

    @property
    def bucket(self) -> str:
        return (self.s3 or "")[len("s3://") :].split("/", 1)[0]

    @property
    def prefix(self) -> str:
        return (self.s3 or "")[len("s3://") :].split("/", 1)[1]


#: How a model's weights reach its GPUs (``policies/capacity/cold_start.py`` WEIGHT_LOADINGS, the one
#: spelling): ``download`` copies them to the node's disk first, ``stream`` reads them from S3.
WeightLoadingMode = Literal[WEIGHT_LOADINGS]  # type: ignore[valid-type]


class WeightStreaming(_Model):
    """vLLM's Run:ai model streamer, for streamed weights (run-ai/runai-model-streamer docs/src/env-vars.md).
    Every tensor-parallel rank runs its own streamer, so the pod may hold ``gpusPerReplica`` buffers."""

    concurrency: int = Field(
        default=16, ge=1, le=64,
        description="S3 readers per streamer process (RUNAI_STREAMER_CONCURRENCY; the library's own default from "
        "object storage is 8, each reader holding one S3 client). Unit: readers.",
    )
    memory_limit_gib: int = Field(
        default=4, ge=1, le=64,
        description="The CPU buffer each streamer process may fill ahead of the GPU copy (RUNAI_STREAMER_MEMORY_LIMIT; "
        "the library's is unlimited, up to the whole checkpoint in host memory). Unit: GiB.",
    )


class ModelArchitecture(_Model):
    """A model's size and shape, for models not in ``policies/capacity/model_catalog.json`` (the same
    fields as a catalog entry, from the checkpoint's config.json)."""

    parameters: int = Field(
        ge=1_000_000, le=10_000_000_000_000, description="Total parameters. Unit: parameters.",
    )
    vocab_size: int = Field(ge=1, description="Vocabulary size (vocab_size). Unit: tokens.")
    hidden_size: int = Field(ge=1, description="Hidden size (hidden_size).")
    tied_embeddings: bool = Field(
        default=False,
        description="Whether input and output embeddings share one matrix (tie_word_embeddings; default false).",
    )
    layers: int = Field(ge=1, le=1000, description="Transformer layers (num_hidden_layers).")
    kv_heads: int = Field(ge=1, le=1024, description="Key/value heads (num_key_value_heads).")
    head_dim: int = Field(ge=1, le=1024, description="Size of one attention head (head_dim).")
    quantization: Literal["bf16", "fp16", "fp8", "awq-int4", "gptq-int4"] = Field(
        description="The checkpoint's precision.",
    )
    max_position_embeddings: int | None = Field(
        default=None, ge=1,
        description="Longest sequence the model takes (max_position_embeddings); maxModelLen above it is refused "
        "(default unset: not judged). Unit: tokens.",
    )
    unquantized_parameters: int = Field(
        default=0, ge=0, description="Parameters besides the embeddings a quantized checkpoint keeps in 16 bits "
                                     "(default 0). Unit: parameters.")
    attention_heads: int | None = Field(
        default=None, ge=1, le=4096, description="Query heads when they are not hiddenSize / headDim (MLA models); "
                                                 "default: that ratio.")
    mla_kv_dim: int | None = Field(
        default=None, ge=1, le=65536, description="Multi-head latent attention: values cached per token and layer "
                                                  "(kv_lora_rank + qk_rope_head_dim); default: not MLA.")


class ServedModel(_Model):
    """One vLLM deployment. Its GPU memory need (weights plus the KV cache of one ``maxModelLen``
    sequence, split over ``gpusPerReplica`` GPUs by tensor parallelism) follows from ``catalog``, a
    model of ``policies/capacity/model_catalog.json``, or an explicit ``architecture``; exactly one."""

    @model_validator(mode="before")
    @classmethod
    def _group_rollout_default(cls, data: Any) -> Any:
        """A multi-node model's rollout defaults to LeaderWorkerSet's own (kubernetes-sigs/lws
        ``RollingUpdateConfiguration``: maxUnavailable 1, maxSurge 0): a surge would need a whole second
        group of GPU nodes under the pool's ceiling."""
        if isinstance(data, dict) and "rollout" not in data:
            nodes = data.get("nodesPerReplica", data.get("nodes_per_replica", 1))
            if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 1:
                return {**data, "rollout": "noSurge"}
        return data

    name: str = Field(
        description="The model's name, which clients ask the gateway for and which names its Deployment: 2-32 "
        "lowercase letters, digits or '-', unique across tiers.",
    )
    kind: Literal["chat", "embedding"] = Field(
        default="chat",
        description="Which requests the model serves; decides which Bedrock models and fallbacks the gateway may "
        "send its traffic to.",
    )
    source: ModelSource = Field(description="Where the weights come from.")
    pool: str = Field(description="The GPU pool (its name) the model runs on; an inference pool.")
    catalog: str | None = Field(
        default=None,
        description="A model of policies/capacity/model_catalog.json; exactly one of catalog or architecture.",
    )
    architecture: ModelArchitecture | None = Field(
        default=None,
        description="The model's size and shape, for a model not in the catalog; exactly one of catalog or "
        "architecture.",
    )
    quantization: Literal["fp8"] | None = Field(
        default=None,
        description="Overrides the checkpoint's precision: fp8 quantizes a 16-bit checkpoint at load (vLLM's "
        "--quantization fp8). Default unset: the checkpoint's own.",
    )
    gpus_per_replica: int = Field(
        default=1, ge=1, le=8,
        description="GPUs per pod (vLLM's tensor parallel size); must divide the model's attention heads. Unit: GPUs.",
    )
    nodes_per_replica: int = Field(
        default=1, ge=1, le=16,
        description="Nodes one replica spans (default 1). Above 1 the model is served by a LeaderWorkerSet of that "
                    "many pods, one per node, each with gpusPerReplica GPUs (tensor parallel inside a node, pipeline "
                    "parallel across nodes); its pool must offer EFA-capable instance types. Unit: nodes.")
    max_model_len: int = Field(
        default=8192, ge=256, le=1_048_576,
        description="Longest sequence (prompt plus output) vLLM accepts; the KV cache of one such sequence must fit "
        "beside the weights. Unit: tokens.",
    )
    gpu_memory_utilization: float = Field(
        default=0.9, ge=0.5, le=0.98,
        description="Share of each GPU's memory vLLM may take for weights and KV cache. Unit: fraction (0-1).",
    )
    replicas: Replicas = Field(description="KEDA's replica bounds.")
    cpu: str = Field(
        default="4",
        description="CPU the model server's pod requests, a Kubernetes quantity such as '4' or '500m'. Unit: cores.",
    )
    memory: str = Field(
        default="32Gi",
        description="Memory the pod requests and is limited to, a Kubernetes quantity such as '32Gi'; at least 1Gi.",
    )
    cache_size_gib: int = Field(
        default=100, ge=10, le=4000,
        description="Size limit of the node-local volume the weights are downloaded to (weights: download). Unit: "
        "GiB.",
    )
    weights: WeightLoadingMode | None = Field(
        default=None,
        description="How the weights reach the GPUs. `stream`: vLLM reads the s3:// prefix straight into GPU memory "
        "with the Run:ai model streamer (--load-format runai_streamer): no copy step, no disk. `download`: an init "
        "container copies the S3 weights to the node's disk and vLLM loads them from there. Default (unset): "
        "`stream` for an s3 source in safetensors, `download` for a huggingFace source or source.format pytorch. "
        "docs/cold-start.md compares the two.",
    )
    streaming: WeightStreaming = Field(
        default_factory=WeightStreaming,
        description="The Run:ai streamer's readers and buffer; read only when the weights are streamed.",
    )
    rollout: contract.Rollout = Field(
        default="surge",
        description="How the model rolls out. `surge` adds one pod before taking one down, and needs room for it "
        "under the pool's ceiling at max replicas. `noSurge` (maxSurge 0, maxUnavailable 1) takes one down first, "
        "for a pool at its ceiling, and needs replicas.min >= 2 so one keeps serving (or 0: a scale-to-zero model "
        "accepts going cold). The capacity simulation refuses either where it breaks. Default `surge`; for a "
        "multi-node model (nodesPerReplica > 1) `noSurge`, LeaderWorkerSet's own default (a surge adds a whole "
        "group of nodes), where the gateway serves the model's traffic from its fallbacks while a lone group "
        "restarts.",
    )
    fallbacks: list[str] = Field(
        default_factory=list, max_length=5,
        description="Other served models of the same kind the gateway tries, in order, when this one fails (5xx, "
        "timeout, overload), before the Bedrock models of that kind: an on-prem model names its cloud twin here "
        "(docs/hybrid-nodes.md). Default none: straight to Bedrock.",
    )

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY_RE.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity like '4', '500m' or '32Gi'")
        if float(re.sub(r"[A-Za-z]+$", "", value)) == 0:
            raise ValueError(f"{value!r}: a model server needs more than zero (vLLM cannot start without CPU or memory)")
        return value

    @field_validator("memory")
    @classmethod
    def _at_least_a_gibibyte(cls, value: str) -> str:
        if _memory_mib(value) < 1024:
            raise ValueError(f"{value!r} is less than 1Gi; vLLM's own host-side state (tokenizer, CUDA contexts, "
                             "engine) needs several GiB (write memory as e.g. '32Gi'; 'm' is millibytes)")
        return value

    @field_validator("catalog")
    @classmethod
    def _catalog(cls, value: str | None) -> str | None:
        known = model_catalog()
        if value is not None and value not in known:
            raise ValueError(f"{value!r} is not in the model catalog; allowed: {', '.join(sorted(known))}")
        return value

    @model_validator(mode="after")
    def _one_architecture(self) -> ServedModel:
        if (self.catalog is None) == (self.architecture is None):
            raise ValueError("set exactly one of catalog (a model_catalog.json name) or architecture")
        return self

    @model_validator(mode="after")
    def _tensor_parallel_divides_the_heads(self) -> ServedModel:
        """vLLM shards attention heads over ``--tensor-parallel-size`` and refuses a size that does not
        divide them (ModelConfig.verify_with_parallel_config: "Total number of attention heads (N) must
        be divisible by tensor parallel size (M)"); KV heads are split, or replicated when the size is
        a multiple of them, so either must divide the other. Attention heads: hiddenSize / headDim."""
        if (self.catalog is None) == (self.architecture is None):
            return self
        arch = self.resolved_architecture()
        tp = self.gpus_per_replica
        heads = arch.query_heads
        if heads and heads % tp:
            raise keyed(f"{tp} GPUs does not divide the model's {heads} attention heads (hiddenSize {arch.hidden_size} "
                        f"/ headDim {arch.head_dim}): vLLM refuses that tensor-parallel size; use a divisor of {heads}",
                        "gpusPerReplica")
        if arch.kv_heads % tp and tp % arch.kv_heads:
            raise keyed(f"{tp} GPUs and the model's {arch.kv_heads} KV heads: neither divides the other, so vLLM "
                        "cannot split or replicate the KV heads evenly", "gpusPerReplica")
        return self

    @model_validator(mode="after")
    def _streamable(self) -> ServedModel:
        """The streamer reads safetensors from object storage (docs.vllm.ai, models/extensions/
        runai_model_streamer: "vLLM supports loading weights in Safetensors format using the Run:ai Model
        Streamer"); a Hugging Face source would be downloaded to disk by vLLM first, which is not streaming.
        Its CPU buffers (one per tensor-parallel rank) must leave the container at least half its memory
        for vLLM itself (the tokenizer, CUDA contexts, the engine's host-side state)."""
        if self.weight_loading != STREAM:
            if "streaming" in self.model_fields_set:
                raise keyed("is read only when the weights are streamed, and this model's are downloaded (weights: "
                            "download, a huggingFace source or source.format pytorch); remove streaming", "streaming")
            return self
        if self.source.s3 is None:
            raise keyed("weights: stream reads the model from S3 with vLLM's Run:ai model streamer; this model's "
                        "source is huggingFace. Set source.s3 (an s3:// prefix of safetensors files) or weights: "
                        "download", "weights")
        if self.source.format != STREAMABLE_FORMAT:
            raise keyed(f"vLLM's Run:ai model streamer reads safetensors only, and this model's source.format is "
                        f"{self.source.format}; convert the checkpoint to safetensors or set weights: download", "weights")
        buffers_mib = self.gpus_per_replica * self.streaming.memory_limit_gib * 1024
        if buffers_mib * 2 > _memory_mib(self.memory):
            fixes = ("lower streaming.memoryLimitGib or raise memory" if self.weights == STREAM else
                     "streamed by default as an s3 source in safetensors; lower streaming.memoryLimitGib, raise "
                     "memory or set weights: download")
            raise keyed(f"{self.gpus_per_replica} streamer buffers of {self.streaming.memory_limit_gib} GiB (one per "
                        f"tensor-parallel rank) would take more than half of the container's memory {self.memory}; "
                        f"{fixes}", "streaming", "memoryLimitGib")
        return self

    @property
    def weight_loading(self) -> str:
        """How the weights reach the GPUs (``cold_start.WEIGHT_LOADINGS``): ``weights`` when set, else
        ``stream`` for an ``s3`` source in safetensors (what the streamer reads, from object storage, with no
        copy step) and ``download`` for anything else: a Hugging Face source (vLLM would download it to disk
        before streaming it) or a format the streamer cannot read."""
        if self.weights is not None:
            return str(self.weights)
        return STREAM if self.source.s3 is not None and self.source.format == STREAMABLE_FORMAT else DOWNLOAD

    def resolved_architecture(self) -> Architecture:
        """The architecture vLLM will load: catalog entry or override, with the quantization override."""
        if self.architecture is not None:
            spec = self.architecture.model_dump(by_alias=True, exclude_none=True)
            arch = architecture_from_json(self.name, spec)
        else:
            arch = model_catalog()[self.catalog or ""]
        return replace(arch, quantization=self.quantization) if self.quantization else arch

    def memory_fit(self, gpu_memory_mib: float) -> MemoryFit:
        return memory_fit(self.resolved_architecture(), max_model_len=self.max_model_len,
                          tensor_parallel=self.gpus_per_replica, gpu_memory_mib=gpu_memory_mib,
                          utilization=self.gpu_memory_utilization, pipeline_parallel=self.nodes_per_replica)

    @property
    def multi_node(self) -> bool:
        """Whether one replica spans several nodes (a LeaderWorkerSet instead of a Deployment)."""
        return self.nodes_per_replica > 1

    @property
    def gpu_memory_mib_per_gpu(self) -> int:
        """GPU memory (MiB) each GPU must have so vLLM's share holds weights plus one max-length sequence."""
        need = self.memory_fit(0).need_per_gpu
        return math.ceil(need / self.gpu_memory_utilization / MIB)


def _memory_mib(value: str) -> float:
    """A memory quantity (``_QUANTITY_RE``: plain bytes, ``m`` millibytes, ``Ki`` to ``Ti``) in MiB, read by
    the capacity model's one quantity parser so the settings and the simulation agree on every unit."""
    number = quantity(value)
    assert number is not None, value  # _QUANTITY_RE admits only units quantity() reads
    return number / MIB


class TierScaling(_Model):
    """KEDA thresholds, per replica, on current vLLM metrics and on the gateway's request rate for the
    model. The gateway signal is the one that exists while a model is scaled to zero, so it wakes it
    (``activationRequests``) while the gateway serves the cold model's traffic from Bedrock."""

    # Upper bounds where a larger number means "never": a TTFT target of 1e300 s or a queue of a
    # million requests per replica would silently switch the trigger off.
    waiting_requests: float = Field(
        default=5, gt=0, le=10_000,
        description="Requests waiting in vLLM's queue per replica above which KEDA adds replicas. Unit: requests.",
    )
    kv_cache_usage: float = Field(
        default=0.8, gt=0, le=1,
        description="Average KV cache use above which KEDA adds replicas. Unit: fraction (0-1).",
    )
    ttft_p95_seconds: float = Field(
        default=2.0, gt=0, le=600,
        description="95th percentile time to first token above which KEDA adds replicas. Unit: s.",
    )
    activation_requests: float = Field(
        default=0, ge=0, le=10_000,
        description="Gateway requests per second for the model above which KEDA wakes it from zero replicas (default "
        "0: any request). Unit: requests/s.",
    )
    gateway_requests_per_second: float = Field(
        default=2, gt=0, le=100_000,
        description="Gateway requests per second per replica above which KEDA adds replicas; the signal that exists "
        "while a model is at zero. Unit: requests/s.",
    )
    cooldown_seconds: int = Field(
        default=300, ge=30, le=86400,
        description="How long demand must stay low before KEDA removes a replica or returns the model to zero. "
        "Unit: s.",
    )
    polling_seconds: int = Field(default=15, ge=5, le=300, description="How often KEDA reads the triggers. Unit: s.")
    serving_window_seconds: int = Field(
        default=300, ge=60, le=86400,
        description="How long a model at replicas.min 0 that one request woke serves, at least, after its predicted "
        "cold start before KEDA may scale it back to zero. KEDA counts its cooldown from the last poll that saw "
        "demand, not from readiness, so the model's ScaledObject gets a cooldownPeriod of its cold start plus this "
        "window less the demand window, when that is longer than cooldownSeconds (docs/cold-start.md). Unit: s.",
    )


class TierQuota(_Model):
    """Namespace guardrails so one tier cannot starve another."""

    gpus: int = Field(
        ge=0, le=10000,
        description="GPUs the tier's pods may request together; must cover every model at max replicas plus one "
        "rollout surge pod. Unit: GPUs.",
    )
    cpu: str = Field(
        description="CPU the tier's pods may request together, a Kubernetes quantity such as '64'. Unit: "
        "cores.",
    )
    memory: str = Field(
        description="Memory the tier's pods may request together, a Kubernetes quantity such as '512Gi'.",
    )

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY_RE.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity like '64' or '512Gi'")
        return value


class ServingTier(_Model):
    """A tier: its namespace, PriorityClass, quota, models, and the cold start its models must fit."""

    name: str = Field(
        description="The tier's name; its namespace is serving-<name>: 2-32 lowercase letters, digits or '-'.",
    )
    priority: int = Field(
        ge=0, le=1_000_000_000,
        description="The tier's PriorityClass value: under GPU pressure a higher tier preempts a lower one; unique "
        "per tier.",
    )
    preempt_lower: bool = Field(
        default=True,
        description="Whether the tier's pods may preempt lower tiers' pods (default true).",
    )
    quota: TierQuota = Field(description="The tier's ResourceQuota, so one tier cannot starve another.")
    scaling: TierScaling = Field(
        default_factory=TierScaling,
        description="KEDA thresholds and pace for the tier's models.",
    )
    cold_start_budget_seconds: int | None = Field(
        default=None, ge=30, le=7200,
        description="The longest a model of the tier may take from its first request to its first token when it "
        "needs a new node (predicted by policies/capacity/cold_start.py; docs/cold-start.md); the settings and the "
        "pack's cold-start-budget both judge it. Default unset: not judged. Unit: s.",
    )
    routing: contract.Routing = Field(
        default=contract.SERVICE_ROUTING,
        description="How the gateway reaches the tier's models. `service` (default): the model's Service, which "
        "spreads requests over replicas at random. `prefix-aware`: one InferencePool and Endpoint Picker per model "
        "(llm-d-router, standalone with its own Envoy) that sends each request to the replica already holding its "
        "prompt prefix in KV cache (docs/prefix-aware-routing.md); the pickers run on the system pool and count "
        "against the tier's quota.",
    )
    models: list[ServedModel] = Field(default_factory=list, description="The tier's vLLM models (default none).")

    _name = field_validator("name")(lambda v: _dns_name(v))

    @model_validator(mode="after")
    def _quota_covers_models(self) -> ServingTier:
        names = [m.name for m in self.models]
        for name in repeated(names):
            raise keyed(f"model name {name!r} is repeated; model names must be unique within a tier",
                        "models", len(names) - 1 - names[::-1].index(name), "name")
        for index, model in enumerate(self.models):
            role = weights_role_name(self.name, model.name)
            if len(role) + PULUMI_NAME_SUFFIX > IAM_ROLE_NAME_MAX:
                raise keyed(f"the model's S3 reader role would be named {role!r} plus Pulumi's "
                            f"{PULUMI_NAME_SUFFIX}-character suffix, {len(role) + PULUMI_NAME_SUFFIX} characters; "
                            f"IAM allows {IAM_ROLE_NAME_MAX}: shorten the tier or model name", "models", index, "name")
        # Quota against max replicas plus rollout surge (GPUs, CPU, memory) is judged by the capacity
        # verdict (components/capacity_check.py), with the other capacity rules.
        return self


class Gateway(_Model):
    """OpenAI-compatible router on the system pool that cascades to Amazon Bedrock on 5xx, timeouts
    and overload. ``bedrockModels`` are model or inference-profile ids the gateway may invoke."""

    enabled: bool = Field(default=True, description="Whether the gateway runs when serving is on (default true).")
    replicas: int = Field(default=2, ge=1, le=20, description="Gateway replicas. Unit: replicas.")
    bedrock_region: str | None = Field(
        default=None,
        description="The AWS region the gateway calls Bedrock in; required when Bedrock models are listed.",
    )
    bedrock_models: list[str] = Field(
        default_factory=list,
        description="Bedrock model or inference-profile ids chat requests fall back to, in order (default none).",
    )
    bedrock_embedding_models: list[str] = Field(
        default_factory=list,
        description="Bedrock embedding model ids embedding requests fall back to, in order (default none).",
    )
    timeout_seconds: int = Field(
        default=60, ge=5, le=600,
        description="How long the gateway waits for a model before it falls back. Unit: s.",
    )
    num_retries: int = Field(
        default=1, ge=0, le=5,
        description="Retries of a failed request on the same model before falling back. Unit: retries.",
    )

    @field_validator("bedrock_models", "bedrock_embedding_models")
    @classmethod
    def _model_ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not _BEDROCK_MODEL_RE.match(i)]
        if bad:
            raise ValueError(f"{', '.join(bad)} not Bedrock model ids like anthropic.claude-sonnet-4-5-20250929-v1:0")
        if len(set(ids)) != len(ids):
            raise ValueError("model ids must not repeat")
        return ids

    @model_validator(mode="after")
    def _kinds(self) -> Gateway:
        misplaced = [i for i in self.bedrock_models if _EMBEDDING_ID_RE.search(i)]
        if misplaced:
            raise ValueError(
                f"bedrockModels are chat fallbacks but {', '.join(misplaced)} is an embedding model; "
                "list it under bedrockEmbeddingModels"
            )
        misplaced = [i for i in self.bedrock_embedding_models if not _EMBEDDING_ID_RE.search(i)]
        if misplaced:
            raise ValueError(
                f"bedrockEmbeddingModels are embedding fallbacks but {', '.join(misplaced)} is not an embedding "
                "model (ids like amazon.titan-embed-text-v2:0 or cohere.embed-multilingual-v3); list it under bedrockModels"
            )
        return self

    def fallbacks(self) -> dict[str, list[str]]:
        """Bedrock fallbacks by model kind."""
        return {"chat": list(self.bedrock_models), "embedding": list(self.bedrock_embedding_models)}

    @field_validator("bedrock_region")
    @classmethod
    def _region(cls, region: str | None) -> str | None:
        if region is not None and not _REGION_RE.match(region):
            raise ValueError(f"{region!r} is not an AWS region name such as us-east-1")
        return region


class Serving(_Model):
    """Model serving: tiers, the gateway, and the KEDA + Prometheus stack they need."""

    enabled: bool = Field(
        default=False,
        description="Whether models are served, with KEDA and Prometheus (default false).",
    )
    tiers: list[ServingTier] = Field(
        default_factory=list,
        description="Serving tiers, each a namespace with a priority and a quota (default none).",
    )
    gateway: Gateway = Field(
        default_factory=Gateway,
        description="The OpenAI-compatible gateway in front of the models, with Bedrock fallbacks.",
    )

    @model_validator(mode="after")
    def _tiers(self) -> Serving:
        names = [t.name for t in self.tiers]
        for name in repeated(names):
            raise keyed(f"tier name {name!r} is repeated; tier names must be unique",
                        "tiers", len(names) - 1 - names[::-1].index(name), "name")
        models = [(i, j, m.name) for i, t in enumerate(self.tiers) for j, m in enumerate(t.models)]
        for name in repeated([m for _, _, m in models]):
            i, j, _ = [m for m in models if m[2] == name][-1]
            raise keyed(f"model name {name!r} is repeated in another tier; model names must be unique across "
                        "tiers (the gateway routes by name)", "tiers", i, "models", j, "name")
        self._fallbacks_are_served_models()
        priorities = [t.priority for t in self.tiers]
        for priority in repeated(priorities):
            raise keyed(f"priority {priority} is repeated; tier priorities must differ so preemption order is "
                        "defined", "tiers", len(priorities) - 1 - priorities[::-1].index(priority), "priority")
        return self

    def fallback_targets(self) -> frozenset[str]:
        """Served models some other model falls back to."""
        return frozenset(name for chain in self.fallback_chains().values() for name in chain)

    def fallback_chains(self) -> dict[str, list[str]]:
        """Every served model's chain of self-hosted fallbacks (:func:`fallback_chain`), by name."""
        models = {m.name: list(m.fallbacks) for t in self.tiers for m in t.models}
        return {name: fallback_chain(models, name) for name in models}

    def _fallbacks_are_served_models(self) -> None:
        """Each ``fallbacks`` entry is another served model of the same kind, once, and following
        fallbacks from any model never leads back to it (the gateway would try it again)."""
        where = {m.name: (i, j, m) for i, t in enumerate(self.tiers) for j, m in enumerate(t.models)}
        for i, j, model in where.values():
            for k, name in enumerate(model.fallbacks):
                path = ("tiers", i, "models", j, "fallbacks", k)
                target = where.get(name)
                if name == model.name:
                    raise keyed(f"{name!r} names the model itself; list another served model", *path)
                if target is None:
                    raise keyed(f"{name[:64]!r} is not a served model; allowed: "
                                f"{', '.join(sorted(n for n, v in where.items() if v[2].kind == model.kind and n != model.name)) or 'none'}",
                                *path)
                if target[2].kind != model.kind:
                    article = {"chat": "a", "embedding": "an"}
                    raise keyed(f"{name!r} is {article[target[2].kind]} {target[2].kind} model and {model.name!r} "
                                f"{article[model.kind]} {model.kind} model; a fallback serves the same kind of request",
                                *path)
                if name in model.fallbacks[:k]:
                    raise keyed(f"{name!r} is listed twice", *path)
        for start in where:
            cycle = _fallback_cycle(start, {n: v[2].fallbacks for n, v in where.items()})
            if cycle:
                i, j, _ = where[start]
                raise keyed(f"fallbacks form a cycle {' -> '.join(cycle)}; the gateway would send a failed request "
                            "back to a model it already tried: remove one link", "tiers", i, "models", j, "fallbacks")


def fallback_chain(models: dict[str, list[str]], name: str) -> list[str]:
    """The served models a request for ``name`` is tried on after it, in order: each of its
    ``fallbacks`` followed by that model's own chain, each model once (``models`` maps a model to its
    ``fallbacks``; settings refuse cycles)."""
    chain: list[str] = []
    for fallback in models.get(name, []):
        for step in [fallback, *fallback_chain(models, fallback)]:
            if step != name and step not in chain:
                chain.append(step)
    return chain


def _fallback_cycle(start: str, fallbacks: dict[str, list[str]]) -> list[str]:
    """The first cycle through ``start`` when following fallbacks (depth first), as names; [] if none."""
    path: list[str] = [start]

    def walk(name: str) -> list[str]:
        for nxt in fallbacks.get(name, []):
            if nxt == start:
                return [*path, start]
            if nxt in path:
                continue
            path.append(nxt)
            found = walk(nxt)
            if found:
                return found
            path.pop()
        return []

    return walk(start)
