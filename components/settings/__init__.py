"""Stack settings: every ``llm-platform:*`` config key, parsed once into typed, validated values.

Parsing is strict: an unknown key is an error, and every problem in a stack file is reported at once
with the config key path, the value given and what is allowed. Nothing is registered with the engine
until settings have passed, so bad input never leaves a half-built platform.

One module per concern, validation next to each field: ``managed_pools`` (system and GPU node
groups), ``karpenter`` (EC2NodeClasses, NodePools, Auto Mode), ``cluster`` (network, endpoint,
hybrid nodes, GPU software), ``serving`` (tiers, models, gateway), ``observability``, ``gpu_budget``
(the stack's GPU cap and monthly budget), ``stack`` (the whole stack and the parser), ``rules`` (rules
between keys, each reported at the key to edit) and ``problems`` (how a problem is shown: key, shortened
value, secrets never).
"""

from components.settings._base import NAMESPACE
from components.settings.cluster import Endpoint, GpuSoftware, HybridNodes, Network
from components.settings.gpu_budget import GpuBudget, pack_config_disagreements
from components.settings.karpenter import (
    CONSOLIDATION_POLICIES,
    EVICTION_SIGNALS,
    AutoMode,
    Consolidation,
    DisruptionBudget,
    Karpenter,
    KarpenterNodeClass,
    KarpenterNodePool,
    Kubelet,
    RootVolume,
)
from components.settings.managed_pools import GpuPool, Scaling, SystemPool
from components.settings.observability import Alerting, Observability, Receiver
from components.settings.problems import (
    Problem,
    SettingsError,
    decode_config_value,
    is_secret_path,
    secret_warnings,
)
from components.settings.root import CONTROL_PLANE_LOG_TYPES, PoolFacts, Settings, support_date
from components.settings.serving import (
    Gateway,
    ModelSource,
    Replicas,
    ServedModel,
    Serving,
    ServingTier,
    TierQuota,
    TierScaling,
)
from components.settings.stack import (
    SettingsRead,
    config_strings,
    kubernetes_warnings,
    read_settings,
    settings_warnings,
)

__all__ = [
    "GpuBudget",
    "pack_config_disagreements",
    "Alerting",
    "Observability",
    "Receiver",
    "CONSOLIDATION_POLICIES",
    "CONTROL_PLANE_LOG_TYPES",
    "EVICTION_SIGNALS",
    "NAMESPACE",
    "AutoMode",
    "Consolidation",
    "DisruptionBudget",
    "Endpoint",
    "Gateway",
    "GpuPool",
    "GpuSoftware",
    "HybridNodes",
    "Karpenter",
    "KarpenterNodeClass",
    "KarpenterNodePool",
    "Kubelet",
    "ModelSource",
    "Network",
    "PoolFacts",
    "Problem",
    "Replicas",
    "RootVolume",
    "Scaling",
    "ServedModel",
    "Serving",
    "ServingTier",
    "Settings",
    "SettingsError",
    "SystemPool",
    "TierQuota",
    "TierScaling",
    "config_strings",
    "decode_config_value",
    "is_secret_path",
    "read_settings",
    "SettingsRead",
    "secret_warnings",
    "kubernetes_warnings",
    "settings_warnings",
    "support_date",
]
