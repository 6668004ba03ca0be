"""The whole stack's settings, cross-field rules, and parsing config into them with every problem reported."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from .. import contract, versions
from ..catalog import load_catalog
from ._base import _REGION_RE, NAMESPACE, _Model
from .cluster import Endpoint, GpuSoftware, HybridNodes, Network, service_cidr
from .karpenter import AutoMode, Karpenter
from .managed_pools import GpuPool, SystemPool
from .observability import GPU_HOURS_WINDOW_DAYS, SECRET_FIELDS, Observability, mask_secrets
from .serving import INTERACTIVE_TIER, MIN_INTERACTIVE_REPLICAS, Serving

_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")


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
    observability: Observability = Field(default_factory=Observability)
    hugging_face_token: SecretStr | None = None
    gpu_hours_monthly_budget: int | None = Field(default=None, ge=1, le=10_000_000)
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
            raise ValueError(
                f"{value!r} is not supported; allowed: {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}"
            )
        return text

    @field_validator("admin_role_arns")
    @classmethod
    def _role_arns(cls, arns: list[str]) -> list[str]:
        bad = [a for a in arns if not _ROLE_ARN_RE.match(a)]
        if bad:
            raise ValueError(
                f"{', '.join(bad)} not IAM role ARNs such as arn:aws:iam::123456789012:role/platform-admin"
            )
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
            raise ValueError(
                "no GPU capacity: define gpuPools, karpenter.nodePools, autoMode.gpuNodePools or hybridNodes"
            )
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
        remote = self.hybrid_nodes.remote_node_networks + self.hybrid_nodes.remote_pod_networks
        overlap = [c for c in remote if ipaddress.ip_network(c).overlaps(ipaddress.ip_network(self.network.vpc_cidr))]
        if overlap:
            raise ValueError(
                f"hybridNodes networks {', '.join(overlap)} overlap network.vpcCidr {self.network.vpc_cidr}"
            )
        services = service_cidr(self.network.vpc_cidr)
        overlap = [c for c in remote if ipaddress.ip_network(c).overlaps(ipaddress.ip_network(services))]
        if overlap:
            raise ValueError(f"hybridNodes networks {', '.join(overlap)} overlap the cluster's Service range {services}")
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
                    problems.append(
                        f"{where}.pool {model.pool!r} is not a GPU pool; allowed: {', '.join(sorted(pools)) or 'none'}"
                    )
                    continue
                if pool.purpose != contract.GPU_INFERENCE_PURPOSE:
                    problems.append(
                        f"{where}.pool {model.pool!r} is a {pool.purpose} pool; serve from gpu-inference pools"
                    )
                if model.gpus_per_replica > pool.max_gpus_per_node:
                    problems.append(
                        f"{where} needs {model.gpus_per_replica} GPUs per replica but {model.pool!r} nodes have at most "
                        f"{pool.max_gpus_per_node}; tensor parallelism stays within one node"
                    )
                if self.production and model.replicas.min == 0:
                    problems.append(f"{where}.replicas.min is 0 in a production stack; keep at least 1 warm replica")
                if model.source.hugging_face and self.hugging_face_token is None:
                    problems.append(
                        f"{where} loads from Hugging Face but llm-platform:huggingFaceToken is not set (set it with --secret)"
                    )
        if (
            self.serving.enabled
            and self.serving.gateway.enabled
            and (self.serving.gateway.bedrock_models or self.serving.gateway.bedrock_embedding_models)
            and not self.serving.gateway.bedrock_region
        ):
            problems.append("serving.gateway.bedrockRegion is required when bedrockModels are listed")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _production_interactive(self) -> Settings:
        """In production the interactive tier keeps 2+ replicas (its PDB then always leaves one
        serving) on capacity that is never reclaimed (on-demand only)."""
        if not (self.production and self.serving.enabled):
            return self
        spot_pools = {p.name for p in self.gpu_pools if p.capacity_type == "SPOT"}
        node_pools = (self.karpenter.node_pools if self.karpenter.enabled else []) + self.auto_mode.gpu_node_pools
        spot_pools |= {p.name for p in node_pools if "spot" in p.capacity_types}
        problems = []
        for tier in self.serving.tiers:
            if tier.name != INTERACTIVE_TIER:
                continue
            for model in tier.models:
                where = f"serving.tiers[{tier.name}].models[{model.name}]"
                if model.replicas.min < MIN_INTERACTIVE_REPLICAS:
                    problems.append(
                        f"{where}.replicas.min is {model.replicas.min} in a production stack; the interactive tier keeps "
                        f"at least {MIN_INTERACTIVE_REPLICAS} so one node loss or drain never takes the model down"
                    )
                if model.pool in spot_pools:
                    problems.append(
                        f"{where}.pool {model.pool!r} allows Spot capacity; in production the interactive tier runs on an "
                        "on-demand-only pool (a Spot reclaim would take replicas away under load)"
                    )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _observability(self) -> Settings:
        problems = []
        prometheus = self.observability.prometheus
        if self.gpu_hours_monthly_budget is not None and prometheus.retention_days < GPU_HOURS_WINDOW_DAYS:
            problems.append(
                f"observability.prometheus.retentionDays {prometheus.retention_days} is shorter than the "
                f"{GPU_HOURS_WINDOW_DAYS}-day window of the GPU-hour budget rule; keep at least {GPU_HOURS_WINDOW_DAYS}"
            )
        if self.production and prometheus.replicas < 2:
            problems.append(
                f"observability.prometheus.replicas is {prometheus.replicas} in a production stack; run 2 so "
                "alerts and KEDA's queries survive a Prometheus restart"
            )
        if self.production and self.serving.enabled and not self.observability.alerting.receivers:
            problems.append(
                "observability.alerting.receivers is empty in a production stack: alerts would reach no one; "
                "add a slack, pagerDuty, sns or webhook receiver"
            )
        tiers = {t.name for t in self.serving.tiers}
        for i, route in enumerate(self.observability.alerting.routes if self.serving.enabled else []):
            unknown = [t for t in route.tiers if t not in tiers]
            if unknown:
                problems.append(
                    f"observability.alerting.routes[{i}].tiers names unknown tier(s) {', '.join(unknown)}; "
                    f"tiers: {', '.join(sorted(tiers)) or 'none'}"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def gpu_pool_facts(self) -> dict[str, PoolFacts]:
        """Every GPU pool a workload can target, by name, with what it offers."""
        catalog = load_catalog()
        candidates = [(pool, [catalog.instances[t] for t in pool.instance_types]) for pool in self.gpu_pools]
        node_pools = (self.karpenter.node_pools if self.karpenter.enabled else []) + self.auto_mode.gpu_node_pools
        candidates += [
            (pool, [t for t in catalog.instances.values() if t.is_gpu and t.family in pool.instance_families])
            for pool in node_pools
        ]
        return {
            pool.name: PoolFacts(
                purpose=pool.purpose,
                accelerator=pool.accelerator,
                gpu_memory_mib=pool.gpu_memory_mib,
                max_gpus_per_node=max(t.gpus for t in types),
            )
            for pool, types in candidates
        }

    @property
    def cluster_name(self) -> str:
        return f"{NAMESPACE}-{self.environment}"


@dataclass(frozen=True)
class PoolFacts:
    """What a GPU pool offers a workload: purpose, GPU model and memory, GPUs per node (costs come from
    ``policies/capacity``, the one calculator)."""

    purpose: str
    accelerator: str
    gpu_memory_mib: int
    max_gpus_per_node: int


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


def decode_config_value(value: Any) -> Any:
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
    raw = {k[len(prefix) :]: decode_config_value(v) for k, v in config.items() if k.startswith(prefix)}
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            if SECRET_FIELDS & {str(part) for part in loc}:
                shown = "(secret, not shown)"
            else:
                shown = mask_secrets(_lookup(raw, loc)) if loc else "(several settings, named below)"
            problems.append(Problem(_key_path(loc), shown, _reason(error, loc)))
        raise SettingsError(problems) from None
    problems = capacity_problems(settings)
    if problems:
        raise SettingsError(problems)
    return settings


def capacity_problems(settings: Settings) -> list[Problem]:
    """The capacity simulation's blocking findings, each named by the setting to edit and its value."""
    from ..capacity_input import problem_key, settings_simulation  # the adapter imports components

    problems = []
    for finding in settings_simulation(settings).blocking:
        key, value = problem_key(finding, settings)
        problems.append(Problem(f"{NAMESPACE}:{key}", value, finding.message))
    return problems


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
