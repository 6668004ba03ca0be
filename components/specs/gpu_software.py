"""Which GPU software runs on which node type, and the charts' values: decided in one place.

Node types differ in what they already ship: AL2023 NVIDIA and Bottlerocket NVIDIA AMIs carry the
driver and container toolkit; EKS Auto Mode nodes also run their own device plugin; hybrid
(on-prem) nodes bring nothing. The GPU Operator is steered per node with its ``nvidia.com/gpu.deploy.*``
node labels; the standalone device plugin is steered with node affinity. Either way a node never
gets two device plugins.
"""

from __future__ import annotations

from typing import Literal

from components import contract, versions
from components.specs.dcgm_counters import GPU_OPERATOR_COUNTERS_CONFIGMAP, counters_csv, xid_window_env

NodeType = Literal["managed", "karpenter", "auto-mode", "hybrid"]
Provider = contract.GpuSoftwareProvider

#: Label EKS puts on Auto Mode nodes.
AUTO_MODE_COMPUTE_LABEL = "eks.amazonaws.com/compute-type"

_DEPLOY = "nvidia.com/gpu.deploy"


def operator_node_labels(provider: Provider, node_type: NodeType, purpose: str = "") -> dict[str, str]:
    """GPU Operator operand switches a pool of ``node_type`` carries (empty unless the operator runs).

    Driver and toolkit stay off wherever the AMI ships them; the operator's device plugin stays off
    Auto Mode nodes (they run their own) and DRA pools (a DRA driver owns their GPUs); the MIG
    manager runs on Karpenter GPU nodes, where MIG-capable instances land.
    """
    if provider != "gpu-operator" or node_type == "hybrid":
        return {}
    labels = {
        f"{_DEPLOY}.driver": "false",
        f"{_DEPLOY}.container-toolkit": "false",
        f"{_DEPLOY}.mig-manager": "true" if node_type == "karpenter" else "false",
    }
    if node_type == "auto-mode" or purpose == contract.GPU_DRA_PURPOSE:
        labels[f"{_DEPLOY}.device-plugin"] = "false"
    return labels


def _gpu_node_affinity(*, dra_pools: bool) -> dict[str, object]:
    expressions = [
        {"key": contract.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]},
        {"key": AUTO_MODE_COMPUTE_LABEL, "operator": "NotIn", "values": ["auto"]},
    ]
    if not dra_pools:
        expressions.append({"key": contract.PURPOSE_LABEL, "operator": "NotIn", "values": [contract.GPU_DRA_PURPOSE]})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    }


def device_plugin_affinity() -> dict[str, object]:
    """Node affinity for the standalone device plugin: GPU nodes of the contract, except Auto Mode
    nodes (they run their own plugin) and DRA pools (a DRA driver owns their GPUs)."""
    return _gpu_node_affinity(dra_pools=False)


def gpu_monitoring_affinity() -> dict[str, object]:
    """Node affinity for GPU monitoring agents (DCGM exporter): every GPU node of the contract that
    this program manages, DRA pools included (their GPUs need metrics too), Auto Mode excluded."""
    return _gpu_node_affinity(dra_pools=True)


# --- Chart values ----------------------------------------------------------------------------------

#: The DeviceClass the chart creates for whole GPUs; workloads name it in ResourceClaimTemplates.
GPU_DEVICE_CLASS = "gpu.nvidia.com"
#: DRA is GA (``resource.k8s.io/v1``) from Kubernetes 1.34, the oldest minor this program supports.
RESOURCE_API_VERSION = "resource.k8s.io/v1"



