"""GPU node agents must reach the GPU nodes they serve.

The device plugin, the GPU Operator's operands, the DCGM exporter and NFD workers are DaemonSets
installed by Helm; if their tolerations (often in nested chart values) do not cover a GPU pool's
taints, or their nodeSelector/affinity excludes the pool's labels, they silently run zero pods
there, and GPUs are never advertised or monitored. A release is judged on its rendered
tolerations: the values it sets, else the chart's defaults from ``capacity/charts.py`` (the one
table of what each pinned chart version renders, each row citing its ``values.yaml``; a version
missing there falls back to the chart's pinned row and the message says so). The device plugin
tolerates ``nvidia.com/gpu`` by default but only lands on nodes labelled by NFD/GFD or
``nvidia.com/gpu.present=true``; dcgm-exporter tolerates only the control-plane taint. Two
DaemonSets the capacity table does not render yet keep their defaults here: the device-plugin
chart's NFD subchart (tolerates only ``nvidia.com/gpu=present``) and standalone NFD (nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from capacity.charts import CHART_DAEMONSETS
from lib.helm import chart_name, chart_ref, values
from lib.kit import MANDATORY, Stack, stack_policy
from lib.placement import node_selection, tolerates_all
from lib.pod_templates import pod_template
from lib.pools import Pool, labels_match, stack_pools, untolerated_taints
from lib.resources import DAEMONSET, HELM_TYPES, Resource
from lib.values import UNKNOWN, dig

from checks.gpu_workloads import tolerates_gpu_key

MASTER_EQUAL = {"key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule"}


def _term(key: str, value: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}


#: The device plugin chart's default required node affinity: any one of these labels.
DEVICE_PLUGIN_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                _term("feature.node.kubernetes.io/pci-10de.present", "true"),
                _term("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                _term("nvidia.com/gpu.present", "true"),
            ]
        }
    }
}


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
    """One DaemonSet a chart runs on GPU nodes: where its tolerations live in the values (its
    nodeSelector and affinity sit beside them), and the chart's defaults."""

    title: str
    path: tuple[str, ...]
    #: Default tolerations only for DaemonSets ``capacity/charts.py`` does not render; else ``None``.
    default: list[dict[str, str]] | None
    enabled: Callable[[Any], bool | None]
    device_plugin: bool = False
    default_affinity: dict[str, Any] | None = None
    #: Steered per node type by ``agentPlacement`` (the program's table of which GPU software runs where).
    placed: bool = False

    def where(self, field_name: str) -> str:
        return "values." + ".".join((*self.path[:-1], field_name))


