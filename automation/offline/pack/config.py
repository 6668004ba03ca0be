"""``policies/config/<stack>.json``, generated: the program's facts plus each stack's hand-chosen choices.

The pack may not import program code (PLATFORM.md), so a policy that needs a fact of the program
(the GPU taint key, the pool label names, where each GPU agent runs, the metric prefixes a model
server emits) takes it as a config property. Those values are written here from their one source
(``components.contract``, the program's GPU software affinities, ``components.versions``,
``policies.capacity``) into every policy whose schema declares the property, as the pack itself
reports it (``GetAnalyzerInfo``). What people decide per stack (enforcement levels, digests required,
exempt images, public endpoint, system pool size) is :data:`STACK_CHOICES`, the only hand-written
part. ``python -m automation pack-config write`` writes the files; a test keeps the committed ones
equal to what it writes, and the offline check refuses a config whose program facts disagree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from automation.paths import ROOT
from components import contract, versions
from components.specs.serving import TIER_NAMESPACE_PREFIX
from policies.capacity.engine import SELF_METRIC_PREFIXES

CONFIG_DIR = ROOT / "policies" / "config"
#: The command that regenerates the files, named in every refusal.
WRITE_COMMAND = "python -m automation pack-config write"
ENFORCEMENT = "enforcementLevel"


def _tag_only(image: versions.Image) -> str:
    """An image as ``container-image-pinned`` matches an exemption: ``repo:tag``."""
    return f"{image.repository}:{image.tag}"


#: Per stack, what people chose: ``all`` and per-policy enforcement levels and the parameters that
#: are decisions, not facts. Prod is stricter: every policy mandatory but the two that are advice by
#: design, digests required (the images whose digest is not verified yet are named exceptions), a
#: private API endpoint, a system pool of three nodes.
STACK_CHOICES: dict[str, dict[str, Any]] = {
    "dev": {
        "all": "mandatory",
        "capacity-overcommit": {ENFORCEMENT: "advisory"},
        "cold-start-budget": {ENFORCEMENT: "advisory"},
        "container-image-pinned": {"requireDigest": False},
        "eks-private-endpoint": {ENFORCEMENT: "advisory", "allowPublicAccess": True},
        "gpu-namespace-quota": {ENFORCEMENT: "advisory"},
        "karpenter-ami-alias-pinned": {ENFORCEMENT: "advisory"},
        "no-end-of-life-ami": {ENFORCEMENT: "mandatory"},
        "system-pool-on-demand-ha": {"minSize": 2},
        "workload-kinds-known": {ENFORCEMENT: "advisory"},
    },
    "prod": {
        "all": "mandatory",
        "capacity-overcommit": {ENFORCEMENT: "advisory"},
        "cold-start-budget": {ENFORCEMENT: "mandatory"},
        "container-image-pinned": {
            "requireDigest": True,
            # Tag-only pins whose digests could not be verified here (no registry reachable; docs/images.md):
            # `python -m automation images resolve` on a connected machine adds them, and each then leaves this list.
            "digestExemptImages": [_tag_only(image) for image in (
                versions.VLLM_IMAGE, versions.LITELLM_IMAGE, versions.DCGM_EXPORTER_IMAGE,
                # the GPU Operator's operands and NFD, as the ClusterPolicy names them
                versions.GPU_OPERATOR_IMAGE, versions.GPU_OPERATOR_DRIVER_IMAGE, versions.GPU_OPERATOR_DRIVER_MANAGER_IMAGE,
                versions.GPU_OPERATOR_TOOLKIT_IMAGE, versions.GPU_OPERATOR_DCGM_IMAGE, versions.GPU_OPERATOR_MIG_MANAGER_IMAGE,
                versions.GPU_OPERATOR_GDS_IMAGE, versions.GPU_OPERATOR_GDRCOPY_IMAGE,
                versions.GPU_OPERATOR_VGPU_DEVICE_MANAGER_IMAGE, versions.GPU_OPERATOR_SANDBOX_DEVICE_PLUGIN_IMAGE,
                versions.GPU_OPERATOR_KATA_SANDBOX_DEVICE_PLUGIN_IMAGE, versions.GPU_OPERATOR_CC_MANAGER_IMAGE,
                versions.NODE_FEATURE_DISCOVERY_IMAGE,
                # kube-prometheus-stack's images without a public digest
                versions.PROMETHEUS_OPERATOR_IMAGE, versions.PROMETHEUS_CONFIG_RELOADER_IMAGE,
                versions.KUBE_WEBHOOK_CERTGEN_IMAGE, versions.NODE_EXPORTER_IMAGE, versions.GRAFANA_SIDECAR_IMAGE,
                versions.THANOS_IMAGE,
                # KEDA's three, set under the chart's image.<component> maps
                versions.KEDA_OPERATOR_IMAGE, versions.KEDA_METRICS_APISERVER_IMAGE, versions.KEDA_ADMISSION_WEBHOOKS_IMAGE,
                versions.KARPENTER_CONTROLLER_IMAGE,
                # the LeaderWorkerSet controller, set under the chart's image.manager; the EFA device plugin
                versions.LWS_IMAGE, versions.AWS_EFA_DEVICE_PLUGIN_IMAGE)],
        },
        "eks-private-endpoint": {ENFORCEMENT: "mandatory", "allowPublicAccess": False},
        "gpu-namespace-quota": {ENFORCEMENT: "mandatory"},
        "karpenter-ami-alias-pinned": {ENFORCEMENT: "mandatory"},
        "no-end-of-life-ami": {ENFORCEMENT: "mandatory"},
        "system-pool-on-demand-ha": {"minSize": 3},
        "workload-kinds-known": {ENFORCEMENT: "advisory"},
    },
}


class UnknownPackStack(KeyError):
    """A stack with no entry in :data:`STACK_CHOICES`."""


def _agent_placement() -> dict[str, dict[str, list[str]]]:
    """Which pools the steered GPU agents serve, read from the affinities the program gives them: the
    device plugin's required ``NotIn`` on the purpose label, the DRA kubelet plugin's node selector."""
    from components.specs.gpu_software import device_plugin_affinity, dra_driver_values

    # Plain JSON-shaped values (the specs type them as objects): read as such.
    affinity: Any = device_plugin_affinity()
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    excluded = [value for term in terms["nodeSelectorTerms"] for e in term["matchExpressions"]
                if e["key"] == contract.PURPOSE_LABEL and e["operator"] == "NotIn" for value in e["values"]]
    dra: Any = dra_driver_values()
    selector = dra["kubeletPlugin"]["nodeSelector"]
    return {
        versions.NVIDIA_DEVICE_PLUGIN.chart: {"exceptPurposes": excluded},
        versions.NVIDIA_DRA_DRIVER.chart: {"onlyPurposes": [selector[contract.PURPOSE_LABEL]]},
    }


@lru_cache(maxsize=1)
def program_facts() -> dict[str, Any]:
    """Config property -> the program's value, for every property a policy takes from the program."""
    return {
        **contract.policy_contract(),
        "agentPlacement": _agent_placement(),
        "selfMetricPrefixes": list(SELF_METRIC_PREFIXES),
        "tierNamespacePrefix": TIER_NAMESPACE_PREFIX,
    }


