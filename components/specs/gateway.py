"""The LiteLLM gateway as the engine receives it: its config, Deployment and Service, and the
series that says a model is wanted (the model servers' KEDA triggers read it)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components import contract, versions

NAMESPACE = "llm-gateway"
NAME = "llm-gateway"
#: The gateway's per-request counter. LiteLLM 1.110 counts a request that fell back under the model the
#: caller asked for (``requested_model``), so a cold model's demand shows even while Bedrock serves it.
DEMAND_METRIC = "litellm_proxy_total_requests_metric_total"
#: When that counter's series for a model was created: prometheus_client exposes every counter
#: child's creation time as ``<name>_created`` (LiteLLM leaves it on), i.e. the gateway process's
#: first request for the model. A series created within the window is new demand, not a counter
#: Prometheus merely had not seen before (after a Prometheus restart, say).
DEMAND_CREATED = "litellm_proxy_total_requests_metric_created"
#: Scrape target labels Prometheus gives the gateway (ServiceMonitor on the Service of that name).
SCRAPE_SELECTOR = f'namespace="{NAMESPACE}",service="{NAME}"'
#: Key of the Secret that holds the scraper's bearer token (the proxy's ``/metrics`` requires auth).
METRICS_SECRET = f"{NAME}-metrics"


#: How long one request stays in the demand signal (:func:`demand_query`'s window): a model's wake-up trigger
#: reads it above zero for this long, and KEDA's cooldown counts from the last poll that does.
DEMAND_WINDOW_SECONDS = 120


#: Fallback hops LiteLLM counts by the model group it fell back to (``fallback_model``), successful or
#: not (litellm/integrations/prometheus.py ``log_success_fallback_event``/``log_failure_fallback_event``),
#: with their ``_created`` children as for the demand counter.
FALLBACK_METRICS = (
    ("litellm_deployment_successful_fallbacks_total", "litellm_deployment_successful_fallbacks_created"),
    ("litellm_deployment_failed_fallbacks_total", "litellm_deployment_failed_fallbacks_created"),
)


def _arrivals(metric: str, created: str, match: str, window_seconds: int) -> list[str]:
    """The rate of a counter's increments over the window, and the counts its series held at their
    first sample when they were created within the window (see :func:`demand_query`)."""
    window = f"{window_seconds}s"
    first_counts = f"min_over_time({metric}{match}[{window}]) and (time() - {created}{match} < {window_seconds})"
    return [f"(sum(rate({metric}{match}[{window}])) or on() vector(0))",
            f"(sum({first_counts}) / {window_seconds} or on() vector(0))"]


def demand_query(model: str, window_seconds: int = DEMAND_WINDOW_SECONDS, *, fallback_target: bool = False) -> str:
    """Requests per second the gateway received for ``model`` over the window, fallbacks included.

    ``rate()`` needs two samples of a series, and the gateway's counter for a model appears only
    with its first request (at 1): on ``rate()`` alone a cold model's first request reads nothing,
    and it wakes only if a second one arrives within the window. So the requests a series already
    held at its first sample count as arrived within the window when the series was created within
    it (``_created``), beside the rate of what came after: one request wakes the model at the first
    scrape after it, and a Prometheus restart does not read every old count as a burst.

    ``fallback_target``: another served model falls back to this one (an on-prem model's cloud twin).
    LiteLLM counts a request that fell back only under the model asked for (measured with the real
    proxy: the twin gets no series of the demand counter), so the hops into this model
    (:data:`FALLBACK_METRICS`, by ``fallback_model``) are added: overflow from on-prem wakes the twin.

    Reads 0 while the gateway is scraped but the model had no request, and returns nothing when no
    gateway target is up (a broken scrape): KEDA then reports an error and its ``fallback`` holds
    replicas instead of reading a silent 0 as "no demand".
    """
    terms = _arrivals(DEMAND_METRIC, DEMAND_CREATED, f'{{requested_model="{model}"}}', window_seconds)
    if fallback_target:
        for metric, created in FALLBACK_METRICS:
            terms += _arrivals(metric, created, f'{{fallback_model="{model}"}}', window_seconds)
    return f"({' + '.join(terms)}) and on() (count(up{{{SCRAPE_SELECTOR}}} == 1) > 0)"


#: The LiteLLM proxy is I/O-bound: half a core per replica; memory limit at twice the request.
RESOURCES = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
PORT = 4000
#: Labels that select the gateway's pods (NetworkPolicies of the serving tiers name them).
POD_LABELS = {"app.kubernetes.io/instance": NAME}
#: The proxy runs as this unprivileged user, with a read-only root and writable /tmp and home.
RUN_AS_USER = 1000
HOME_DIR = "/home/litellm"
LABELS = {"app.kubernetes.io/name": "litellm", "app.kubernetes.io/instance": NAME, "app.kubernetes.io/part-of": "llm-platform"}
#: The Deployment's, Service's and PDB's selector.
SELECTOR = {"app.kubernetes.io/instance": NAME}


def api_key_env(tier: str) -> str:
    """Environment variable of the gateway that holds ``tier``'s model API key."""
    return "MODEL_API_KEY_" + re.sub(r"[^A-Z0-9]", "_", tier.upper())


@dataclass(frozen=True)
class Route:
    """One model behind the gateway: its served name, OpenAI base URL, kind (chat or embedding), the
    environment variable holding the API key its server requires (None: no key), and the other served
    models it falls back to, in order, before Bedrock (an on-prem model's cloud twin)."""

    name: str
    url: str
    kind: str = "chat"
    api_key_env: str | None = None
    fallbacks: tuple[str, ...] = ()


def gateway_config(
    routes: list[Route],
    bedrock: dict[str, list[str]],
    region: str | None,
    timeout: int,
    retries: int,
) -> dict[str, Any]:
    """LiteLLM proxy config: one route per self-hosted model, each falling back, in order, to its own
    ``fallbacks`` (other self-hosted models) and then to the Bedrock models of the same kind (``bedrock``
    maps kind to model ids): an embedding request never reaches a chat model. The whole chain is one
    list: LiteLLM tries a failed request's fallbacks in order and stops at the first that answers
    (``Router.async_function_with_fallbacks``), on the same errors as any fallback."""
    model_list: list[dict[str, Any]] = [
        {
            "model_name": route.name,
            "litellm_params": {
                "model": f"hosted_vllm/{route.name}",
                "api_base": route.url,
                **({"api_key": f"os.environ/{route.api_key_env}"} if route.api_key_env else {}),
                "timeout": timeout,
                "stream_timeout": timeout,
            },
            "model_info": {"mode": route.kind},
        }
        for route in sorted(routes, key=lambda r: r.name)
    ]
    bedrock_ids = [(kind, model_id) for kind in sorted(bedrock) for model_id in bedrock[kind]]
    model_list += [
        {
            "model_name": model_id,
            "litellm_params": {"model": f"bedrock/{model_id}", "aws_region_name": region},
            "model_info": {"mode": kind},
        }
        for kind, model_id in bedrock_ids
    ]
    fallbacks = [
        {route.name: [*route.fallbacks, *bedrock.get(route.kind, [])]}
        for route in sorted(routes, key=lambda r: r.name)
        if route.fallbacks or bedrock.get(route.kind)
    ]
    return {
        "model_list": model_list,
        "router_settings": {
            "num_retries": retries,
            "timeout": timeout,
            "allowed_fails": 3,
            "cooldown_time": 30,
            "fallbacks": fallbacks,
        },
        "litellm_settings": {
            "request_timeout": timeout,
            "drop_params": True,
            "callbacks": ["prometheus"],
            # The scraper authenticates with a bearer token from a Secret; never open /metrics.
            "require_auth_for_metrics_endpoint": True,
        },
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }


def scrape_endpoint() -> dict[str, Any]:
    """How Prometheus scrapes the gateway: the bearer token from :data:`METRICS_SECRET`."""
    return {
        "port": "http",
        "path": "/metrics/",
        "interval": "15s",
        "authorization": {"type": "Bearer", "credentials": {"name": METRICS_SECRET, "key": "token"}},
    }


def config_digest(data: Mapping[str, str]) -> str:
    """Rolls the pods when the config changes (LiteLLM reads it only at start)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def deployment(replicas: int, bedrock_region: str | None, config_hash: Any) -> dict[str, Any]:
    """The proxy's Deployment (``metadata`` and ``spec``). ``config_hash`` (of the ConfigMap's data,
    see :func:`config_digest`) rolls the pods when the config changes; an output in the program."""
    return {
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": LABELS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": SELECTOR},
            "strategy": contract.SURGE_ROLLOUT,
            "template": {
                "metadata": {
                    "labels": LABELS,
                    "annotations": {"llm-platform.io/config-hash": config_hash},
                },
                "spec": {
                    "serviceAccountName": NAME,
                    # No Kubernetes API access; Pod Identity (Bedrock) injects its own token.
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "runAsGroup": RUN_AS_USER,
                        "fsGroup": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": contract.system_node_selector(),
                    "topologySpreadConstraints": [
                        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                         "labelSelector": {"matchLabels": SELECTOR}}
                    ],
                    "containers": [
                        {
                            "name": "litellm",
                            "image": str(versions.LITELLM_IMAGE),
                            "args": ["--config", "/etc/litellm/config.yaml", "--port", str(PORT)],
                            "env": [
                                {"name": "AWS_REGION", "value": bedrock_region or ""},
                                {"name": "HOME", "value": HOME_DIR},
                                {"name": "TMPDIR", "value": "/tmp"},
                            ],
                            "envFrom": [{"secretRef": {"name": NAME}}],
                            "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
                            "resources": RESOURCES,
                            "readinessProbe": {"httpGet": {"path": "/health/readiness", "port": "http"}, "periodSeconds": 10},
                            "livenessProbe": {"httpGet": {"path": "/health/liveliness", "port": "http"}, "periodSeconds": 20, "failureThreshold": 3},
                            "volumeMounts": [
                                {"name": "config", "mountPath": "/etc/litellm", "readOnly": True},
                                {"name": "home", "mountPath": HOME_DIR},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                        }
                    ],
                    "volumes": [
                        {"name": "config", "configMap": {"name": NAME}},
                        {"name": "home", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
                    ],
                },
            },
        },
    }


def service_spec() -> dict[str, Any]:
    return {"selector": SELECTOR, "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}]}


def disruption_budget_spec() -> dict[str, Any]:
    return {"minAvailable": 1, "selector": {"matchLabels": SELECTOR}}


URL = f"http://{NAME}.{NAMESPACE}.svc.cluster.local:{PORT}/v1"