AGENT_COMPONENTS: dict[str, list[Component]] = {
    "nvidia-device-plugin": [
        Component("device plugin", ("tolerations",), None, ALWAYS, device_plugin=True,
                  default_affinity=DEVICE_PLUGIN_AFFINITY, placed=True),
        Component(
            "node-feature-discovery worker", ("nfd", "worker", "tolerations"),
            [MASTER_EQUAL, {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
            _device_plugin_nfd,
        ),
    ],
    "gpu-operator": [
        Component("operands", ("daemonsets", "tolerations"), None, ALWAYS),
        Component(
            "node-feature-discovery worker", ("node-feature-discovery", "worker", "tolerations"),
            None, _flag(("nfd", "enabled"), True),
        ),
    ],
    "dcgm-exporter": [Component("exporter", ("tolerations",), None, ALWAYS)],
    "dra-driver-nvidia-gpu": [Component("kubelet plugin", ("kubeletPlugin", "tolerations"), None, ALWAYS, placed=True)],
    # the same driver's chart up to 25.12 (NVIDIA/k8s-dra-driver-gpu), whose kubelet plugin tolerated nothing
    "nvidia-dra-driver-gpu": [Component("kubelet plugin", ("kubeletPlugin", "tolerations"), None, ALWAYS, placed=True)],
    "node-feature-discovery": [
        Component("worker", ("worker", "tolerations"), [], _flag(("worker", "enable"), True)),
    ],
}


#: Which pools each steered agent serves, by the pool's purpose label, as the program decides it
#: (components/specs/gpu_software.py: the standalone device plugin stays off DRA pools, whose GPUs a DRA
#: driver owns; the DRA driver's kubelet plugin runs on DRA pools only). The stack's config repeats
#: it (a test keeps it equal to the affinities the program emits); a chart not listed serves every GPU pool.
DEFAULT_AGENT_PLACEMENT: dict[str, dict[str, list[str]]] = {
    "nvidia-device-plugin": {"exceptPurposes": ["gpu-dra"]},
    "dra-driver-nvidia-gpu": {"onlyPurposes": ["gpu-dra"]},
    "nvidia-dra-driver-gpu": {"onlyPurposes": ["gpu-dra"]},
}


def pool_purpose(pool: Pool, purpose_label: str) -> str | None:
    """The one value of the purpose label every node of ``pool`` carries, else ``None``."""
    offered = pool.constraint(purpose_label)
    if offered is None or offered.values is None or len(offered.values) != 1:
        return None
    return next(iter(offered.values))


def serves(placement: dict[str, Any], chart: str, pool: Pool, purpose_label: str) -> bool:
    """Whether the steered agent of ``chart`` belongs on ``pool`` by the placement table.

    A pool whose purpose is not known is served (judged as before): only a purpose the table names
    takes a pool out of an agent's reach.
    """
    rule = placement.get(chart) or {}
    purpose = pool_purpose(pool, purpose_label)
    if "onlyPurposes" in rule:
        return purpose is None or purpose in rule["onlyPurposes"]
    return purpose not in (rule.get("exceptPurposes") or [])


def chart_default_tolerations(chart: str, version: Any, component: Component) -> tuple[list[dict[str, Any]], str] | None:
    """The component's default tolerations from the charts table, and which chart version they are from.

    ``None`` when the table has no row for the chart (the component's own default, if any, applies).
    """
    path = ".".join(component.path)
    pinned = [v for c, v in CHART_DAEMONSETS if c == chart]
    if not pinned:
        return None
    exact = str(version) in pinned
    row_version = str(version) if exact else pinned[-1]
    for row in CHART_DAEMONSETS[(chart, row_version)]:
        if row.tolerations_path == path:
            where = f"{chart} {row_version} default" if exact else (
                f"{chart} {row_version} default; {version or 'this version'} is not in the charts table")
            return list(row.tolerations), where
    return None


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
    pools = stack_pools(stack)
    all_gpu_pools = [p for p in pools if p.is_gpu]
    undecided = any(p.is_gpu is None for p in pools)
    placement = config["agentPlacement"]
    for release, name, vals in releases:
        if vals is UNKNOWN:
            continue
        for component in AGENT_COMPONENTS[name]:
            if component.enabled(vals) is not True:
                continue
            gpu_pools = all_gpu_pools
            if component.placed:
                gpu_pools = [p for p in all_gpu_pools if serves(placement, name, p, config["purposeLabel"])]
                if all_gpu_pools and not gpu_pools:
                    continue
            yield from _tolerations(release, name, vals, component, key, gpu_pools, undecided)
            yield from _node_selection(release, name, vals, component, gpu_pools, releases)
    yield from _daemonsets(stack, all_gpu_pools)


def _daemonsets(stack: Stack, gpu_pools: list[Pool]) -> Iterator[tuple[str, str | None]]:
    """DaemonSets that select GPU nodes must tolerate those pools' taints.

    This is how agents look in a real preview of a helm.sh/v4 Chart (rendered children, while the
    Chart component itself shows only outputs) and how hand-written agents look. A DaemonSet with
    no node selection is meant for every node and may well skip tainted ones, so it is not judged.
    """
    for resource in stack.of_type(DAEMONSET):
        template = pod_template(resource)
        if template is None or not isinstance(template.spec, dict):
            continue
        alternatives = node_selection(template.spec)
        if alternatives is None or not any(a.constraints for a in alternatives):
            continue
        for pool in gpu_pools:
            if labels_match(pool, alternatives)[0] is not True:
                continue
            missing = untolerated_taints(pool, template.tolerations)
            if missing:
                yield (
                    f"{resource.label} selects the nodes of {pool.label} but does not tolerate its taint "
                    f"{', '.join(map(str, missing))}, so it runs no pods there. Add a toleration for it.",
                    resource.urn,
                )


def _tolerations(
    release: Resource, name: str, vals: Any, component: Component, key: str, gpu_pools: list[Pool], undecided: bool
) -> Iterator[tuple[str, str | None]]:
    given = dig(vals, *component.path)
    if given is UNKNOWN:
        return
    where = f"values.{'.'.join(component.path)}"
    if given is None:
        ref_version = chart_ref(release).version
        if ref_version is UNKNOWN:
            return
        found = chart_default_tolerations(name, ref_version, component)
        if found is not None:
            tolerations, origin = found
        elif component.default is not None:
            tolerations, origin = component.default, "chart default"
        else:
            return
        where += f" ({origin})"
    else:
        tolerations = given
    subject = f"{release.label} (chart {name}): the {component.title}"
    fix = f"Add {{key: {key}, operator: Exists, effect: NoSchedule}} to values.{'.'.join(component.path)}"
    if not gpu_pools:
        if undecided:
            return
        verdicts = [tolerates_gpu_key(t, key) for t in tolerations if isinstance(t, dict)]
        if not any(verdicts) and None not in verdicts:
            yield (
                f"{subject} does not tolerate the GPU taint '{key}' ({where}: {_show(tolerations)}), so it will not "
                f"run on GPU nodes. {fix}.",
                release.urn,
            )
        return
    for pool in gpu_pools:
        if component.device_plugin and pool.bottlerocket:
            continue
        for taint in pool.hard_taints or []:
            if tolerates_all(tolerations, taint) is False:
                yield (
                    f"{subject} does not tolerate taint {taint} of {pool.label} ({where}: {_show(tolerations)}), so "
                    f"it runs no pods on that pool. {fix}"
                    f"{' (an Equal toleration must carry the taint value exactly)' if taint.key == key else ''}.",
                    release.urn,
                )


def _node_selection(
    release: Resource,
    name: str,
    vals: Any,
    component: Component,
    gpu_pools: list[Pool],
    releases: list[tuple[Resource, str, Any]],
) -> Iterator[tuple[str, str | None]]:
    """The component's nodeSelector/affinity (or the chart's default affinity) must admit every GPU pool.

    GFD and NFD put the labels the device plugin's default affinity asks for on GPU nodes, so that
    default is judged only when neither runs.
    """
    parent = component.path[:-1]
    selector, affinity = dig(vals, *parent, "nodeSelector"), dig(vals, *parent, "affinity")
    where = f"{component.where('nodeSelector')}/{component.where('affinity').rsplit('.', 1)[-1]}"
    default = selector is None and affinity is None
    if default:
        if component.default_affinity is None:
            return
        labelled = (_flag(("gfd", "enabled"), False)(vals), _device_plugin_nfd(vals))
        if any(v is not False for v in labelled) or _nfd_in_stack(releases):
            return
        affinity, where = component.default_affinity, "the chart's default node affinity"
    alternatives = node_selection({"nodeSelector": selector or {}, "affinity": affinity})
    if alternatives is None:
        return
    hint = ('Label the pool nvidia.com/gpu.present: "true" or enable gfd' if default
            else "Widen the selector or fix the pool's labels")
    for pool in gpu_pools:
        if component.device_plugin and pool.bottlerocket:
            continue
        matches, why = labels_match(pool, alternatives)
        if matches is False:
            wanted = " or ".join(a.describe() for a in alternatives)
            yield (
                f"{release.label} (chart {name}): the {component.title} runs no pods on {pool.label}: {where} "
                f"requires {wanted} and {why}. {hint}.",
                release.urn,
            )


POLICIES = [
    stack_policy(
        name="gpu-agents-reach-gpu-nodes",
        description=(
            "Make the device plugin, GPU Operator, DCGM exporter, NFD worker and DRA driver kubelet plugin tolerate "
            "the taints and select the labels of every GPU pool they serve (the device plugin every pool but DRA "
            "ones, the DRA kubelet plugin DRA pools only, per agentPlacement) by adding the taint to the agent's "
            "values tolerations and widening its nodeSelector/affinity (nested chart values and chart defaults included)."
        ),
        check=_check,
        enforcement=MANDATORY,
        contract=("gpuTaintKey", "purposeLabel"),
        params={
            "agentCharts": {
                "type": "array",
                "items": {"type": "string", "enum": sorted(AGENT_COMPONENTS)},
                "default": sorted(AGENT_COMPONENTS),
                "description": "Charts whose DaemonSets must run on every GPU pool.",
            },
            "agentPlacement": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "onlyPurposes": {"type": "array", "items": {"type": "string", "minLength": 1}},
                        "exceptPurposes": {"type": "array", "items": {"type": "string", "minLength": 1}},
                    },
                    "additionalProperties": False,
                },
                "default": DEFAULT_AGENT_PLACEMENT,
                "description": (
                    "Which pools (by purpose label) the device plugin and the DRA kubelet plugin serve, as the "
                    "program places them: chart -> {onlyPurposes} or {exceptPurposes}; other charts serve every GPU pool."
                ),
            },
        },
    ),
]
