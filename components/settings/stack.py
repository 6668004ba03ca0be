"""The whole stack's settings, cross-field rules, and parsing config into them with every problem reported."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping
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

from components import contract, versions
from components.settings._base import _REGION_RE, NAMESPACE, _Model, keyed, repeated
from components.settings.gpu_budget import GpuBudget, over_budget
from components.settings.cluster import Endpoint, GpuSoftware, HybridNodes, Network, service_cidr
from components.settings.karpenter import AutoMode, Karpenter
from components.settings.managed_pools import GpuPool, SystemPool
from components.settings.observability import GPU_HOURS_WINDOW_DAYS, SECRET_FIELDS, Observability, _secret, mask_secrets
from components.settings.serving import INTERACTIVE_TIER, MIN_INTERACTIVE_REPLICAS, Serving

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


@dataclass(frozen=True)
class Problem:
    """One bad setting: the config key path, the value given (shortened; secrets never shown), and
    what is wrong or allowed."""

    key: str
    value: Any
    reason: str

    def __str__(self) -> str:
        if self.value is _MISSING:
            shown = "(missing)"
        else:
            shown = json.dumps(mask_secrets(self.value), default=str, ensure_ascii=True)
            if len(shown) > _SHOWN_CHARS:
                shown = shown[: _SHOWN_CHARS - 3] + "..."
        return f"{self.key}: got {shown}: {self.reason}"


class SettingsError(Exception):
    """Every problem found in one stack's settings, reported together."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid stack settings ({len(problems)} problem(s)):\n{lines}")


_MISSING = object()
_SHOWN_CHARS = 120
#: Top-level keys that hold credentials; their values are never shown.
SECRET_KEYS = frozenset({"huggingFaceToken"})
_HIDDEN = "(secret, not shown)"


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
    if error["type"] == "finite_number":
        return "must be a finite number (not inf or NaN)"
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


def _field_problem(raw: Mapping[str, Any], error: Mapping[str, Any]) -> Problem:
    loc = tuple(error["loc"]) + tuple((error.get("ctx") or {}).get("path", ()))
    if (SECRET_FIELDS | SECRET_KEYS) & {str(part) for part in loc}:
        shown: Any = _HIDDEN
    else:
        shown = _lookup(raw, loc)
    return Problem(_key_path(loc), shown, _reason(error, loc))


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
    raw = {k[len(prefix) :]: decode_config_value(v) for k, v in config.items() if k.startswith(prefix)}
    problems: list[Problem] = []
    failed: set[str] = set()
    try:
        settings: Settings | None = Settings.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        problems += [_field_problem(raw, e) for e in errors]
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


# --- cross-field rules: each reads the top-level keys it names and reports at the key to edit -----------

Rule = Callable[[Settings], Iterable[Problem]]
_RULES: list[tuple[frozenset[str], Rule]] = []


