"""Prefix-aware routing as the engine receives it: one InferencePool and Endpoint Picker per model.

The picker is llm-d-router's standalone chart (``versions.LLM_D_ROUTER_STANDALONE``): a Deployment whose
pod runs the Endpoint Picker (EPP) beside an Envoy sidecar, an InferencePool selecting the model's vLLM
pods, and a Service whose ``http`` port reaches the Envoy. The gateway sends the model's requests there;
Envoy asks the picker (ext_proc over loopback) which pod should serve each request, and the picker
scores the pool's pods on their queue, KV-cache use and the prompt prefix each one already holds
(the chart's ``default-plugins.yaml``: queue-scorer 2, kv-cache-utilization-scorer 2,
prefix-cache-scorer 3), reading every pod's ``/metrics`` on the vLLM port. Envoy then dials the chosen
pod's IP directly (``original_destination_cluster``), not the model's Service.

What the picker answers when the pool has no ready pod (a model scaled to zero, or still starting):
HTTP 503, body ``inference error: ServiceUnavailable - failed to find endpoint candidates for serving
the request`` (llm-d/llm-d-router v0.10.0, pkg/epp/requestcontrol/director.go: no endpoint candidates
is ``errcommon.ServiceUnavailable``; pkg/common/error/error.go ``BuildErrResponse`` turns that into
an ImmediateResponse with status 503 and the error text as body). The gateway falls back to Bedrock on
it as on any 5xx, and counts the request under the model asked for, which wakes the model.

Everything here is plain data (no Pulumi import): the component wraps it, the capacity adapter and
the tests read the same functions.
"""

from __future__ import annotations

from typing import Any

from components import contract, versions
from components.specs import multi_node, serving

#: The Envoy listener of the chart's Envoy preset (``vllm`` listener, port 8081), exposed by the picker
#: Service as the port named ``http`` (``router.extraServicePorts``, which the chart requires by that name).
PROXY_PORT = 8081
#: The picker's ext_proc gRPC port (Envoy reaches it over loopback in sidecar mode).
EXT_PROC_PORT = 9002
#: The HTTP status and body the picker answers with when its pool has no ready pod (module docstring).
NO_ENDPOINT_STATUS = 503
NO_ENDPOINT_BODY = "inference error: ServiceUnavailable - failed to find endpoint candidates for serving the request"
#: The label key the chart gives the picker's pods and its Service's selector when it creates an
#: InferencePool (routerlib ``llm-d-router.selectorLabels``: ``llm-d-router-gateway: <release>-epp``, in
#: the standalone chart too). NetworkPolicies name picker pods by it (``Exists``: every picker).
PICKER_SELECTOR_KEY = "llm-d-router-gateway"
#: Both images are distroless and run as this user (Dockerfile.epp ``USER 65532:65532``; Envoy's
#: distroless image the same ``nonroot`` user); the pod says so explicitly for Pod Security ``restricted``.
PICKER_USER = 65532

# --- Sizing ------------------------------------------------------------------------------------------
# The chart asks 8 CPU / 8Gi for the picker and 4 CPU / 8Gi for Envoy: figures for one shared picker in
# front of a large fleet. Here each model has its own picker in front of at most ``replicas.max`` pods
# (dev: 3, prod: 4). What it holds is the prefix index: 31,250 blocks of 16 tokens per pod by default
# (pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/types.go,
# ``defaultLRUCapacityPerServer``), i.e. about 160,000 hashes for five pods, tens of MiB with the map's
# overhead. Per request it hashes at most maxModelLen / 16 blocks and scores a handful of pods, and it
# scrapes each pod's /metrics: a fraction of a core. Half a core and 512 MiB (limit 1 GiB) for the picker,
# a quarter core and 256 MiB (limit 512 MiB) for Envoy; neither sets a CPU limit (the chart's choice:
# bursts are allowed). The system pool's capacity (components/specs/blueprint.py) counts both.
PICKER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
PROXY_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}


def picker_name(model: str) -> str:
    """The picker's Deployment, ServiceAccount and Service (``<release>-epp``; the release is the model).
    The chart cuts the release name at 40 characters there (routerlib ``llm-d-router.name``); model names
    are at most 32 (settings), so each picker keeps its model's whole name."""
    return f"{model}-epp"


def proxy_config_name(model: str) -> str:
    """The Envoy configuration's ConfigMap, one per model."""
    return f"{model}-envoy"


def pool_selector(model: str, *, leaders_only: bool = False) -> dict[str, str]:
    """The InferencePool's pod selector: the model's vLLM pods and nothing else (the labels its Service
    selects on, :func:`components.specs.serving.service_selector`). ``leaders_only`` for a multi-node model:
    only its groups' leaders serve the API (:func:`components.specs.multi_node.leader_selector`); its
    workers carry the model's labels but listen on no port, and a picker choosing one would fail the request."""
    return multi_node.leader_selector(model) if leaders_only else serving.service_selector(model)