def stacks() -> tuple[str, ...]:
    return tuple(sorted(STACK_CHOICES))


def generate(stack: str, schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The config of ``stack``: for each policy (``schemas``: name -> its config schema properties, as
    the pack reports them), the stack's choices and every program fact its schema declares."""
    if stack not in STACK_CHOICES:
        raise UnknownPackStack(f"no pack choices for stack {stack!r}; stacks with choices: {', '.join(stacks())} "
                               f"(automation/offline/pack/config.py STACK_CHOICES)")
    choices = STACK_CHOICES[stack]
    unknown = sorted(set(choices) - set(schemas) - {"all"})
    if unknown:
        raise UnknownPackStack(f"STACK_CHOICES[{stack!r}] names {', '.join(unknown)}, which the pack does not have")
    facts = program_facts()
    config: dict[str, Any] = {"all": choices["all"]} if "all" in choices else {}
    for policy in sorted(schemas):
        entry = dict(choices.get(policy, {}))
        entry.update({key: facts[key] for key in schemas[policy] if key in facts})
        if entry:
            config[policy] = {key: entry[key] for key in sorted(entry, key=lambda k: (k != ENFORCEMENT, k))}
    return config


def render(config: Mapping[str, Any]) -> str:
    return json.dumps(config, indent=2) + "\n"


def config_path(stack: str, directory: Path = CONFIG_DIR) -> Path:
    return directory / f"{stack}.json"


def fact_disagreements(config: Mapping[str, Any]) -> list[str]:
    """One line per program fact a policy config sets to another value than the program's (a hand
    edit, or a contract change the config was not regenerated after). Values of the wrong type are
    the pack's schema's to name; properties the config leaves out take the pack's defaults."""
    facts = program_facts()
    lines = []
    for policy, entry in config.items():
        if not isinstance(entry, Mapping):
            continue
        for key, value in entry.items():
            if key in facts and value != facts[key]:
                lines.append(f"{policy}.{key} is {json.dumps(value)} but the program's is {json.dumps(facts[key])}")
    return lines
