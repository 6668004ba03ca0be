"""GPU node agents must reach the GPU nodes they serve.

The device plugin, the GPU Operator's operands, the DCGM exporter and NFD workers are DaemonSets
installed by Helm; if their tolerations (often in nested chart values) do not cover a GPU pool's
taints they silently run zero pods there, and GPUs are never advertised or monitored. Chart
defaults are modelled where they matter: the device plugin tolerates ``nvidia.com/gpu`` by default,
while NFD in the device-plugin chart tolerates only ``nvidia.com/gpu=present`` and dcgm-exporter
tolerates nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpu_workloads import tolerates_gpu_key
from helm import chart_name, values
from kit import MANDATORY, Stack, stack_policy
from pools import Pool, stack_pools
from shapes import HELM_TYPES, UNKNOWN, Constraint, Resource, dig, tolerates_all

GPU_EXISTS = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
MASTER_EQUAL = {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"}
CONTROL_PLANE_EQUAL = {**MASTER_EQUAL, "key": "node-role.kubernetes.io/control-plane"}


def _flag(path: tuple[str, ...], default: bool) -> Callable[[Any], bool | None]:
    def enabled(vals: Any) -> bool | None:
        value = dig(vals, *path)
        if value is UNKNOWN:
            return None
        return default if value is None else value is True
    return enabled


def _device_plugin_nfd(vals: Any) -> bool | None:
    """The chart's NFD subchart is on when ``nfd.enabled`` is set true, else when ``gfd.enabled`` is."""
    explicit = dig(vals, "nfd", "enabled")
    if explicit is UNKNOWN:
        return None
    return _flag(("gfd", "enabled"), False)(vals) if explicit is None else explicit is True


def ALWAYS(_values: Any) -> bool:  # noqa: N802 - reads as a constant in the table below
    return True


@dataclass(frozen=True)
class Component:
    """One DaemonSet a chart runs on GPU nodes, where its tolerations live and their default."""

    title: str
    path: tuple[str, ...]
    default: list[dict[str, str]]
    enabled: Callable[[Any], bool | None]
    device_plugin: bool = False