def _rule(*keys: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        _RULES.append((frozenset(keys), rule))
        return rule

    return register


def _p(key: str, value: Any, reason: str) -> Problem:
    return Problem(f"{NAMESPACE}:{key}", value, reason)


def cross_field_problems(settings: Settings, skip: Iterable[str] = ()) -> list[Problem]:
    """Problems between keys, skipping rules that read a key in ``skip`` (already reported)."""
    skipped = set(skip)
    return [problem for keys, rule in _RULES if not keys & skipped for problem in rule(settings)]


@_rule("production", "endpoint", "karpenter")
def _production_safety(s: Settings) -> Iterable[Problem]:
    if s.production and s.endpoint.open_to_world:
        yield _p("endpoint.publicAccessCidrs", s.endpoint.public_access_cidrs,
                 "contains 0.0.0.0/0 in a production stack; list your own CIDRs or set endpoint.publicAccess to false")
    if s.production and s.karpenter.allow_latest_ami:
        yield _p("karpenter.allowLatestAmi", True, "true in a production stack; pin dated AMI aliases")


def _node_pools(s: Settings) -> list[tuple[str, Any]]:
    """Every GPU pool with the key path of its entry."""
    pools = [(f"gpuPools[{i}]", p) for i, p in enumerate(s.gpu_pools)]
    pools += [(f"karpenter.nodePools[{i}]", p) for i, p in enumerate(s.karpenter.node_pools)]
    pools += [(f"autoMode.gpuNodePools[{i}]", p) for i, p in enumerate(s.auto_mode.gpu_node_pools)]
    return pools


@_rule("gpuPools", "karpenter", "autoMode")
def _pool_names_across_kinds(s: Settings) -> Iterable[Problem]:
    """A pool name is the pool label models and the contract select on: one name, one pool."""
    first: dict[str, str] = {}
    for where, pool in _node_pools(s):
        if pool.name in first and first[pool.name].split("[")[0] != where.split("[")[0]:
            yield _p(f"{where}.name", pool.name,
                     f"pool name {pool.name!r} is repeated: {first[pool.name]}.name has it too; GPU pool names must "
                     "be unique across gpuPools, karpenter.nodePools and autoMode.gpuNodePools (models target "
                     "pools by name)")
        first.setdefault(pool.name, where)


@_rule("gpuPools", "karpenter", "autoMode", "hybridNodes", "gpuSoftware")
def _gpu_capacity_and_software(s: Settings) -> Iterable[Problem]:
    karpenter_pools = s.karpenter.node_pools if s.karpenter.enabled else []
    if not (s.gpu_pools or karpenter_pools or s.auto_mode.gpu_node_pools or s.hybrid_nodes.enabled):
        yield _p("gpuPools", [], "no GPU capacity: define gpuPools, karpenter.nodePools, autoMode.gpuNodePools "
                 "or hybridNodes")
    provider = s.gpu_software.provider
    if provider == contract.DEVICE_PLUGIN and s.hybrid_nodes.enabled:
        yield _p("gpuSoftware.provider", provider, "on-prem GPU nodes (hybridNodes) need the GPU Operator to install "
                 "their driver; allowed here: gpu-operator")
    if provider == contract.DEVICE_PLUGIN and s.auto_mode.gpu_node_pools and not (s.gpu_pools or karpenter_pools):
        yield _p("gpuSoftware.provider", provider, "with only Auto Mode GPU capacity: Auto Mode nodes already run "
                 "a device plugin, a second one would fight it; allowed here: none")


@_rule("hybridNodes", "network")
def _hybrid_networks(s: Settings) -> Iterable[Problem]:
    vpc = ipaddress.ip_network(s.network.vpc_cidr)
    services = service_cidr(s.network.vpc_cidr)
    for field, cidrs in (("remoteNodeNetworks", s.hybrid_nodes.remote_node_networks),
                         ("remotePodNetworks", s.hybrid_nodes.remote_pod_networks)):
        for i, cidr in enumerate(cidrs):
            net = ipaddress.ip_network(cidr)
            if net.overlaps(vpc):
                yield _p(f"hybridNodes.{field}[{i}]", cidr, f"overlaps network.vpcCidr {s.network.vpc_cidr}; "
                         "remote networks must be outside the VPC")
            if net.overlaps(ipaddress.ip_network(services)):
                yield _p(f"hybridNodes.{field}[{i}]", cidr, f"overlaps the cluster's Service range {services}")


def _models(s: Settings) -> Iterable[tuple[str, Any, Any]]:
    for tier in s.serving.tiers:
        for model in tier.models:
            yield f"serving.tiers[{tier.name}].models[{model.name}]", tier, model


@_rule("serving", "gpuPools", "karpenter", "autoMode", "production", "huggingFaceToken")
def _models_fit_their_pools(s: Settings) -> Iterable[Problem]:
    pools = s.gpu_pool_facts()
    for where, _tier, model in _models(s):
        pool = pools.get(model.pool)
        if pool is None:
            yield _p(f"{where}.pool", model.pool, f"not a GPU pool; allowed: {', '.join(sorted(pools)) or 'none'}")
            continue
        if pool.purpose != contract.GPU_INFERENCE_PURPOSE:
            yield _p(f"{where}.pool", model.pool, f"a {pool.purpose} pool; serve from gpu-inference pools")
        if model.gpus_per_replica > pool.max_gpus_per_node:
            yield _p(f"{where}.gpusPerReplica", model.gpus_per_replica,
                     f"{model.pool!r} nodes have at most {pool.max_gpus_per_node} GPUs; tensor parallelism stays "
                     "within one node")
        if s.production and model.replicas.min == 0:
            yield _p(f"{where}.replicas.min", 0, "0 in a production stack; keep at least 1 warm replica")
        if model.source.hugging_face and s.hugging_face_token is None:
            yield _p("huggingFaceToken", _MISSING, f"{where} loads from Hugging Face; set the token with "
                     "`pulumi config set --secret llm-platform:huggingFaceToken`")
    gateway = s.serving.gateway
    if (s.serving.enabled and gateway.enabled and (gateway.bedrock_models or gateway.bedrock_embedding_models)
            and not gateway.bedrock_region):
        yield _p("serving.gateway.bedrockRegion", _MISSING, "required when bedrockModels are listed; an AWS region "
                 "such as us-east-1")


@_rule("serving", "gpuPools", "karpenter", "autoMode", "production")
def _production_interactive(s: Settings) -> Iterable[Problem]:
    """In production the interactive tier keeps 2+ replicas (its PDB then always leaves one
    serving) on capacity that is never reclaimed (on-demand only)."""
    if not (s.production and s.serving.enabled):
        return
    spot_pools = {p.name for p in s.gpu_pools if p.capacity_type == "SPOT"}
    node_pools = (s.karpenter.node_pools if s.karpenter.enabled else []) + s.auto_mode.gpu_node_pools
    spot_pools |= {p.name for p in node_pools if contract.KARPENTER_SPOT in p.capacity_types}
    for where, tier, model in _models(s):
        if tier.name != INTERACTIVE_TIER:
            continue
        if model.replicas.min < MIN_INTERACTIVE_REPLICAS:
            yield _p(f"{where}.replicas.min", model.replicas.min,
                     f"in a production stack the interactive tier keeps at least {MIN_INTERACTIVE_REPLICAS} so one "
                     "node loss or drain never takes the model down")
        if model.pool in spot_pools:
            yield _p(f"{where}.pool", model.pool, "allows Spot capacity; in production the interactive tier runs on "
                     "an on-demand-only pool (a Spot reclaim would take replicas away under load)")


@_rule("observability", "gpuHoursMonthlyBudget", "production", "serving")
def _observability(s: Settings) -> Iterable[Problem]:
    prometheus = s.observability.prometheus
    if s.gpu_hours_monthly_budget is not None and prometheus.retention_days < GPU_HOURS_WINDOW_DAYS:
        yield _p("observability.prometheus.retentionDays", prometheus.retention_days,
                 f"shorter than the {GPU_HOURS_WINDOW_DAYS}-day window of the GPU-hour budget rule; keep at least "
                 f"{GPU_HOURS_WINDOW_DAYS}")
    if s.production and prometheus.replicas < 2:
        yield _p("observability.prometheus.replicas", prometheus.replicas,
                 "in a production stack run 2 so alerts and KEDA's queries survive a Prometheus restart")
    if s.production and s.serving.enabled and not s.observability.alerting.receivers:
        yield _p("observability.alerting.receivers", [], "empty in a production stack: alerts would reach no one; "
                 "add a slack, pagerDuty, sns or webhook receiver")
    tiers = {t.name for t in s.serving.tiers}
    for i, route in enumerate(s.observability.alerting.routes if s.serving.enabled else []):
        unknown = [t for t in route.tiers if t not in tiers]
        if unknown:
            yield _p(f"observability.alerting.routes[{i}].tiers", route.tiers,
                     f"names unknown tier(s) {', '.join(unknown)}; tiers: {', '.join(sorted(tiers)) or 'none'}")


@_rule("gpuBudget", "gpuPools", "karpenter", "autoMode", "systemPool", "gpuSoftware", "serving", "observability",
       "hybridNodes", "environment")
def _within_gpu_budget(s: Settings) -> Iterable[Problem]:
    """The stack's own worst case (the capacity model's, as the pack computes it) within ``gpuBudget``."""
    for key, value, reason in over_budget(s):
        yield _p(key, value, reason)


def secret_warnings(config: Mapping[str, Any], secret_keys: Iterable[str] = ()) -> list[str]:
    """One line per credential stored in plain text (accepted, but it belongs in ``--secret``).

    ``config`` is the stack file's block or the engine's map; ``secret_keys`` are the keys the
    engine decrypted (a key set with ``--secret``, or holding a ``--path --secret`` leaf)."""
    encrypted = set(secret_keys)
    out = []
    for key, value in config.items():
        if not key.startswith(f"{NAMESPACE}:") or key in encrypted:
            continue
        name = key[len(NAMESPACE) + 1 :]
        for path in _plain_secret_paths(name, decode_config_value(value)):
            out.append(f"warning: {NAMESPACE}:{path} is stored in plain text; store it encrypted with "
                       f"`pulumi config set --secret{' --path' if path != name else ''} '{NAMESPACE}:{path}' ...`")
    return out


def is_secret_path(path: Iterable[str | int]) -> bool:
    """Whether a config key path (``huggingFaceToken``, ``observability.alerting...apiUrl``) holds a credential."""
    parts = [str(p) for p in path]
    return bool(parts) and (parts[0] in SECRET_KEYS or (parts[0] == "observability" and bool(SECRET_FIELDS & set(parts))))


def _plain_secret_paths(path: str, value: Any) -> Iterable[str]:
    if _secret(value) is not value:  # {secure: ...}
        return
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    if isinstance(value, str) and (leaf in SECRET_KEYS or (leaf in SECRET_FIELDS and "alerting" in path)):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _plain_secret_paths(f"{path}.{k}", v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _plain_secret_paths(f"{path}[{i}]", v)


def capacity_problems(settings: Settings) -> list[Problem]:
    """The capacity simulation's blocking findings, each named by the setting to edit and its value."""
    from components.capacity_input import problem_key, settings_simulation  # the adapter imports components

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
    """Settings of the running stack, from the config the language host passes to the program.

    Credentials set with ``--secret`` arrive decrypted and are used only inside ``Output.secret``;
    one set in plain text is accepted with a warning naming the key."""
    import pulumi

    config = pulumi.runtime.get_config_env()
    try:
        settings = parse_settings(config)
    except SettingsError as exc:
        raise pulumi.RunError(str(exc)) from None
    for line in secret_warnings(config, pulumi.runtime.get_config_secret_keys_env()):
        pulumi.log.warn(line.removeprefix("warning: "))  # the engine labels it a warning
    return settings
