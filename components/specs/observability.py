"""kube-prometheus-stack's values and the vLLM PodMonitor, as the engine receives them.

Prometheus and Alertmanager run on the system pool; the node exporter runs on every node (GPU nodes
included), which is why the capacity check reads these values too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components import contract, versions

if TYPE_CHECKING:
    from components.settings.observability import Prometheus as PrometheusSettings

NAMESPACE = "monitoring"
RELEASE = "kube-prometheus-stack"
PROMETHEUS_URL = f"http://{RELEASE}-prometheus.{NAMESPACE}.svc.cluster.local:9090"
STORAGE_CLASS = "gp3-encrypted"
#: Secret holding alertmanager.yaml (the chart's Alertmanager reads it instead of generating one).
ALERTMANAGER_SECRET = "alertmanager-llm-platform"
#: kube-prometheus-stack components an EKS cluster does not let in-cluster Prometheus scrape.
EKS_HIDDEN_COMPONENTS = ("kubeScheduler", "kubeControllerManager", "kubeEtcd", "kubeProxy")
#: Alertmanager's volume: silences and the notification log are small; gp3's minimum cost applies anyway.
ALERTMANAGER_VOLUME_GIB = 10
DASHBOARD_LABEL = "grafana_dashboard"
#: kube-state-metrics exports these node labels (``label_llm_platform_io_pool``): the pool labels for
#: per-pool panels; the instance type and capacity type (Karpenter's, and the contract's on managed
#: groups) that price a node's GPUs in the token-cost rules.
NODE_LABELS_EXPORTED = (contract.POOL_LABEL, contract.ACCELERATOR_LABEL, "node.kubernetes.io/instance-type",
                        "karpenter.sh/capacity-type", contract.CAPACITY_TYPE_LABEL)
#: ... and these pod labels: the serving pods' name, model and tier, which the token-cost rules join on.
POD_LABELS_EXPORTED = ("app.kubernetes.io/name", "app.kubernetes.io/instance", contract.TIER_LABEL)


def _stack_image(image: versions.Image) -> dict[str, str]:
    """An image as kube-prometheus-stack and its grafana subchart spell it: ``registry``,
    ``repository`` and ``tag`` apart, the digest as bare hex in ``sha`` (the templates render
    ``registry/repository:tag@sha256:<sha>``). ``tag`` stays the tag: the Prometheus and Alertmanager
    resources take their ``version`` from it."""
    return {"registry": image.registry, "repository": image.path, "tag": image.tag,
            "sha": image.digest.removeprefix("sha256:") if image.digest else ""}


def _kube_state_metrics_image(image: versions.Image) -> dict[str, str]:
    """kube-state-metrics 8.4.0 renders ``registry/repository:tag@<sha>``: ``sha`` is the whole digest."""
    return {"registry": image.registry, "repository": image.path, "tag": image.tag, "sha": image.digest or ""}


def _node_exporter_image(image: versions.Image) -> dict[str, object]:
    """prometheus-node-exporter 4.56.1 appends ``-distroless`` to the tag when ``distroless`` is on and
    refuses ``sha`` (``digest`` is the whole digest): the pinned tag already names the variant."""
    return {"registry": image.registry, "repository": image.path, "tag": image.tag, "distroless": False,
            "digest": image.digest or ""}


def prometheus_stack_values(prometheus: PrometheusSettings) -> dict[str, object]:
    system = contract.system_node_selector()
    return {
        "fullnameOverride": RELEASE,
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "replicas": prometheus.replicas,
                "retention": f"{prometheus.retention_days}d",
                # Keep a margin on the volume: Prometheus drops the oldest blocks before the disk fills.
                "retentionSize": f"{int(prometheus.volume_size_gib * 0.85)}GB",
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{prometheus.volume_size_gib}Gi"}},
                        }
                    }
                },
                "image": _stack_image(versions.PROMETHEUS_IMAGE),
                "podAntiAffinity": "soft",
                "nodeSelector": system,
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
            }
        },
        "alertmanager": {
            "alertmanagerSpec": {
                "image": _stack_image(versions.ALERTMANAGER_IMAGE),
                "nodeSelector": system,
                "useExistingSecret": True,
                "configSecret": ALERTMANAGER_SECRET,
                "replicas": min(prometheus.replicas, 3),
                # Silences and the notification log survive a restart (the operator mounts this claim
                # at the Alertmanager data directory); without it a rolled pod re-pages silenced alerts.
                "storage": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{ALERTMANAGER_VOLUME_GIB}Gi"}},
                        }
                    }
                },
            }
        },
        # EKS runs the scheduler, controller manager and etcd out of the cluster's reach: their scrape
        # targets never come up and the chart's KubeSchedulerDown, KubeControllerManagerDown and etcd
        # alerts (critical) would fire from day one (prometheus-community/helm-charts#4106). Off, with
        # their ServiceMonitors, rules and dashboards. kube-proxy too: the EKS kube-proxy add-on binds
        # its metrics to 127.0.0.1:10249 (aws/containers-roadmap#657, eksctl-io/eksctl#4081) and this
        # program gives the add-on no configuration, so KubeProxyDown (critical) would fire as well.
        **{component: {"enabled": False} for component in EKS_HIDDEN_COMPONENTS},
        "prometheusOperator": {
            "nodeSelector": system,
            "image": _stack_image(versions.PROMETHEUS_OPERATOR_IMAGE),
            "prometheusConfigReloader": {"image": _stack_image(versions.PROMETHEUS_CONFIG_RELOADER_IMAGE)},
            "thanosImage": _stack_image(versions.THANOS_IMAGE),
            "admissionWebhooks": {"patch": {"image": _stack_image(versions.KUBE_WEBHOOK_CERTGEN_IMAGE)}},
        },
        "grafana": {
            "nodeSelector": system,
            "image": _stack_image(versions.GRAFANA_IMAGE),
            "sidecar": {
                "image": _stack_image(versions.GRAFANA_SIDECAR_IMAGE),
                "dashboards": {"enabled": True, "label": DASHBOARD_LABEL, "labelValue": "1"},
            },
            # The chart's `helm test` Pod (bats): nothing here runs `helm test`, and it would be one
            # more image to pin.
            "testFramework": {"enabled": False},
        },
        "kube-state-metrics": {
            "image": _kube_state_metrics_image(versions.KUBE_STATE_METRICS_IMAGE),
            "nodeSelector": system,
            "metricLabelsAllowlist": [f"nodes=[{','.join(NODE_LABELS_EXPORTED)}]",
                                      f"pods=[{','.join(POD_LABELS_EXPORTED)}]"],
        },
        # Every node, GPU nodes included. It needs the host's network, PIDs and /proc, /sys, / (a Pod
        # Security exception); everything else is locked down (the chart leaves seccomp, privilege
        # escalation and capabilities open).
        "prometheus-node-exporter": {
            "image": _node_exporter_image(versions.NODE_EXPORTER_IMAGE),
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        },
    }


def vllm_pod_monitor_spec() -> dict[str, object]:
    """Every vLLM pod, with the serving tier (pod label) as the ``tier`` label alerts route on."""
    return {
        "namespaceSelector": {"any": True},
        "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}},
        "podMetricsEndpoints": [
            {
                "port": "http",
                "path": "/metrics",
                "interval": "15s",
                "relabelings": [
                    {"sourceLabels": ["__meta_kubernetes_pod_label_llm_platform_io_tier"], "targetLabel": "tier"}
                ],
            }
        ],
    }
