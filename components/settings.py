"""Stack settings: every ``llm-platform:*`` config key, parsed once into typed, validated values.

Parsing is strict: an unknown key is an error, and every problem in a stack file is reported at once
with the config key path, the value given and what is allowed. Nothing is registered with the engine
until settings have passed, so bad input never leaves a half-built platform.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from . import contract, versions
from .catalog import load_catalog

NAMESPACE = "llm-platform"

_REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
_POOL_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, str_strip_whitespace=True
    )


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        if key in contract.RESERVED_LABEL_KEYS:
            raise ValueError(f"label {key!r} is set by the scheduling contract and cannot be overridden")
        if not _LABEL_KEY_RE.match(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if not _LABEL_VALUE_RE.match(value):
            raise ValueError(f"label value {value!r} (key {key!r}) is not a valid Kubernetes label value")
    return labels


def _dns_name(name: str) -> str:
    if not _POOL_NAME_RE.match(name):
        raise ValueError(f"{name!r} must be 2-32 lowercase letters, digits or '-', starting with a letter")
    return name


def _check_known_types(types: list[str]) -> list[str]:
    catalog = load_catalog()
    unknown = [t for t in types if catalog.get(t) is None]
    if unknown:
        raise ValueError(f"unknown instance type(s) {', '.join(unknown)}; allowed: {', '.join(catalog.known())}")
    if len(set(types)) != len(types):
        raise ValueError("instance types must not repeat")
    return types


class Scaling(_Model):
    """Node counts of a managed node group: ``minSize <= desiredSize <= maxSize``."""

    min_size: int = Field(ge=0, le=1000)
    desired_size: int = Field(ge=0, le=1000)
    max_size: int = Field(ge=1, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> Scaling:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"need minSize <= desiredSize <= maxSize, got {self.min_size} <= {self.desired_size} <= {self.max_size}"
            )
        return self


class SystemPool(_Model):
    """The untainted CPU pool for controllers and add-ons: on-demand, at least two nodes, two AZs."""

    instance_types: list[str] = Field(min_length=1, max_length=20)
    capacity_type: Literal["ON_DEMAND"] = "ON_DEMAND"
    scaling: Scaling
    disk_size_gib: int = Field(default=50, ge=20, le=1000)
    labels: dict[str, str] = Field(default_factory=dict)

    _labels = field_validator("labels")(_check_labels)

    @field_validator("instance_types")
    @classmethod
    def _cpu_types(cls, types: list[str]) -> list[str]:
        _check_known_types(types)
        gpu = [t for t in types if load_catalog().instances[t].is_gpu]
        if gpu:
            raise ValueError(f"{', '.join(gpu)} carry GPUs; the system pool takes CPU types only")
        return types

    @field_validator("scaling")
    @classmethod
    def _two_nodes(cls, scaling: Scaling) -> Scaling:
        if scaling.min_size < 2:
            raise ValueError(f"minSize is {scaling.min_size}; the system pool keeps at least 2 nodes in 2 AZs")
        return scaling


class GpuPool(_Model):
    """A tainted GPU managed node group. ``name`` becomes the pool label and part of resource names."""

    name: str
    instance_types: list[str] = Field(min_length=1, max_length=20)
    capacity_type: contract.CapacityType = "ON_DEMAND"
    scaling: Scaling
    purpose: Literal["gpu-inference", "gpu-training", "gpu-dra"] = contract.GPU_INFERENCE_PURPOSE
    disk_size_gib: int = Field(default=200, ge=50, le=4000)
    labels: dict[str, str] = Field(default_factory=dict)

    _labels = field_validator("labels")(_check_labels)

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("instance_types")
    @classmethod
    def _gpu_types_of_one_model(cls, types: list[str]) -> list[str]:
        catalog = load_catalog()
        _check_known_types(types)
        cpu = [t for t in types if not catalog.instances[t].is_gpu]
        if cpu:
            raise ValueError(f"{', '.join(cpu)} have no GPU; allowed: {', '.join(catalog.gpu_types())}")
        models = sorted({catalog.instances[t].gpu_name or "" for t in types})
        if len(models) > 1:
            raise ValueError(
                f"mixes GPU models {', '.join(models)}; a pool holds one GPU model so its labels stay true"
            )
        return types

    @field_validator("scaling")
    @classmethod
    def _scale_to_zero(cls, scaling: Scaling) -> Scaling:
        if scaling.min_size != 0:
            raise ValueError(f"minSize is {scaling.min_size}; GPU pools scale to minSize 0")
        return scaling

    @model_validator(mode="after")
    def _spot_diversity(self) -> GpuPool:
        if self.capacity_type == "SPOT" and len(self.instance_types) < 2:
            raise ValueError(
                f"SPOT pool {self.name!r} lists {len(self.instance_types)} instance type; "
                "list at least 2 types with the same GPU model so Spot can find capacity"
            )
        return self

    @property
    def accelerator(self) -> str:
        return load_catalog().instances[self.instance_types[0]].gpu_name or ""

    @property
    def gpu_memory_mib(self) -> int:
        return load_catalog().instances[self.instance_types[0]].gpu_memory_mib or 0


class Endpoint(_Model):
    """API server access. The private endpoint is always on; public access is opt-in with CIDRs."""

    public_access: bool = False
    public_access_cidrs: list[str] = Field(default_factory=list)

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                net = ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not an IPv4 CIDR such as 203.0.113.0/24 ({exc})") from None
            if net.version != 4:
                raise ValueError(f"{cidr!r} is not IPv4; EKS public access CIDRs are IPv4")
        return cidrs

    @model_validator(mode="after")
    def _cidrs_with_public(self) -> Endpoint:
        if self.public_access and not self.public_access_cidrs:
            raise ValueError("publicAccess is true but publicAccessCidrs is empty; list the CIDRs allowed in")
        if not self.public_access and self.public_access_cidrs:
            raise ValueError("publicAccessCidrs is set but publicAccess is false; remove the CIDRs or enable access")
        return self

    @property
    def open_to_world(self) -> bool:
        return self.public_access and "0.0.0.0/0" in self.public_access_cidrs


class Network(_Model):
    """VPC layout: private node subnets (/prefix+3) and public subnets carved from the last block."""

    vpc_cidr: str = "10.0.0.0/16"
    az_count: int = Field(default=3, ge=2, le=6)
    nat_gateways: Literal["single", "perAz"] = "single"

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, cidr: str) -> str:
        try:
            net = ipaddress.ip_network(cidr, strict=True)
        except ValueError as exc:
            raise ValueError(f"{cidr!r} is not a network CIDR such as 10.0.0.0/16 ({exc})") from None
        if net.version != 4 or not net.is_private or not 16 <= net.prefixlen <= 20:
            raise ValueError(f"{cidr!r} must be a private IPv4 range with a prefix from /16 to /20")
        return cidr


# --- Karpenter: EC2NodeClasses and NodePools (karpenter.sh/v1, karpenter.k8s.aws/v1) ---

_DURATION_RE = re.compile(r"^([0-9]+(s|m|h))+$")
_BUDGET_DURATION_RE = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_BUDGET_NODES_RE = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_CRON_FIELD = r"(\*|[0-9a-zA-Z,/*-]+)"
_CRON_RE = re.compile(rf"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|{_CRON_FIELD}( {_CRON_FIELD}){{4}})$")
CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
EVICTION_SIGNALS = (
    "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"
)


def _gpu_families() -> dict[str, str]:
    """GPU instance family -> GPU model, from the catalog."""
    return {t.family: t.gpu_name or "" for t in load_catalog().instances.values() if t.is_gpu}


class DisruptionBudget(_Model):
    """At most ``nodes`` (``N`` or ``N%``) disrupted at once; during ``schedule`` (cron, UTC) for
    ``duration`` when both are set (they go together), otherwise at all times."""

    nodes: str
    schedule: str | None = None
    duration: str | None = None
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = None

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not _BUDGET_NODES_RE.match(value):
            raise ValueError(f"{value!r} is not a node count like '2' or a percentage like '10%'")
        return value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and not _CRON_RE.match(value):
            raise ValueError(f"{value!r} is not a cron schedule like '0 9 * * mon-fri' (UTC) or '@daily'")
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and not _BUDGET_DURATION_RE.match(value):
            raise ValueError(f"{value!r} is not a budget duration like '8h', '30m' or '15h30m'")
        return value

    @model_validator(mode="after")
    def _together(self) -> DisruptionBudget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration must be set together (or neither, for an always-on budget)")
        return self


class Consolidation(_Model):
    """When Karpenter may remove or replace nodes: ``WhenEmpty``, ``WhenEmptyOrUnderutilized`` or
    ``Balanced`` (new in the v1.14 CRD), after ``after`` (a duration like ``30s``/``5m``, or ``Never``)."""

    policy: str = "WhenEmptyOrUnderutilized"
    after: str = "5m"

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        if value == "WhenUnderutilized":
            raise ValueError(
                "WhenUnderutilized is the v1beta1 value and is invalid in karpenter.sh/v1; use WhenEmptyOrUnderutilized"
            )
        if value not in CONSOLIDATION_POLICIES:
            raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(CONSOLIDATION_POLICIES)}")
        return value

    @field_validator("after")
    @classmethod
    def _after(cls, value: str) -> str:
        if value != "Never" and not _DURATION_RE.match(value):
            raise ValueError(f"{value!r} is not a duration like '30s' or '5m', or 'Never'")
        return value


class RootVolume(_Model):
    """Encrypted gp3 root volume sized for model images: 125-1000 MiB/s, 3000-16000 IOPS."""

    size_gib: int = Field(default=200, ge=20, le=16384)
    iops: int = Field(default=6000, ge=3000, le=16000)
    throughput_mibps: int = Field(default=500, ge=125, le=1000)


class Kubelet(_Model):
    """Kubelet settings of an EC2NodeClass (in Karpenter v1 they live there, not on the NodePool)."""

    max_pods: int = Field(default=110, ge=1, le=737)
    eviction_hard: dict[str, str] = Field(
        default_factory=lambda: {"memory.available": "5%", "nodefs.available": "10%", "imagefs.available": "10%"}
    )
    image_gc_high_threshold_percent: int = Field(default=85, ge=1, le=100)
    image_gc_low_threshold_percent: int = Field(default=75, ge=0, le=99)

    @field_validator("eviction_hard")
    @classmethod
    def _signals(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if k not in EVICTION_SIGNALS]
        if bad:
            raise ValueError(f"unknown eviction signal(s) {', '.join(bad)}; allowed: {', '.join(EVICTION_SIGNALS)}")
        return value

    @model_validator(mode="after")
    def _gc_order(self) -> Kubelet:
        if self.image_gc_low_threshold_percent >= self.image_gc_high_threshold_percent:
            raise ValueError(
                f"imageGcLowThresholdPercent ({self.image_gc_low_threshold_percent}) must be below "
                f"imageGcHighThresholdPercent ({self.image_gc_high_threshold_percent})"
            )
        return self


class KarpenterNodeClass(_Model):
    """An EC2NodeClass. ``ami`` is ``pinned`` (the dated AL2023 alias in versions.py) or ``latest``,
    which drifts every node on each AMI release and is allowed only with ``karpenter.allowLatestAmi``."""

    name: str
    ami: Literal["pinned", "latest"] = "pinned"
    root_volume: RootVolume = Field(default_factory=RootVolume)
    kubelet: Kubelet = Field(default_factory=Kubelet)

    _name = field_validator("name")(lambda v: _dns_name(v))

    @property
    def ami_alias(self) -> str:
        return versions.KARPENTER_AMI_ALIAS if self.ami == "pinned" else versions.KARPENTER_LATEST_AMI_ALIAS


class KarpenterNodePool(_Model):
    """A GPU NodePool: one GPU model (its families share it, so the pool labels stay true), the
    contract's taints and labels, a GPU limit, consolidation, expiry, weight and disruption budgets."""

    name: str
    node_class: str | None = None
    purpose: Literal["gpu-inference", "gpu-training"] = contract.GPU_INFERENCE_PURPOSE
    instance_families: list[str] = Field(min_length=1)
    capacity_types: list[Literal["spot", "on-demand", "reserved"]] = Field(default_factory=lambda: ["on-demand"], min_length=1)
    gpu_limit: int = Field(ge=1, le=10000)
    consolidation: Consolidation = Field(default_factory=Consolidation)
    expire_after: str = "720h"
    weight: int = Field(default=10, ge=1, le=100)
    budgets: list[DisruptionBudget] = Field(default_factory=lambda: [DisruptionBudget(nodes="10%")], min_length=1)

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("instance_families")
    @classmethod
    def _families(cls, families: list[str]) -> list[str]:
        known = _gpu_families()
        unknown = [f for f in families if f not in known]
        if unknown:
            raise ValueError(f"unknown GPU instance family {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        models = sorted({known[f] for f in families})
        if len(models) > 1:
            raise ValueError(f"mixes GPU models {', '.join(models)}; a pool holds one GPU model so its labels stay true")
        return families

    @field_validator("expire_after")
    @classmethod
    def _expire(cls, value: str) -> str:
        if value != "Never" and not _DURATION_RE.match(value):
            raise ValueError(f"{value!r} is not a duration like '720h', or 'Never'")
        return value

    @property
    def accelerator(self) -> str:
        return _gpu_families()[self.instance_families[0]]

    @property
    def gpu_memory_mib(self) -> int:
        return next(
            t.gpu_memory_mib or 0 for t in load_catalog().instances.values() if t.family == self.instance_families[0]
        )


class Karpenter(_Model):
    """Karpenter controller and its GPU capacity. Off by default; ``nodePools`` name a ``nodeClass``."""

    enabled: bool = False
    allow_latest_ami: bool = False
    replicas: int = Field(default=2, ge=1, le=5)
    node_classes: list[KarpenterNodeClass] = Field(default_factory=list)
    node_pools: list[KarpenterNodePool] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> Karpenter:
        classes = [c.name for c in self.node_classes]
        if len(set(classes)) != len(classes):
            raise ValueError("nodeClasses names must be unique")
        pools = [p.name for p in self.node_pools]
        if len(set(pools)) != len(pools):
            raise ValueError("nodePools names must be unique")
        for pool in self.node_pools:
            if pool.node_class not in classes:
                raise ValueError(
                    f"nodePools {pool.name!r} names nodeClass {pool.node_class!r}; defined: {', '.join(classes) or 'none'}"
                )
        latest = [c.name for c in self.node_classes if c.ami == "latest"]
        if latest and not self.allow_latest_ami:
            raise ValueError(
                f"nodeClasses {', '.join(latest)} use ami: latest, which drifts every node on each AMI release; "
                "use ami: pinned or set allowLatestAmi: true (never in production)"
            )
        if self.enabled and not self.node_pools:
            raise ValueError("enabled is true but no nodePools are defined")
        return self


class AutoMode(_Model):
    """EKS Auto Mode: AWS runs the node lifecycle (and its own GPU device plugin) on the built-in
    NodeClass. ``gpuNodePools`` are NodePools on that NodeClass (``nodeClass`` is not used)."""

    enabled: bool = False
    gpu_node_pools: list[KarpenterNodePool] = Field(default_factory=list)

    @model_validator(mode="after")
    def _pools(self) -> AutoMode:
        if self.gpu_node_pools and not self.enabled:
            raise ValueError("gpuNodePools are set but enabled is false")
        return self


class HybridNodes(_Model):
    """EKS Hybrid Nodes: on-prem GPU servers joined to the cluster; the GPU Operator installs their driver."""

    enabled: bool = False
    remote_node_networks: list[str] = Field(default_factory=list)
    remote_pod_networks: list[str] = Field(default_factory=list)

    @field_validator("remote_node_networks", "remote_pod_networks")
    @classmethod
    def _cidrs(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not a CIDR ({exc})") from None
        return cidrs

    @model_validator(mode="after")
    def _networks(self) -> HybridNodes:
        if self.enabled and not self.remote_node_networks:
            raise ValueError("enabled is true but remoteNodeNetworks is empty; list the on-prem node CIDRs")
        return self


class GpuSoftware(_Model):
    """What makes GPUs schedulable: ``device-plugin`` (NVIDIA device plugin, for AMIs that ship the
    driver), ``gpu-operator`` (NVIDIA GPU Operator with per-node-type operands), or ``none``."""

    provider: Literal["device-plugin", "gpu-operator", "none"] = "device-plugin"
    dcgm_exporter: bool = True


# --- Serving: tiers of vLLM models, KEDA scaling, the gateway ---

_S3_URI_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9!_.*'()/-]+/)$")
_HF_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")
_BEDROCK_MODEL_RE = re.compile(r"^([a-z]{2}\.)?[a-z0-9-]+\.[A-Za-z0-9.:-]+$")


class Replicas(_Model):
    """KEDA bounds. ``min`` 0 scales the model to zero when idle (never in production)."""

    min: int = Field(ge=0, le=100)
    max: int = Field(ge=1, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> Replicas:
        if self.min > self.max:
            raise ValueError(f"need min <= max, got {self.min} > {self.max}")
        return self


class ModelSource(_Model):
    """Where weights come from: ``s3`` (``s3://bucket/prefix/``, synced to local NVMe by an init
    container) or ``huggingFace`` (``org/repo``, needs the ``huggingFaceToken`` secret). Exactly one."""

    s3: str | None = None
    hugging_face: str | None = None

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
        return (self.s3 or "")[len("s3://"):].split("/", 1)[0]

    @property
    def prefix(self) -> str:
        return (self.s3 or "")[len("s3://"):].split("/", 1)[1]


class ServedModel(_Model):
    """One vLLM deployment. ``gpuMemoryGib`` is what the model needs in GPU memory in total (weights
    plus KV cache at ``maxModelLen``); it is split over ``gpusPerReplica`` GPUs (tensor parallel)."""

    name: str
    source: ModelSource
    pool: str
    gpus_per_replica: int = Field(default=1, ge=1, le=8)
    gpu_memory_gib: float = Field(gt=0, le=640)
    max_model_len: int = Field(default=8192, ge=256, le=1_048_576)
    gpu_memory_utilization: float = Field(default=0.9, ge=0.5, le=0.98)
    replicas: Replicas
    cpu: str = "4"
    memory: str = "32Gi"
    cache_size_gib: int = Field(default=100, ge=10, le=4000)

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY_RE.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity like '4', '500m' or '32Gi'")
        return value

    @property
    def gpu_memory_mib_per_gpu(self) -> int:
        return int(self.gpu_memory_gib * 1024 / self.gpus_per_replica)


class TierScaling(_Model):
    """KEDA thresholds, per replica, on current vLLM metrics and on the gateway's request rate for the
    model. The gateway signal is the one that exists while a model is scaled to zero, so it wakes it
    (``activationRequests``) while the gateway serves the cold model's traffic from Bedrock."""

    waiting_requests: float = Field(default=5, gt=0)
    kv_cache_usage: float = Field(default=0.8, gt=0, le=1)
    ttft_p95_seconds: float = Field(default=2.0, gt=0)
    activation_requests: float = Field(default=0, ge=0)
    gateway_requests_per_second: float = Field(default=2, gt=0)
    cooldown_seconds: int = Field(default=300, ge=30, le=86400)
    polling_seconds: int = Field(default=15, ge=5, le=300)


class TierQuota(_Model):
    """Namespace guardrails so one tier cannot starve another."""

    gpus: int = Field(ge=0, le=10000)
    cpu: str
    memory: str

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY_RE.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity like '64' or '512Gi'")
        return value


class ServingTier(_Model):
    """A tier: its namespace, PriorityClass (higher ``priority`` preempts lower), quota and models."""

    name: str
    priority: int = Field(ge=0, le=1_000_000_000)
    preempt_lower: bool = True
    quota: TierQuota
    scaling: TierScaling = Field(default_factory=TierScaling)
    models: list[ServedModel] = Field(default_factory=list)

    _name = field_validator("name")(lambda v: _dns_name(v))

    @model_validator(mode="after")
    def _quota_covers_models(self) -> ServingTier:
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError("model names must be unique within a tier")
        need = sum(m.replicas.max * m.gpus_per_replica for m in self.models)
        if need > self.quota.gpus:
            raise ValueError(
                f"models can scale to {need} GPUs but quota.gpus is {self.quota.gpus}; "
                "raise the quota or lower replicas.max, or KEDA will scale into pods the quota rejects"
            )
        return self


class Gateway(_Model):
    """OpenAI-compatible router on the system pool that cascades to Amazon Bedrock on 5xx, timeouts
    and overload. ``bedrockModels`` are model or inference-profile ids the gateway may invoke."""

    enabled: bool = True
    replicas: int = Field(default=2, ge=1, le=20)
    bedrock_region: str | None = None
    bedrock_models: list[str] = Field(default_factory=list)
    timeout_seconds: int = Field(default=60, ge=5, le=600)
    num_retries: int = Field(default=1, ge=0, le=5)

    @field_validator("bedrock_models")
    @classmethod
    def _model_ids(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not _BEDROCK_MODEL_RE.match(i)]
        if bad:
            raise ValueError(f"{', '.join(bad)} not Bedrock model ids like anthropic.claude-sonnet-4-5-20250929-v1:0")
        return ids

    @field_validator("bedrock_region")
    @classmethod
    def _region(cls, region: str | None) -> str | None:
        if region is not None and not _REGION_RE.match(region):
            raise ValueError(f"{region!r} is not an AWS region name such as us-east-1")
        return region


class Serving(_Model):
    """Model serving: tiers, the gateway, and the KEDA + Prometheus stack they need."""

    enabled: bool = False
    tiers: list[ServingTier] = Field(default_factory=list)
    gateway: Gateway = Field(default_factory=Gateway)

    @model_validator(mode="after")
    def _tiers(self) -> Serving:
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError("tier names must be unique")
        models = [m.name for t in self.tiers for m in t.models]
        if len(set(models)) != len(models):
            raise ValueError("model names must be unique across tiers (the gateway routes by name)")
        priorities = [t.priority for t in self.tiers]
        if len(set(priorities)) != len(priorities):
            raise ValueError("tier priorities must differ so preemption order is defined")
        return self


class Settings(_Model):
    """All of one stack's ``llm-platform:*`` configuration."""

    environment: str = Field(pattern=r"^[a-z][a-z0-9-]{0,19}$")
    production: bool = False
    region: str
    kubernetes_version: str = versions.DEFAULT_KUBERNETES_VERSION
    network: Network = Field(default_factory=Network)
    endpoint: Endpoint = Field(default_factory=Endpoint)
    admin_role_arns: list[str] = Field(default_factory=list)
    control_plane_logs: list[str] = Field(default_factory=lambda: list(CONTROL_PLANE_LOG_TYPES))
    kms_deletion_window_days: int = Field(default=30, ge=7, le=30)
    system_pool: SystemPool
    gpu_pools: list[GpuPool] = Field(default_factory=list, max_length=10)
    gpu_software: GpuSoftware = Field(default_factory=GpuSoftware)
    karpenter: Karpenter = Field(default_factory=Karpenter)
    auto_mode: AutoMode = Field(default_factory=AutoMode)
    hybrid_nodes: HybridNodes = Field(default_factory=HybridNodes)
    serving: Serving = Field(default_factory=Serving)
    hugging_face_token: SecretStr | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("region")
    @classmethod
    def _region(cls, region: str) -> str:
        if not _REGION_RE.match(region):
            raise ValueError(f"{region!r} is not an AWS region name such as us-east-1")
        return region

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _k8s_version(cls, value: Any) -> str:
        text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if text not in versions.SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"{value!r} is not supported; allowed: {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}")
        return text

    @field_validator("admin_role_arns")
    @classmethod
    def _role_arns(cls, arns: list[str]) -> list[str]:
        bad = [a for a in arns if not _ROLE_ARN_RE.match(a)]
        if bad:
            raise ValueError(f"{', '.join(bad)} not IAM role ARNs such as arn:aws:iam::123456789012:role/platform-admin")
        return arns

    @field_validator("control_plane_logs")
    @classmethod
    def _log_types(cls, logs: list[str]) -> list[str]:
        bad = [log for log in logs if log not in CONTROL_PLANE_LOG_TYPES]
        if bad:
            raise ValueError(f"unknown log type(s) {', '.join(bad)}; allowed: {', '.join(CONTROL_PLANE_LOG_TYPES)}")
        return logs

    @field_validator("gpu_pools")
    @classmethod
    def _unique_pool_names(cls, pools: list[GpuPool]) -> list[GpuPool]:
        names = [p.name for p in pools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"pool names must be unique; repeated: {', '.join(dupes)}")
        return pools

    @model_validator(mode="after")
    def _production_endpoint(self) -> Settings:
        if self.production and self.endpoint.open_to_world:
            raise ValueError(
                "endpoint.publicAccessCidrs contains 0.0.0.0/0 in a production stack; "
                "list your own CIDRs or set endpoint.publicAccess to false"
            )
        if self.production and self.karpenter.allow_latest_ami:
            raise ValueError("karpenter.allowLatestAmi is true in a production stack; pin dated AMI aliases")
        return self

    @model_validator(mode="after")
    def _gpu_capacity_and_software(self) -> Settings:
        karpenter_pools = self.karpenter.node_pools if self.karpenter.enabled else []
        if not (self.gpu_pools or karpenter_pools or self.auto_mode.gpu_node_pools or self.hybrid_nodes.enabled):
            raise ValueError("no GPU capacity: define gpuPools, karpenter.nodePools, autoMode.gpuNodePools or hybridNodes")
        provider = self.gpu_software.provider
        if provider == "device-plugin" and self.hybrid_nodes.enabled:
            raise ValueError(
                "gpuSoftware.provider device-plugin with hybridNodes: on-prem GPU nodes need the GPU Operator "
                "to install their driver; set gpuSoftware.provider to gpu-operator"
            )
        if provider == "device-plugin" and self.auto_mode.gpu_node_pools and not (self.gpu_pools or karpenter_pools):
            raise ValueError(
                "gpuSoftware.provider device-plugin with only Auto Mode GPU capacity: Auto Mode nodes already run "
                "a device plugin, a second one would fight it; set gpuSoftware.provider to none"
            )
        overlap = [
            cidr for cidr in self.hybrid_nodes.remote_node_networks + self.hybrid_nodes.remote_pod_networks
            if ipaddress.ip_network(cidr).overlaps(ipaddress.ip_network(self.network.vpc_cidr))
        ]
        if overlap:
            raise ValueError(f"hybridNodes networks {', '.join(overlap)} overlap network.vpcCidr {self.network.vpc_cidr}")
        return self

    @model_validator(mode="after")
    def _models_fit_their_pools(self) -> Settings:
        pools = self.gpu_pool_facts()
        problems = []
        for tier in self.serving.tiers:
            for model in tier.models:
                where = f"serving.tiers[{tier.name}].models[{model.name}]"
                pool = pools.get(model.pool)
                if pool is None:
                    problems.append(f"{where}.pool {model.pool!r} is not a GPU pool; allowed: {', '.join(sorted(pools)) or 'none'}")
                    continue
                if pool.purpose != contract.GPU_INFERENCE_PURPOSE:
                    problems.append(f"{where}.pool {model.pool!r} is a {pool.purpose} pool; serve from gpu-inference pools")
                if model.gpus_per_replica > pool.max_gpus_per_node:
                    problems.append(
                        f"{where} needs {model.gpus_per_replica} GPUs per replica but {model.pool!r} nodes have at most "
                        f"{pool.max_gpus_per_node}; tensor parallelism stays within one node"
                    )
                usable = int(pool.gpu_memory_mib * model.gpu_memory_utilization)
                if model.gpu_memory_mib_per_gpu > usable:
                    problems.append(
                        f"{where} needs {model.gpu_memory_mib_per_gpu} MiB per GPU ({model.gpu_memory_gib} GiB over "
                        f"{model.gpus_per_replica} GPU(s)) but {model.pool!r} GPUs ({pool.accelerator}) offer {usable} MiB "
                        f"at gpuMemoryUtilization {model.gpu_memory_utilization}; use more GPUs per replica or a larger GPU"
                    )
                if self.production and model.replicas.min == 0:
                    problems.append(f"{where}.replicas.min is 0 in a production stack; keep at least 1 warm replica")
                if model.source.hugging_face and self.hugging_face_token is None:
                    problems.append(f"{where} loads from Hugging Face but llm-platform:huggingFaceToken is not set (set it with --secret)")
        if self.serving.enabled and self.serving.gateway.enabled and self.serving.gateway.bedrock_models and not self.serving.gateway.bedrock_region:
            problems.append("serving.gateway.bedrockRegion is required when bedrockModels are listed")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def gpu_pool_facts(self) -> dict[str, PoolFacts]:
        """Every GPU pool a workload can target, by name, with what it offers."""
        catalog = load_catalog()
        facts = {}
        for pool in self.gpu_pools:
            types = [catalog.instances[t] for t in pool.instance_types]
            facts[pool.name] = PoolFacts(
                pool.purpose, pool.accelerator, pool.gpu_memory_mib, max(t.gpus for t in types),
                max(t.on_demand_hourly_usd / t.gpus for t in types),
            )
        node_pools = (self.karpenter.node_pools if self.karpenter.enabled else []) + self.auto_mode.gpu_node_pools
        for pool in node_pools:
            types = [t for t in catalog.instances.values() if t.is_gpu and t.family in pool.instance_families]
            facts[pool.name] = PoolFacts(
                pool.purpose, pool.accelerator, pool.gpu_memory_mib, max(t.gpus for t in types),
                max(t.on_demand_hourly_usd / t.gpus for t in types),
            )
        return facts

    @property
    def cluster_name(self) -> str:
        return f"{NAMESPACE}-{self.environment}"


@dataclass(frozen=True)
class PoolFacts:
    """What a GPU pool offers a workload: purpose, GPU model and memory, GPUs per node, $/GPU-hour."""

    purpose: str
    accelerator: str
    gpu_memory_mib: int
    max_gpus_per_node: int
    max_usd_per_gpu_hour: float


@dataclass(frozen=True)
class Problem:
    """One bad setting: the config key path, the value given, and what is wrong or allowed."""

    key: str
    value: Any
    reason: str

    def __str__(self) -> str:
        shown = "(missing)" if self.value is _MISSING else json.dumps(self.value, default=str)
        return f"{self.key}: got {shown}: {self.reason}"


class SettingsError(Exception):
    """Every problem found in one stack's settings, reported together."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid stack settings ({len(problems)} problem(s)):\n{lines}")


_MISSING = object()


def _key_path(loc: tuple[Any, ...]) -> str:
    path = f"{NAMESPACE}:{loc[0]}" if loc else NAMESPACE
    for part in loc[1:]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _lookup(raw: Mapping[str, Any], loc: tuple[Any, ...]) -> Any:
    node: Any = raw
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return node


def _reason(error: Mapping[str, Any], loc: tuple[Any, ...]) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown key; allowed keys here: {', '.join(_allowed_keys(loc[:-1]))}"
    if error["type"] == "missing":
        return "required key is missing"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _allowed_keys(parent: tuple[Any, ...]) -> list[str]:
    model: Any = Settings
    for part in parent:
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if f.alias == part or n == part), None)
        if field is None:
            return []
        annotation = field.annotation
        inner = getattr(annotation, "__args__", (annotation,))[0] if hasattr(annotation, "__args__") else annotation
        model = inner if isinstance(inner, type) and issubclass(inner, BaseModel) else annotation
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _decode(value: Any) -> Any:
    """Config arrives as strings (``PULUMI_CONFIG``); objects and lists arrive as JSON text."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def parse_settings(config: Mapping[str, Any]) -> Settings:
    """Parse a stack's config map (keys ``llm-platform:<key>``; other namespaces are ignored)."""
    prefix = f"{NAMESPACE}:"
    raw = {k[len(prefix):]: _decode(v) for k, v in config.items() if k.startswith(prefix)}
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            problems.append(Problem(_key_path(loc), _lookup(raw, loc), _reason(error, loc)))
        raise SettingsError(problems) from None


def config_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Turn a stack file's ``config:`` block into the string map the language host would pass."""
    out = {}
    for key, value in config.items():
        if isinstance(value, (dict, list)):
            out[key] = json.dumps(value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def stack_settings() -> Settings:
    """Settings of the running stack, from the config the language host passes to the program."""
    import pulumi

    try:
        return parse_settings(pulumi.runtime.get_config_env())
    except SettingsError as exc:
        raise pulumi.RunError(str(exc)) from None
