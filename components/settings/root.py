"""The whole stack's settings: the root model whose fields are the per-concern models.

Apart from parsing (``stack``) so that the specs and the capacity adapter can name ``Settings``
without reaching the rules that call them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from components import versions
from components.settings._base import NAMESPACE, _Model, check_region, keyed, partition_of, repeated
from components.settings.cluster import Endpoint, GpuSoftware, HybridNodes, Network, UpgradePolicy
from components.settings.gpu_budget import GpuBudget
from components.settings.karpenter import AutoMode, Karpenter, KarpenterNodePool
from components.settings.managed_pools import GpuPool, SystemPool
from components.settings.observability import Observability, _secret
from components.settings.problems import Problem, SettingsError
from components.settings.serving import Serving

_TAG_RE = re.compile(r"[\w .:/=+\-@]*")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class Settings(_Model):
    """All of one stack's ``llm-platform:*`` configuration."""

    environment: str = Field(
        description="The stack's name: 1-20 lowercase letters, digits or '-', starting with a letter. It names the "
        "cluster (llm-platform-<environment>) and its AWS resources.",
    )
    production: bool = Field(
        default=False,
        description="Whether production's rules apply: no public endpoint open to 0.0.0.0/0, no "
        "karpenter.allowLatestAmi, no scale-to-zero model, the interactive tier on 2 or more replicas without Spot, "
        "2 Prometheus replicas, and alert receivers when serving. It also turns deletionProtection on by default.",
    )
    region: str = Field(description="The AWS region the stack runs in, such as us-east-1.")
    kubernetes_version: str = Field(
        default=versions.DEFAULT_KUBERNETES_VERSION,
        description="The cluster's Kubernetes minor: one this project pins ("
        + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS)
        + f") that is in EKS standard support. Warned from {versions.SUPPORT_WARNING_DAYS} days before standard "
        "support ends, refused after it.",
    )
    network: Network = Field(
        default_factory=Network,
        description="The VPC: its CIDR, how many Availability Zones and how many NAT gateways.",
    )
    endpoint: Endpoint = Field(
        default_factory=Endpoint,
        description="Who reaches the Kubernetes API: private only by default; public access is opt-in with CIDRs.",
    )
    admin_role_arns: list[str] = Field(
        default_factory=list,
        description="IAM role ARNs given cluster-admin access entries (default none).",
    )
    control_plane_logs: list[str] = Field(
        default_factory=lambda: list(CONTROL_PLANE_LOG_TYPES),
        description="EKS control plane log types sent to CloudWatch Logs (default: all five).",
    )
    kms_deletion_window_days: int = Field(
        default=30, ge=7, le=30,
        description="Days the KMS key that encrypts Kubernetes Secrets waits before deletion once the stack is "
        "destroyed (default 30). Unit: days.",
    )
    upgrade_policy: UpgradePolicy = Field(
        default_factory=UpgradePolicy,
        description="The cluster's EKS upgrade policy: supportType STANDARD (default) or EXTENDED.",
    )
    deletion_protection: bool | None = Field(
        default=None,
        description="Whether EKS refuses to delete the cluster (DeleteCluster fails until it is turned off); default "
        "true when production is true, false otherwise (ephemeral environments and test stacks must be "
        "destroyable). To tear down a production stack, set false, run up, then destroy.",
    )
    system_pool: SystemPool = Field(
        description="The untainted on-demand CPU node group for controllers and add-ons.",
    )
    gpu_pools: list[GpuPool] = Field(
        default_factory=list, max_length=10,
        description="GPU managed node groups, grown by Cluster Autoscaler (default none).",
    )
    gpu_software: GpuSoftware = Field(
        default_factory=GpuSoftware,
        description="What makes GPUs schedulable on the nodes: the NVIDIA device plugin by default, or the GPU "
        "Operator, with the DCGM exporter.",
    )
    karpenter: Karpenter = Field(
        default_factory=Karpenter,
        description="Karpenter and the GPU NodePools it launches (off by default).",
    )
    auto_mode: AutoMode = Field(
        default_factory=AutoMode,
        description="EKS Auto Mode and the GPU NodePools on its built-in NodeClass (off by default).",
    )
    hybrid_nodes: HybridNodes = Field(
        default_factory=HybridNodes,
        description="On-prem GPU servers joined as EKS Hybrid Nodes (off by default; docs/hybrid-nodes.md).",
    )
    serving: Serving = Field(
        default_factory=Serving,
        description="Model serving: tiers of vLLM models, their autoscaling and the gateway (off by default).",
    )
    observability: Observability = Field(
        default_factory=Observability,
        description="Prometheus storage and replicas, and where alerts go.",
    )
    hugging_face_token: SecretStr | None = Field(
        default=None,
        description="Hugging Face access token, set with `pulumi config set --secret`; required by models whose "
        "source is huggingFace (default unset).",
    )
    gpu_hours_monthly_budget: int | None = Field(
        default=None, ge=1, le=10_000_000,
        description="GPU hours per 30 days: Prometheus records GPU hours and alerts above it (default unset: no "
        "alert). Unit: GPU-hours.",
    )
    gpu_budget: GpuBudget | None = Field(
        default=None,
        description="The stack's GPU cap and monthly GPU budget at on-demand prices; the settings refuse a stack "
        "whose worst case exceeds them and the policy pack enforces them (default unset: not judged).",
    )
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="AWS tags added to every AWS resource (default none; at most 40).",
    )

    @field_validator("environment")
    @classmethod
    def _environment(cls, name: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,19}", name) or name.endswith("-"):
            raise ValueError("must be 1-20 lowercase letters, digits or '-', starting with a letter (a DNS label: "
                             "it names the cluster and its AWS resources)")
        return name

    @field_validator("region")
    @classmethod
    def _region(cls, region: str) -> str:
        return check_region(region)

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _k8s_version(cls, value: Any) -> str:
        text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if text not in versions.SUPPORTED_KUBERNETES_VERSIONS:
            allowed = f"allowed: {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}"
            if isinstance(text, str) and text in versions.NOT_YET_ON_EKS:
                blocking = ", ".join(f"{component} ({low}-{high})"
                                     for component, low, high, _ in versions.components_not_running_on(text))
                raise ValueError(f"{text} is refused: {versions.NOT_YET_ON_EKS[text]}"
                                 + (f"; pinned components not known to run on it: {blocking}" if blocking else "")
                                 + f"; {allowed}")
            raise ValueError(f"{text!r} is not supported; {allowed}")
        support = versions.EKS_KUBERNETES_SUPPORT[text]
        if support_date() > support.standard_support_ends:
            left = (f"{text} left EKS standard support on {support.standard_support_ends.isoformat()}: every cluster "
                    f"hour now bills extended support (until {support.extended_support_ends.isoformat()})")
            in_support = _minors_in_support()
            if not in_support:
                newest = versions.SUPPORTED_KUBERNETES_VERSIONS[-1]
                raise ValueError(f"{left}; no minor this project pins is in standard support on "
                                 f"{support_date().isoformat()} (the newest, {newest}, left it on "
                                 f"{versions.EKS_KUBERNETES_SUPPORT[newest].standard_support_ends.isoformat()}): "
                                 "update the project's components/versions.py to a newer EKS minor")
            raise ValueError(f"{left}; upgrade to {in_support[-1]} (allowed: {', '.join(in_support)})")
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

    @field_validator("tags")
    @classmethod
    def _aws_tags(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            if not _TAG_RE.fullmatch(key) or not 1 <= len(key) <= 128 or key.lower().startswith("aws:"):
                raise keyed("not an AWS tag key: 1-128 letters, digits, spaces and _ . : / = + - @, not starting "
                            "with aws:", key)
            if not isinstance(value, str) or not _TAG_RE.fullmatch(value) or len(value) > 256:
                raise keyed("not an AWS tag value: up to 256 letters, digits, spaces and _ . : / = + - @", key)
        if len(tags) > 40:
            raise ValueError(f"{len(tags)} tags; keep at most 40 (AWS allows 50 per resource and the platform adds its own)")
        return tags

    @field_validator("gpu_pools")
    @classmethod
    def _unique_pool_names(cls, pools: list[GpuPool]) -> list[GpuPool]:
        names = [p.name for p in pools]
        for name in repeated(names):
            index = len(names) - 1 - names[::-1].index(name)
            raise keyed(f"pool name {name!r} is repeated (gpuPools[{names.index(name)}] has it too); "
                        "pool names must be unique", index, "name")
        return pools

    @field_validator("hugging_face_token", mode="before")
    @classmethod
    def _token(cls, value: Any) -> Any:
        value = _secret(value)
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if isinstance(text, str) and not re.fullmatch(r"[\x21-\x7e]{8,512}", text.strip()):
            raise ValueError("must be a Hugging Face access token (8-512 printable characters, no spaces)")
        return value

    @model_validator(mode="after")
    def _sns_topics_in_the_stacks_partition(self) -> Settings:
        """Alertmanager publishes with this cluster's role: a topic of another partition (``aws-cn``,
        ``aws-us-gov``) cannot be reached from here, whatever its policy says."""
        partition = partition_of(self.region)
        for index, receiver in enumerate(self.observability.alerting.receivers):
            if receiver.sns is not None and receiver.sns.topic_arn.split(":")[1] != partition:
                raise keyed(f"the topic is in partition {receiver.sns.topic_arn.split(':')[1]!r}, but region "
                            f"{self.region} is in {partition!r}: use a topic of this partition "
                            f"(arn:{partition}:sns:...)", "observability", "alerting", "receivers", index, "sns", "topicArn")
        return self

    def gpu_pool_facts(self) -> dict[str, PoolFacts]:
        """Every GPU pool a workload can target, by name, with what it offers."""
        node_pools = (self.karpenter.node_pools if self.karpenter.enabled else []) + self.auto_mode.gpu_node_pools
        pools: list[GpuPool | KarpenterNodePool] = [*self.gpu_pools, *node_pools]
        facts = {
            pool.name: PoolFacts(
                purpose=pool.purpose,
                accelerator=pool.accelerator,
                gpu_memory_mib=pool.gpu_memory_mib,
                max_gpus_per_node=max(t.gpus for t in pool.instances),
                shapes=tuple((t.name, t.gpus, t.efa_interfaces) for t in pool.instances),
            )
            for pool in pools
        }
        for hybrid in self.hybrid_nodes.active_pools:
            facts[hybrid.name] = PoolFacts(purpose=hybrid.purpose, accelerator=hybrid.accelerator,
                                           gpu_memory_mib=hybrid.gpu_memory_mib, max_gpus_per_node=hybrid.gpus_per_node,
                                           hybrid=True)
        return facts

    @property
    def cluster_deletion_protection(self) -> bool:
        """``deletionProtection`` as set, else the environment's default (on in production)."""
        return self.production if self.deletion_protection is None else self.deletion_protection

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
    #: ``(instance type, GPUs, EFA interfaces)`` of every type the pool may launch.
    shapes: tuple[tuple[str, int, int], ...] = ()
    #: On-prem servers joined as EKS Hybrid Nodes (fixed capacity, no cloud price).
    hybrid: bool = False

    def efa_interfaces(self, gpus: int) -> int:
        """EFA interfaces a pod of ``gpus`` GPUs requests on this pool: every interface of the smallest-EFA type
        that holds it (each such pod takes a node of its own); 0 when no type that holds it has EFA."""
        return min((efa for _, count, efa in self.shapes if count >= gpus and efa), default=0)


def support_date() -> date:
    """The day support windows are judged on: today (UTC), or ``LLM_PLATFORM_TODAY`` (YYYY-MM-DD)
    to see what a stack will be told on another day."""
    override = os.environ.get("LLM_PLATFORM_TODAY", "")
    if override:
        try:
            return date.fromisoformat(override)
        except ValueError:
            raise SettingsError([Problem("LLM_PLATFORM_TODAY", override[:40], "must be a date such as 2026-12-01")]) from None
    return datetime.now(UTC).date()


def _minors_in_support() -> list[str]:
    today = support_date()
    return [m for m in versions.SUPPORTED_KUBERNETES_VERSIONS
            if versions.EKS_KUBERNETES_SUPPORT[m].standard_support_ends >= today]