AGENT_COMPONENTS: dict[str, list[Component]] = {
    "nvidia-device-plugin": [
        Component(
            "device plugin", ("tolerations",), [{"key": "CriticalAddonsOnly", "operator": "Exists"}, GPU_EXISTS],
            ALWAYS, device_plugin=True,
        ),
        Component(
            "node-feature-discovery worker", ("nfd", "worker", "tolerations"),
            [MASTER_EQUAL, {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
            _device_plugin_nfd,
        ),
    ],
    "gpu-operator": [
        Component("operands", ("daemonsets", "tolerations"), [GPU_EXISTS], ALWAYS),
        Component(
            "node-feature-discovery worker", ("node-feature-discovery", "worker", "tolerations"),
            [MASTER_EQUAL, CONTROL_PLANE_EQUAL, GPU_EXISTS], _flag(("nfd", "enabled"), True),
        ),
    ],
    "dcgm-exporter": [Component("exporter", ("tolerations",), [], ALWAYS)],
    "node-feature-discovery": [
        Component("worker", ("worker", "tolerations"), [], _flag(("worker", "enable"), True)),
    ],
}

#: The device plugin's default required node affinity: any one of these labels.
DEVICE_PLUGIN_NODE_LABELS = {
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA",
    "nvidia.com/gpu.present": "true",
}


def _show(tolerations: Any) -> str:
    if not tolerations:
        return "none"
    parts = []
    for t in tolerations:
        if not isinstance(t, dict):
            continue
        op = t.get("operator") or "Equal"
        value = f"={t.get('value')}" if op == "Equal" and t.get("value") is not None else ""
        parts.append(f"{t.get('key') or '*'} {op}{value}{':' + t['effect'] if t.get('effect') else ''}")
    return "[" + ", ".join(parts) + "]"


def _always_has(pool: Pool, key: str, value: str) -> bool | None:
    offered = pool.constraint(key)
    if offered is None:
        return None
    return offered.values is not None and offered.candidates() == {value} and (offered & Constraint.fixed(value)).satisfiable()


def _nfd_in_stack(releases: list[tuple[Resource, str, Any]]) -> bool:
    for _, name, vals in releases:
        if name == "node-feature-discovery":
            return True
        if name == "gpu-operator" and _flag(("nfd", "enabled"), True)(vals) is not False:
            return True
    return False


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    key = config["gpuTaintKey"]
    wanted = set(config["agentCharts"]) & set(AGENT_COMPONENTS)
    releases = [(r, chart_name(r), values(r)) for r in stack.of_type(HELM_TYPES)]
    releases = [(r, name, vals) for r, name, vals in releases if name in wanted]
    gpu_pools = [p for p in stack_pools(stack) if p.is_gpu]
    for release, name, vals in releases:
        if vals is UNKNOWN:
            continue
        for component in AGENT_COMPONENTS[name]:
            if component.enabled(vals) is not True:
                continue
            given = dig(vals, *component.path)
            if given is UNKNOWN:
                continue
            tolerations = component.default if given is None else given
            where = f"values.{'.'.join(component.path)}" + (" (chart default)" if given is None else "")
            subject = f"{release.label} (chart {name}): the {component.title}"
            fix = f"Add {{key: {key}, operator: Exists, effect: NoSchedule}} to values.{'.'.join(component.path)}"
            if not gpu_pools:
                verdicts = [tolerates_gpu_key(t, key) for t in tolerations if isinstance(t, dict)]
                if not any(verdicts) and None not in verdicts:
                    yield (
                        f"{subject} does not tolerate the GPU taint '{key}' ({where}: {_show(tolerations)}), so "
                        f"it will not run on GPU nodes. {fix}.",
                        release.urn,
                    )
                continue
            for pool in gpu_pools:
                if component.device_plugin and pool.bottlerocket:
                    continue
                for taint in pool.hard_taints or []:
                    if tolerates_all(tolerations, taint) is False:
                        yield (
                            f"{subject} does not tolerate taint {taint} of {pool.label} ({where}: "
                            f"{_show(tolerations)}), so it runs no pods on that pool. {fix}"
                            f"{' (an Equal toleration must carry the taint value exactly)' if taint.key == key else ''}.",
                            release.urn,
                        )
        if name == "nvidia-device-plugin":
            yield from _device_plugin_affinity(release, vals, gpu_pools, releases)


def _device_plugin_affinity(
    release: Resource, vals: Any, gpu_pools: list[Pool], releases: list[tuple[Resource, str, Any]]
) -> Iterator[tuple[str, str | None]]:
    """Without GFD/NFD labels the chart's default affinity needs ``nvidia.com/gpu.present=true``."""
    if dig(vals, "affinity") is not None or _flag(("gfd", "enabled"), False)(vals) is not False:
        return
    if _device_plugin_nfd(vals) is not False or _nfd_in_stack(releases):
        return
    for pool in gpu_pools:
        if pool.bottlerocket:
            continue
        verdicts = [_always_has(pool, k, v) for k, v in DEVICE_PLUGIN_NODE_LABELS.items()]
        if any(verdicts) or None in verdicts:
            continue
        yield (
            f"{release.label} (chart nvidia-device-plugin) will run no pods on {pool.label}: the chart's default "
            f"node affinity only matches nodes labelled nvidia.com/gpu.present=true (or NFD's pci-10de / "
            f"vendor labels) and the pool has none. Label the pool nvidia.com/gpu.present: \"true\" or enable "
            f"gfd in the release values.",
            release.urn,
        )


POLICIES = [
    stack_policy(
        name="gpu-agents-reach-gpu-nodes",
        description=(
            "Make the device plugin, GPU Operator, DCGM exporter and NFD worker tolerate every GPU pool's taints "
            "(nested chart values included) and match the GPU nodes' labels."
        ),
        check=_check,
        enforcement=MANDATORY,
        contract=("gpuTaintKey",),
        params={
            "agentCharts": {
                "type": "array",
                "items": {"type": "string", "enum": sorted(AGENT_COMPONENTS)},
                "default": sorted(AGENT_COMPONENTS),
                "description": "Charts whose DaemonSets must run on every GPU pool.",
            }
        },
    ),
]