def routed_url(model: str, namespace: str) -> str:
    """The OpenAI base URL the gateway uses for a routed model: the picker Service's Envoy port."""
    return f"http://{picker_name(model)}.{namespace}.svc.cluster.local:{PROXY_PORT}/v1"


def picker_pod_labels(model: str) -> dict[str, str]:
    """Labels the chart gives the picker's pods (its selector labels and mode label)."""
    return {PICKER_SELECTOR_KEY: picker_name(model), "llm-d.ai/igw-mode": "llm-d-router-gateway"}


def system_pool_affinity() -> dict[str, Any]:
    """Required node affinity on the system pool (the chart takes ``affinity``, not a nodeSelector)."""
    terms = [{"key": key, "operator": "In", "values": [value]} for key, value in contract.system_node_selector().items()]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": terms}]}}}


def picker_replicas(production: bool) -> int:
    """One picker in dev; two in production, the chart's active/passive pair (above one replica it turns
    on leader election and only the leader reports ready, so the prefix index stays in one process)."""
    return 2 if production else 1


def picker_values(model: str, *, replicas: int, leaders_only: bool = False) -> dict[str, Any]:
    """The standalone chart's values for one model's picker.

    Standalone with the Envoy sidecar: no Gateway controller runs (docs/prefix-aware-routing.md says why);
    Envoy fails closed (``failOpen: false``): with the picker unreachable it answers 500 instead of
    passing the request to an address of its own choosing, and the gateway falls back. The latency
    predictor, tokenizer sidecar and ServiceMonitor stay off (the chart's defaults)."""
    return {
        "router": {
            "modelServers": {
                "type": "vllm",
                "protocol": "http",
                "targetPorts": [{"number": serving.PORT}],
                "matchLabels": pool_selector(model, leaders_only=leaders_only),
            },
            "inferencePool": {"create": True, "failureMode": "FailClose"},
            "epp": {
                "replicas": replicas,
                "image": {
                    "registry": versions.ENDPOINT_PICKER_IMAGE.registry,
                    "repository": versions.ENDPOINT_PICKER_IMAGE.path,
                    "tag": versions.ENDPOINT_PICKER_IMAGE.chart_tag,
                    "pullPolicy": "IfNotPresent",
                },
                "resources": PICKER_RESOURCES,
                "affinity": system_pool_affinity(),
                "tolerations": [],
            },
            "proxy": {
                "enabled": True,
                "proxyType": "envoy",
                "mode": "sidecar",
                "failOpen": False,
                "image": str(versions.ENVOY_PROXY_IMAGE),
                # The preset names its ConfigMap ``envoy``: two routed models of one tier would fight over it.
                "configMap": {"name": proxy_config_name(model)},
                "volumes": [{"name": "config", "configMap": {"name": proxy_config_name(model),
                                                             "items": [{"key": "envoy.yaml", "path": "envoy.yaml"}]}}],
                "resources": PROXY_RESOURCES,
                "securityContext": serving.container_security_context(),
            },
            "extraServicePorts": [{"name": "http", "port": PROXY_PORT, "protocol": "TCP", "targetPort": PROXY_PORT}],
            "monitoring": {"prometheus": {"enabled": False}},
        }
    }


def restricted_pod_security(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The picker's Deployment made to pass Pod Security ``restricted``; None for any other object.

    The chart has no value for the pod's security context or the picker container's (routerlib
    ``_deployment.yaml`` renders only the proxy's ``securityContext``), and ``restricted`` needs
    ``allowPrivilegeEscalation: false`` and dropped capabilities on every container. The program applies
    this to the chart's rendered objects (a Pulumi transform): non-root as the images' own user,
    ``RuntimeDefault`` seccomp, and the serving containers' context on every container that has none.
    The picker keeps its service account token: it watches its pool's pods and InferencePool."""
    if obj.get("kind") != "Deployment" or not str((obj.get("metadata") or {}).get("name", "")).endswith("-epp"):
        return None
    template = (obj.get("spec") or {}).get("template") or {}
    pod = dict(template.get("spec") or {})
    pod["securityContext"] = {
        **(pod.get("securityContext") or {}),
        "runAsNonRoot": True,
        "runAsUser": PICKER_USER,
        "runAsGroup": PICKER_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod["containers"] = [
        container if container.get("securityContext") else {**container, "securityContext": serving.container_security_context()}
        for container in pod.get("containers") or []
    ]
    return {**obj, "spec": {**obj["spec"], "template": {**template, "spec": pod}}}