def device_plugin_values() -> dict[str, object]:
    """Chart values: tolerate the GPU pools' taints, pin the image, bound the daemon's resources.

    The affinity replaces the chart's default (which matches ``nvidia.com/gpu.present=true`` or NFD's
    PCI/CPU labels): GPU pools carry that label through the contract, and Auto Mode and DRA nodes
    are excluded so no node ever runs two device plugins.
    """
    image = versions.NVIDIA_DEVICE_PLUGIN_IMAGE
    return {
        "image": {"repository": image.repository, "tag": image.chart_tag},
        "tolerations": [*contract.gpu_agent_tolerations(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "affinity": device_plugin_affinity(),
        "priorityClassName": "system-node-critical",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "gfd": {"enabled": False},
        "failOnInitError": True,
    }



def dcgm_exporter_values() -> dict[str, object]:
    """The chart's ``customMetrics`` replaces its counters ConfigMap (mounted over
    ``default-counters.csv``, which the chart's default ``arguments`` read), so the windowed XID count
    the alerts use is collected; ``extraEnv`` pins that count's window."""
    image = versions.DCGM_EXPORTER_IMAGE
    return {
        "image": {"repository": image.repository, "tag": image.tag},
        "customMetrics": counters_csv(),
        "extraEnv": xid_window_env(),
        "tolerations": contract.gpu_agent_tolerations(),
        "affinity": gpu_monitoring_affinity(),
        "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": False},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "priorityClassName": "system-node-critical",
        "nodeSelector": {contract.GPU_PRESENT_LABEL: "true"},
    }



_RUNTIME_DEFAULT_SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}


def _operator_image(image: versions.Image) -> dict[str, str]:
    """An image as the GPU Operator's values spell it: ``repository`` (the registry path without the
    name), ``image`` (the name) and ``version`` (the tag, ``tag@digest`` when pinned by digest)."""
    repository, name = image.repository.rsplit("/", 1)
    return {"repository": repository, "image": name, "version": image.chart_tag}


def gpu_operator_values(*, install_driver: bool, dcgm_exporter: bool = True) -> dict[str, object]:
    """Driver and toolkit only where a node lacks them (hybrid nodes: ``install_driver``)."""
    tolerations = contract.gpu_agent_tolerations()
    operator_image = _operator_image(versions.GPU_OPERATOR_IMAGE)
    driver_manager = _operator_image(versions.GPU_OPERATOR_DRIVER_MANAGER_IMAGE)
    return {
        # Every operand image is set, those of operands this program leaves off included: the
        # ClusterPolicy carries them all, and enabling an operand later must not pull a chart default.
        "operator": {"nodeSelector": contract.system_node_selector(), **operator_image},
        "validator": operator_image,
        "nodeStatusExporter": operator_image,
        "driver": {
            "enabled": install_driver,
            **_operator_image(versions.GPU_OPERATOR_DRIVER_IMAGE),
            "manager": driver_manager,
        },
        "toolkit": {"enabled": install_driver, **_operator_image(versions.GPU_OPERATOR_TOOLKIT_IMAGE)},
        "devicePlugin": {"enabled": True, **_operator_image(versions.NVIDIA_DEVICE_PLUGIN_IMAGE)},
        "gfd": _operator_image(versions.NVIDIA_DEVICE_PLUGIN_IMAGE),
        "dcgm": _operator_image(versions.GPU_OPERATOR_DCGM_IMAGE),
        "migManager": {"enabled": True, **_operator_image(versions.GPU_OPERATOR_MIG_MANAGER_IMAGE)},
        "gds": _operator_image(versions.GPU_OPERATOR_GDS_IMAGE),
        "gdrcopy": _operator_image(versions.GPU_OPERATOR_GDRCOPY_IMAGE),
        # vgpuManager's own image has no default (NVIDIA's vGPU manager is built by its licensee); off.
        "vgpuManager": {"driverManager": driver_manager},
        "vgpuDeviceManager": _operator_image(versions.GPU_OPERATOR_VGPU_DEVICE_MANAGER_IMAGE),
        "vfioManager": {**driver_manager, "driverManager": driver_manager},
        "sandboxDevicePlugin": _operator_image(versions.GPU_OPERATOR_SANDBOX_DEVICE_PLUGIN_IMAGE),
        "kataSandboxDevicePlugin": _operator_image(versions.GPU_OPERATOR_KATA_SANDBOX_DEVICE_PLUGIN_IMAGE),
        "ccManager": _operator_image(versions.GPU_OPERATOR_CC_MANAGER_IMAGE),
        "cdi": {"enabled": True},
        "nfd": {"enabled": True},
        # The chart creates the counters ConfigMap (key dcgm-metrics.csv) and names it in the
        # ClusterPolicy; the operator mounts it into the exporter and points DCGM_EXPORTER_COLLECTORS
        # at it (gpu-operator controllers/object_controls.go, TransformDCGMExporter). It adds the
        # windowed XID count the alerts use; the env pins that count's window.
        # The same exporter release as the standalone chart (versions.DCGM_EXPORTER_IMAGE), not the
        # operator chart's default (4.6.0-4.8.3-distroless): the alerts' and dashboards' metric
        # contract is checked against that one release.
        "dcgmExporter": {
            "enabled": dcgm_exporter,
            **_operator_image(versions.DCGM_EXPORTER_IMAGE),
            "serviceMonitor": {"enabled": dcgm_exporter},
            "config": {"name": GPU_OPERATOR_COUNTERS_CONFIGMAP, "create": True, "data": counters_csv()},
            "env": xid_window_env(),
        },
        "daemonsets": {"tolerations": tolerations, "priorityClassName": "system-node-critical"},
        # NFD's chart leaves seccomp unset (Pod Security "restricted" requires it); master's container
        # context also covers the post-delete prune Job. The worker still needs its hostPath mounts.
        "node-feature-discovery": {
            "image": {"repository": versions.NODE_FEATURE_DISCOVERY_IMAGE.repository,
                      "tag": versions.NODE_FEATURE_DISCOVERY_IMAGE.chart_tag},
            "master": {"nodeSelector": contract.system_node_selector(), "securityContext": _RUNTIME_DEFAULT_SECCOMP},
            "gc": {"nodeSelector": contract.system_node_selector(), "podSecurityContext": _RUNTIME_DEFAULT_SECCOMP},
            "worker": {
                "podSecurityContext": _RUNTIME_DEFAULT_SECCOMP,
                "tolerations": [
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
                    *tolerations,
                ]
            },
        },
    }



