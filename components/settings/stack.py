"""The whole stack's settings, and parsing config into them with every problem reported in one round.

Field rules sit on the models (one module per concern), rules between keys in ``rules``, and how a
problem is shown in ``problems``."""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from components import versions
from components.settings._base import NAMESPACE, _Model, check_region, keyed, partition_of, repeated
from components.settings.gpu_budget import GpuBudget
from components.settings.cluster import Endpoint, GpuSoftware, HybridNodes, Network
from components.settings.karpenter import AutoMode, Karpenter
from components.settings.managed_pools import GpuPool, SystemPool
from components.settings.observability import Observability, _secret
from components.settings.problems import (
    Problem,
    SettingsError,
    decode_config_value,
    field_problem,
    masked,
    secret_warnings,
)
from components.settings.rules import capacity_problems, cross_field_problems
from components.settings.serving import Serving

_TAG_RE = re.compile(r"[\w .:/=+\-@]*")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class Settings(_Model):
    """All of one stack's ``llm-platform:*`` configuration."""

    environment: str
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
    gpu_budget: GpuBudget | None = None
    tags: dict[str, str] = Field(default_factory=dict)

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
            raise ValueError(
                f"{value!r} is not supported; allowed: {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}"
            )
        support = versions.EKS_KUBERNETES_SUPPORT[text]
        if support_date() > support.standard_support_ends:
            newest = versions.SUPPORTED_KUBERNETES_VERSIONS[-1]
            raise ValueError(
                f"{text} left EKS standard support on {support.standard_support_ends.isoformat()}: every cluster "
                f"hour now bills extended support (until {support.extended_support_ends.isoformat()}); "
                f"upgrade to {newest} (allowed: {', '.join(_minors_in_support())})"
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
    def _sns_topics_in_the_stacks_partition(self) -> "Settings":
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
        return {
            pool.name: PoolFacts(
                purpose=pool.purpose,
                accelerator=pool.accelerator,
                gpu_memory_mib=pool.gpu_memory_mib,
                max_gpus_per_node=max(t.gpus for t in pool.instances),
            )
            for pool in [*self.gpu_pools, *node_pools]
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




#: Stand-ins for required top-level keys that failed, so the cross-field rules that do not read them
#: still run in the same round (rules that read a failed key are skipped: their finding would be noise).
_STAND_INS: dict[str, Any] = {
    "environment": "x",
    "region": "us-east-1",
    "systemPool": {"instanceTypes": ["m7i.xlarge"], "scaling": {"minSize": 2, "desiredSize": 2, "maxSize": 2}},
}


def parse_settings(config: Mapping[str, Any]) -> Settings:
    """Parse a stack's config map (keys ``llm-platform:<key>``; other namespaces are ignored).

    Every problem is reported in one round: field errors, then the cross-field rules whose keys are
    valid, then (when everything else passed) the capacity simulation's blocking findings."""
    prefix = f"{NAMESPACE}:"
    misspelled = _misspelled_namespaces(config)
    raw = {k[len(prefix) :]: decode_config_value(v) for k, v in config.items() if k.startswith(prefix)}
    try:
        if _parsed is None:
            settings = _parse(raw)
        else:
            key = repr(raw)  # equal text: equal values and types
            if key not in _parsed:
                _parsed[key] = _parse(raw)
            settings = _parsed[key]
    except SettingsError as exc:
        raise SettingsError(misspelled + exc.problems) from None
    if misspelled:
        raise SettingsError(misspelled)
    return settings


def _misspelled_namespaces(config: Mapping[str, Any]) -> list[Problem]:
    """Keys whose namespace nearly spells this project's (``llm-platfrom:gpuPools``): the Pulumi
    CLI accepts any namespace, so such a setting would be silently ignored."""
    problems = []
    for key, value in config.items():
        namespace, colon, name = str(key).partition(":")
        if colon and namespace != NAMESPACE and difflib.SequenceMatcher(None, namespace, NAMESPACE).ratio() >= 0.8:
            problems.append(Problem(str(key)[:120], masked(decode_config_value(value), name),
                                    f"namespace {namespace[:40]!r} is not {NAMESPACE!r}, so this setting would be "
                                    f"ignored; write {NAMESPACE}:{name[:60]}"))
    return problems


#: Settings parsed within :func:`parsed_once`, by the decoded config's text.
_parsed: dict[str, Settings] | None = None


@contextmanager
def parsed_once() -> Iterator[None]:
    """Within, a config already parsed gives the same (frozen) Settings again without parsing.

    The offline check parses a stack before it records the program, and the program parses the
    same strings again (at 500 models, validation and the capacity simulation were 0.3 s). Only
    within this block: elsewhere every call parses, so nothing depends on what was parsed before.
    """
    global _parsed
    outer, _parsed = _parsed, {} if _parsed is None else _parsed
    try:
        yield
    finally:
        _parsed = outer


def _parse(raw: dict[str, Any]) -> Settings:
    problems: list[Problem] = []
    failed: set[str] = set()
    try:
        settings: Settings | None = Settings.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        problems += [field_problem(Settings, raw, e) for e in errors]
        failed = {str(e["loc"][0]) for e in errors if e["loc"]}
        partial = {k: v for k, v in raw.items() if k not in failed}
        partial.update({k: v for k, v in _STAND_INS.items() if k in failed})
        try:
            settings = Settings.model_validate(partial)
        except ValidationError:
            settings = None
    if settings is not None:
        problems += cross_field_problems(settings, failed)
        if not problems:
            problems += capacity_problems(settings)
    if problems:
        raise SettingsError(problems)
    assert settings is not None
    return settings


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


def kubernetes_warnings(settings: Settings) -> list[str]:
    """What a stack is told about its Kubernetes minor: the end of standard support from
    ``SUPPORT_WARNING_DAYS`` before, and each pinned component not known to run on it."""
    minor = settings.kubernetes_version
    support = versions.EKS_KUBERNETES_SUPPORT[minor]
    key = f"{NAMESPACE}:kubernetesVersion"
    out = []
    days = (support.standard_support_ends - support_date()).days
    if days <= versions.SUPPORT_WARNING_DAYS:
        out.append(f"warning: {key} {minor} leaves EKS standard support on {support.standard_support_ends.isoformat()} "
                   f"(in {days} day(s)); from then on it is refused, and a running cluster bills extended support: "
                   f"upgrade to {versions.SUPPORTED_KUBERNETES_VERSIONS[-1]}")
    for component, (low, high, source) in versions.COMPONENT_KUBERNETES_RANGES.items():
        if not _minor_key(low) <= _minor_key(minor) <= _minor_key(high):
            out.append(f"warning: {key} {minor}: {component} is known to run on {low}-{high} ({source})")
    return out


def _minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in minor.split("."))


def settings_warnings(config: Mapping[str, Any], settings: Settings, secret_keys: Iterable[str] = ()) -> list[str]:
    """Every warning a valid stack gets: credentials in plain text, its Kubernetes minor's support."""
    return secret_warnings(config, secret_keys) + kubernetes_warnings(settings)


def stack_settings() -> Settings:
    """Settings of the running stack, from the config the language host passes to the program.

    Credentials set with ``--secret`` arrive decrypted and are used only inside ``Output.secret``;
    one set in plain text is accepted with a warning naming the key."""
    import pulumi

    config = pulumi.runtime.get_config_env()
    try:
        settings = parse_settings(config)
    except SettingsError as exc:
        raise pulumi.RunError(str(exc)) from None
    for line in settings_warnings(config, settings, pulumi.runtime.get_config_secret_keys_env()):
        pulumi.log.warn(line.removeprefix("warning: "))  # the engine labels it a warning
    return settings

