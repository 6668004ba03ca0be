"""The DaemonSets that Helm releases and EKS add-ons put on every node, without rendering charts.

A published pack cannot run Helm, so this table says, per pinned chart version, which DaemonSets
the chart renders, their default requests, tolerations and node selection, and which values
override each. Every figure was read from the chart's own ``values.yaml`` at that version (the
``source`` of each entry); a chart or version missing here contributes nothing, so add a row when
a pin moves. Requests of ``{}`` count as zero but every agent still takes a pod slot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .instances import Resources
from .model import DaemonSet, Selection, resources_of

_GPU_LABEL_TERMS = [
    {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}]},
    {"matchExpressions": [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In", "values": ["NVIDIA"]}]},
    {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]},
]
_GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
_EVERYTHING = [{"operator": "Exists"}]
#: EKS add-on agents stay off nodes whose networking EKS runs itself.
_NOT_ON = lambda *types: [{"matchExpressions": [  # noqa: E731
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
    {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": list(types)},
]}]


@dataclass(frozen=True)
class ChartDaemonSet:
    """One DaemonSet a chart renders and the value paths that change it."""

    name: str
    requests: dict[str, str]
    tolerations: list[dict[str, Any]]
    source: str
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: list[dict[str, Any]] = field(default_factory=list)
    #: Value paths (dotted) that override each part; ``None`` = not overridable by values.
    enabled: tuple[str, bool] | None = None
    requests_path: str | None = "resources"
    tolerations_path: str | None = "tolerations"
    node_selector_path: str | None = "nodeSelector"
    affinity_path: str | None = "affinity"
    deploy_label: str | None = None
    #: Where the name comes from values: (value path, suffix); ``name`` when that value is unset.
    name_path: tuple[str, str] | None = None


def _operand(name: str, key: str, deploy: str, enabled_default: bool = True) -> ChartDaemonSet:
    """A GPU Operator operand: resources under ``<key>.resources`` ({} by default), tolerations from
    ``daemonsets.tolerations``, scheduled on ``nvidia.com/gpu.present=true`` nodes and switched off per
    node by ``nvidia.com/gpu.deploy.<operand>=false``."""
    return ChartDaemonSet(
        name=name, requests={}, tolerations=[_GPU_TOLERATION],
        source=f"NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/values.yaml: {key}.resources {{}}, "
               f"daemonsets.tolerations nvidia.com/gpu Exists NoSchedule, {key}.enabled {str(enabled_default).lower()}",
        node_selector={"nvidia.com/gpu.present": "true"}, enabled=(f"{key}.enabled", enabled_default),
        requests_path=f"{key}.resources", tolerations_path="daemonsets.tolerations", node_selector_path=None,
        affinity_path=None, deploy_label=f"nvidia.com/gpu.deploy.{deploy}",
    )


#: (chart, version) -> DaemonSets it renders.
CHART_DAEMONSETS: dict[tuple[str, str], list[ChartDaemonSet]] = {
    ("nvidia-device-plugin", "0.20.0"): [
        ChartDaemonSet(
            name="nvidia-device-plugin", requests={},
            tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}, _GPU_TOLERATION],
            affinity_terms=_GPU_LABEL_TERMS,
            source="NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/values.yaml: resources {}, "
                   "tolerations CriticalAddonsOnly + nvidia.com/gpu Exists NoSchedule, required affinity on NFD PCI/CPU "
                   "labels or nvidia.com/gpu.present=true",
        ),
        ChartDaemonSet(
            name="gpu-feature-discovery", requests={},
            tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}, _GPU_TOLERATION],
            affinity_terms=_GPU_LABEL_TERMS, enabled=("gfd.enabled", False), requests_path="gfd.resources",
            source="NVIDIA/k8s-device-plugin v0.20.0 values.yaml: gfd.enabled false (subchart renders GFD when on)",
        ),
    ],
    ("dcgm-exporter", "4.8.2"): [
        ChartDaemonSet(
            name="dcgm-exporter", requests={"cpu": "100m", "memory": "128Mi"},
            tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
            source="NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/values.yaml (chart 4.8.2): resources.requests cpu 100m "
                   "memory 128Mi, tolerations control-plane only, nodeSelector {}, affinity {}",
        ),
    ],
    ("gpu-operator", "v26.7.0"): [
        _operand("nvidia-driver-daemonset", "driver", "driver"),
        _operand("nvidia-container-toolkit-daemonset", "toolkit", "container-toolkit"),
        _operand("nvidia-device-plugin-daemonset", "devicePlugin", "device-plugin"),
        _operand("gpu-feature-discovery", "gfd", "gpu-feature-discovery"),
        _operand("nvidia-dcgm-exporter", "dcgmExporter", "dcgm-exporter"),
        _operand("nvidia-operator-validator", "validator", "operator-validator"),
        _operand("nvidia-mig-manager", "migManager", "mig-manager"),
        ChartDaemonSet(
            name="node-feature-discovery-worker", requests={"cpu": "5m", "memory": "64Mi"},
            tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
                         _GPU_TOLERATION],
            enabled=("nfd.enabled", True), requests_path="node-feature-discovery.worker.resources",
            tolerations_path="node-feature-discovery.worker.tolerations",
            node_selector_path="node-feature-discovery.worker.nodeSelector", affinity_path=None,
            source="kubernetes-sigs/node-feature-discovery v0.19.0 (gpu-operator v26.7.0 dependency) "
                   "deployment/helm/node-feature-discovery/values.yaml: worker.resources.requests cpu 5m memory 64Mi; "
                   "tolerations from NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/values.yaml "
                   "node-feature-discovery.worker.tolerations: control-plane Equal \"\" NoSchedule, nvidia.com/gpu Exists "
                   "NoSchedule (the parent chart's values override the subchart's)",
        ),
    ],
    ("kube-prometheus-stack", "88.5.3"): [
        ChartDaemonSet(
            name="prometheus-node-exporter", requests={},
            tolerations=[{"effect": "NoSchedule", "operator": "Exists"}],
            enabled=("nodeExporter.enabled", True), requests_path="prometheus-node-exporter.resources",
            tolerations_path="prometheus-node-exporter.tolerations",
            node_selector_path="prometheus-node-exporter.nodeSelector", affinity_path=None,
            source="prometheus-community/helm-charts prometheus-node-exporter 4.56.1 (kube-prometheus-stack 88.5.3 "
                   "dependency) values.yaml: resources {}, tolerations NoSchedule Exists",
        ),
    ],
    ("dra-driver-nvidia-gpu", "0.4.1"): [
        ChartDaemonSet(
            name="dra-driver-nvidia-gpu-kubelet-plugin", requests={},
            tolerations=[_GPU_TOLERATION], affinity_terms=[
                _GPU_LABEL_TERMS[0],
                {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-0302_10de.present", "operator": "In",
                                       "values": ["true"]}]},
                {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-0300_10de.present", "operator": "In",
                                       "values": ["true"]}]},
                *_GPU_LABEL_TERMS[1:],
            ],
            requests_path="kubeletPlugin.containers.gpus.resources", tolerations_path="kubeletPlugin.tolerations",
            node_selector_path="kubeletPlugin.nodeSelector", affinity_path="kubeletPlugin.affinity",
            name_path=("nameOverride", "-kubelet-plugin"),
            source="kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 deployments/helm/dra-driver-nvidia-gpu: "
                   "templates/kubeletplugin.yaml names it <nameOverride or chart>-kubelet-plugin; values.yaml "
                   "kubeletPlugin.containers.*.resources {}, kubeletPlugin.tolerations nvidia.com/gpu Exists "
                   "NoSchedule, required affinity on NFD PCI (10de, 0302_10de, 0300_10de)/CPU labels or "
                   "nvidia.com/gpu.present=true",
        ),
    ],
    ("cilium", "1.18.12"): [
        ChartDaemonSet(
            name="cilium", requests={}, tolerations=_EVERYTHING,
            source="cilium/cilium v1.18.12 install/kubernetes/cilium/values.yaml: resources {}, tolerations "
                   "[operator Exists], affinity: pod anti-affinity only (any node unless values give node affinity; "
                   "the EKS Hybrid Nodes guide sets compute-type In hybrid)",
        ),
    ],
    ("nvidia-dra-driver-gpu", "25.12.0"): [
        ChartDaemonSet(
            name="nvidia-dra-driver-gpu-kubelet-plugin", requests={},
            tolerations=[], affinity_terms=_GPU_LABEL_TERMS,
            requests_path="kubeletPlugin.containers.gpus.resources", tolerations_path="kubeletPlugin.tolerations",
            node_selector_path="kubeletPlugin.nodeSelector", affinity_path="kubeletPlugin.affinity",
            source="NVIDIA/k8s-dra-driver-gpu v25.12.0 deployments/helm/nvidia-dra-driver-gpu/values.yaml: "
                   "kubeletPlugin.containers.*.resources {}, kubeletPlugin.tolerations [] (set them for tainted GPU "
                   "pools), required affinity on NFD PCI/CPU labels or nvidia.com/gpu.present=true",
        ),
    ],
}

#: DaemonSets every EKS cluster runs from its add-ons, by add-on name.
ADDON_DAEMONSETS: dict[str, ChartDaemonSet] = {
    "vpc-cni": ChartDaemonSet(
        name="aws-node", requests={"cpu": "25m"}, tolerations=_EVERYTHING,
        affinity_terms=_NOT_ON("fargate", "hybrid", "auto"),
        source="aws/amazon-vpc-cni-k8s v1.23.0 charts/aws-vpc-cni/values.yaml: resources.requests cpu 25m, "
               "tolerations Exists, affinity compute-type NotIn fargate/hybrid/auto (network-policy agent "
               "sidecar: resources {})",
    ),
    "kube-proxy": ChartDaemonSet(
        name="kube-proxy", requests={"cpu": "100m"}, tolerations=_EVERYTHING,
        affinity_terms=_NOT_ON("fargate", "auto"),
        source="EKS kube-proxy add-on DaemonSet (kube-system; no public chart): requests cpu 100m, tolerations "
               "Exists, not on Fargate or Auto Mode nodes",
    ),
    "eks-pod-identity-agent": ChartDaemonSet(
        name="eks-pod-identity-agent", requests={}, tolerations=_EVERYTHING,
        affinity_terms=_NOT_ON("fargate", "hybrid", "auto"),
        source="aws/eks-pod-identity-agent charts/eks-pod-identity-agent/values.yaml (1.2.0): resources {}, "
               "tolerations Exists, affinity compute-type NotIn fargate/hybrid/auto",
    ),
}
#: Add-ons EKS installs on every cluster unless told otherwise (pulumi-eks keeps them).
DEFAULT_ADDONS = ("vpc-cni", "kube-proxy")


def _get(values: Any, path: str) -> Any:
    node = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _render(entry: ChartDaemonSet, values: dict[str, Any], origin: str) -> DaemonSet | None:
    if entry.enabled is not None:
        flag = _get(values, entry.enabled[0])
        if not (entry.enabled[1] if flag is None else flag is True or str(flag).lower() == "true"):
            return None
    requests = dict(entry.requests)
    override = _get(values, entry.requests_path) if entry.requests_path else None
    if isinstance(override, dict):
        requests = {**(override.get("limits") or {}), **(override.get("requests") or {})}
    tolerations = entry.tolerations
    given = _get(values, entry.tolerations_path) if entry.tolerations_path else None
    if isinstance(given, list):
        tolerations = given
    selector = entry.node_selector
    given = _get(values, entry.node_selector_path) if entry.node_selector_path else None
    if isinstance(given, dict) and given:
        selector = given
    terms = entry.affinity_terms
    given = _get(values, entry.affinity_path) if entry.affinity_path else None
    if isinstance(given, dict):
        terms = _get(given, "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms") or []
    name = entry.name
    given = _get(values, entry.name_path[0]) if entry.name_path else None
    if isinstance(given, str) and given and entry.name_path:
        name = f"{given}{entry.name_path[1]}"
    return DaemonSet(
        name=name,
        requests=resources_of(requests, pods=1),
        tolerations=list(tolerations),
        selection=Selection.of(selector, terms),
        source=f"{origin}; {entry.source}",
        deploy_label=entry.deploy_label,
    )


def release_daemonsets(chart: str, version: str, values: dict[str, Any] | None) -> list[DaemonSet] | None:
    """DaemonSets of one release at ``values``; ``None`` when the chart version is not in the table."""
    entries = CHART_DAEMONSETS.get((chart, str(version)))
    if entries is None:
        return None
    rendered = [_render(e, values or {}, f"chart {chart} {version}") for e in entries]
    return [d for d in rendered if d is not None]


def addon_daemonset(addon: str) -> DaemonSet | None:
    entry = ADDON_DAEMONSETS.get(addon)
    return None if entry is None else _render(entry, {}, f"EKS add-on {addon}")


# --- Deployments a chart renders (workloads the simulation places and the tier quotas count) ------
#: llm-d-router's charts (standalone and gateway share the routerlib subchart): the Endpoint Picker
#: Deployment ``<release, cut at 40>-epp`` with ``router.epp.replicas`` (1), its ``router.epp.resources``
#: (requests 8 CPU / 8Gi), ``affinity`` and ``tolerations`` (none); in the standalone chart the Envoy proxy
#: runs in the same pod (``router.proxy.mode: sidecar``, ``proxy.enabled: true``, requests 4 CPU / 8Gi) or,
#: with ``mode: service``, as its own Deployment ``<release>-proxy`` of ``router.proxy.replicas`` (2), with
#: no placement values. llm-d/llm-d-router v0.10.0 config/charts/routerlib/values.yaml and templates
#: ``_deployment.yaml``, ``_proxy-deployment.yaml``; config/charts/llm-d-router-standalone/values.yaml.
LLM_D_ROUTER_CHARTS = {("llm-d-router-standalone", "v0.10.0"): True, ("llm-d-router-gateway", "v0.10.0"): False}
_EPP_REQUESTS = {"requests": {"cpu": "8", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}
_PROXY_REQUESTS = {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}


def _container(name: str, resources: Any) -> dict[str, Any]:
    return {"name": name, "resources": resources if isinstance(resources, dict) else {}}


def release_deployments(chart: str, version: str, values: dict[str, Any] | None, *, release: str,
                        namespace: str) -> list[dict[str, Any]] | None:
    """The Deployments a release of ``chart`` renders at ``values``, as objects (``metadata``, ``spec`` with
    ``replicas`` and the pod template's containers' resources and placement), so they are placed and
    counted like the stack's own; ``None`` when the chart version is not in the table."""
    standalone = LLM_D_ROUTER_CHARTS.get((chart, str(version)))
    if standalone is None:
        return None
    values = values or {}
    base = release.lower().strip()[:40]
    epp = _get(values, "router.epp") or {}
    proxy = _get(values, "router.proxy") or {}
    sidecar = standalone and proxy.get("enabled", True) is True and str(proxy.get("mode") or "sidecar") == "sidecar"
    containers = [_container("epp", epp.get("resources", _EPP_REQUESTS))]
    if sidecar:
        containers.insert(0, _container("proxy", proxy.get("resources", _PROXY_REQUESTS)))
    pod: dict[str, Any] = {"containers": containers, "tolerations": epp.get("tolerations") or []}
    if isinstance(epp.get("affinity"), dict) and epp["affinity"]:
        pod["affinity"] = epp["affinity"]
    out = [{"metadata": {"name": f"{base}-epp", "namespace": namespace},
            "spec": {"replicas": epp.get("replicas", 1), "strategy": {"type": "Recreate"}, "template": {"spec": pod}}}]
    if standalone and proxy.get("enabled", True) is True and str(proxy.get("mode")) == "service":
        out.append({"metadata": {"name": f"{base}-proxy", "namespace": namespace},
                    "spec": {"replicas": proxy.get("replicas", 2),
                             "template": {"spec": {"containers": [_container("proxy", proxy.get("resources", _PROXY_REQUESTS))]}}}})
    return out


__all__ = ["CHART_DAEMONSETS", "ADDON_DAEMONSETS", "DEFAULT_ADDONS", "release_daemonsets", "addon_daemonset",
           "release_deployments", "Resources"]