def dra_pool_affinity() -> dict[str, object]:
    """Where the kubelet plugin runs: GPU nodes of ``gpu-dra`` pools, nowhere else."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": contract.PURPOSE_LABEL, "operator": "In", "values": [contract.GPU_DRA_PURPOSE]},
                            {"key": contract.GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]},
                        ]
                    }
                ]
            }
        }
    }


def dra_driver_values() -> dict[str, object]:
    """Chart values, each set on purpose (the chart fails on its unsafe defaults).

    - ``nvidiaDriverRoot: /``: the AL2023 NVIDIA AMI has the driver on the host.
    - GPUs on, ``gpuResourcesEnabledOverride``: the device plugin is kept off DRA pools.
    - ComputeDomains off: they need multi-node NVLink (IMEX), which no catalog instance has; with
      them off the chart deploys no controller, only the kubelet plugin.
    - ``resourceApiVersion`` fixed to v1 instead of guessing from the API server's list.
    - the kubelet plugin on DRA pools only, tolerating their taints.
    - ``nameOverride``: the chart's old name. 0.4 renamed the chart, and its objects and their selector
      label key (``<name>-component``) follow ``nameOverride`` or else the chart's name; with the old name
      an upgrade from 25.12 rolls the same DaemonSet (a DaemonSet's selector is immutable) instead of
      deleting it and creating a second one.
    """
    image = versions.NVIDIA_DRA_DRIVER_IMAGE
    return {
        "nameOverride": versions.NVIDIA_DRA_DRIVER_NAME,
        "nvidiaDriverRoot": "/",
        "image": {"repository": image.repository, "tag": image.tag},
        "resourceApiVersion": RESOURCE_API_VERSION,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "gpuResourcesEnabledOverride": True,
        "webhook": {"enabled": False},
        "logVerbosity": "2",
        "kubeletPlugin": {
            "priorityClassName": "system-node-critical",
            "nodeSelector": {contract.PURPOSE_LABEL: contract.GPU_DRA_PURPOSE},
            "tolerations": [*contract.gpu_agent_tolerations(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
            "affinity": dra_pool_affinity(),
            "containers": {
                "gpus": {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}},
            },
        },
    }
