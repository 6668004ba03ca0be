"""Inference routing: InferencePools, the Endpoint Pickers that serve them, and HTTPRoutes to them.

An InferencePool (``inference.networking.k8s.io/v1``) names the model-server pods of its own namespace
by ``spec.selector.matchLabels``; its Endpoint Picker chooses one of them per request by their metrics and
the prompt prefix each holds. A pool that selects no model pod answers every request with 503 (the picker
has no endpoint); one that selects pods of two models sends a request to whichever scores best, so a
client asking one model is answered by another. The picker is CPU work: on a GPU node it holds a GPU
node up (or out of reach of the models it routes to).

Pools and pickers are read in both shapes a stack has them: InferencePool resources, and llm-d-router's
charts (``llm-d-router-standalone``/``llm-d-router-gateway``, helm.sh/v3 Release or v4 Chart), whose
values hold the pool's selector (``router.modelServers.matchLabels``, the chart's pool unless
``router.inferencePool.create`` is false) and the picker's placement (``router.epp.affinity``,
``router.epp.tolerations``; llm-d/llm-d-router v0.10.0 config/charts/routerlib). Picker Deployments written
by hand are recognised by the picker's image. HTTPRoute backendRefs of kind InferencePool must name a pool
the stack defines in the route's namespace (or the backendRef's).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lib.helm import chart_name, values
from lib.kit import MANDATORY, Stack, stack_policy, stack_workloads
from lib.placement import node_selection
from lib.pod_templates import PodTemplate
from lib.pools import labels_match, stack_pools, untolerated_taints
from lib.resources import HELM_TYPES, Resource
from lib.values import UNKNOWN, as_list, contains_unknown, dig

INFERENCE_POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
HTTP_ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
POOL_GROUP = "inference.networking.k8s.io"
#: llm-d-router's charts; both render the picker from the same routerlib subchart.
ROUTER_CHARTS = ("llm-d-router-standalone", "llm-d-router-gateway")
#: Image names of Endpoint Pickers (llm-d-router's, and the Gateway API Inference Extension's before the move).
PICKER_IMAGES = ("llm-d-router-endpoint-picker", "gateway-api-inference-extension/epp")
#: Flags of model servers that name the model they serve (vLLM ``--served-model-name``, SGLang, TGI).
SERVED_NAME_FLAGS = ("--served-model-name", "--model", "--model-path", "--model-id")


@dataclass(frozen=True)
class PoolSelector:
    """One InferencePool: where it is declared, its namespace and its pod selector (matchLabels)."""

    label: str
    urn: str
    namespace: str
    name: str
    match: dict[str, Any]


def _namespace(resource: Resource, path: tuple[str, ...] = ("metadata", "namespace")) -> Any:
    value = resource.get(*path)
    return "default" if value is None else value


def _router_chart(resource: Resource) -> bool:
    return chart_name(resource) in ROUTER_CHARTS


def stack_inference_pools(stack: Stack) -> list[PoolSelector]:
    """Every InferencePool with known selector and namespace, in both shapes (module docstring)."""
    out: list[PoolSelector] = []
    for r in stack.of_type(INFERENCE_POOL):
        match = r.get("spec", "selector", "matchLabels")
        name, namespace = r.get("metadata", "name"), _namespace(r)
        if isinstance(match, dict) and not contains_unknown(match) and isinstance(namespace, str):
            out.append(PoolSelector(r.label, r.urn, namespace, str(name or r.name), match))
    for r in stack.of_type(HELM_TYPES):
        if not _router_chart(r):
            continue
        vals = values(r)
        if vals is UNKNOWN or dig(vals, "router", "inferencePool", "create") is False:
            continue
        match = dig(vals, "router", "modelServers", "matchLabels")
        release, namespace = r.get("name"), r.get("namespace", default="default")
        if isinstance(match, dict) and not contains_unknown(match) and isinstance(namespace, str):
            out.append(PoolSelector(r.label, r.urn, namespace, str(release or r.name), match))
    return out


def _served_model(template: PodTemplate) -> str | None:
    """The model a pod template serves: its server's served-model flag, else None (not a model server)."""
    for container in template.containers("containers"):
        args = [str(a) for a in as_list(container.get("command")) + as_list(container.get("args")) if a is not UNKNOWN]
        for i, arg in enumerate(args):
            for flag in SERVED_NAME_FLAGS:
                if arg == flag and i + 1 < len(args):
                    return args[i + 1]
                if arg.startswith(flag + "="):
                    return arg.split("=", 1)[1]
    return None


def _labels(template: PodTemplate) -> dict[str, Any] | None:
    labels = dig(template.metadata, "labels", default={})
    return labels if isinstance(labels, dict) and not contains_unknown(labels) else None


def _pool_check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    templates = stack_workloads(stack, config)
    for pool in stack_inference_pools(stack):
        matched: dict[str, list[str]] = {}
        undecided = False
        for template in templates:
            labels = _labels(template)
            if labels is None or not isinstance(template.namespace, str):
                undecided = True
                continue
            if template.namespace != pool.namespace or not all(labels.get(k) == v for k, v in pool.match.items()):
                continue
            model = _served_model(template)
            if model is not None:
                matched.setdefault(model, []).append(template.label)
        selector = ", ".join(f"{k}={v}" for k, v in sorted(pool.match.items()))
        if not matched and not undecided:
            yield (f"InferencePool {pool.namespace}/{pool.name} ({pool.label}) selects {selector}, which matches no "
                   f"model-server pod in namespace {pool.namespace}: its picker has no endpoint and answers every "
                   "request with 503. Make the selector match the model's pod labels (and namespace).", pool.urn)
        elif len(matched) > 1:
            models = "; ".join(f"{model} ({', '.join(where)})" for model, where in sorted(matched.items()))
            yield (f"InferencePool {pool.namespace}/{pool.name} ({pool.label}) selects {selector}, which matches pods "
                   f"of {len(matched)} models: {models}. Its picker would answer a request for one model from "
                   "another. Select one model's pods (add its instance label to the selector).", pool.urn)


@dataclass(frozen=True)
class Picker:
    label: str
    urn: str
    spec: Any  # a pod spec (nodeSelector, affinity, tolerations)


def stack_pickers(stack: Stack, config: dict[str, Any]) -> list[Picker]:
    """Endpoint Pickers: llm-d-router chart releases (placement from their values) and pod templates
    running a picker image."""
    out: list[Picker] = []
    for r in stack.of_type(HELM_TYPES):
        if not _router_chart(r):
            continue
        epp = dig(values(r), "router", "epp")
        if epp is UNKNOWN:
            continue
        epp = epp if isinstance(epp, dict) else {}
        spec = {"affinity": epp.get("affinity") or {}, "tolerations": epp.get("tolerations") or []}
        out.append(Picker(f"{r.label} (its Endpoint Picker)", r.urn, spec))
    for template in stack_workloads(stack, config):
        images = [str(c.get("image") or "") for c in template.containers("containers")]
        if any(name in image for image in images for name in PICKER_IMAGES):
            out.append(Picker(template.label, template.resource.urn, template.spec))
    return out


def _picker_check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    pickers = stack_pickers(stack, config)
    if not pickers:
        return
    gpu_pools = [pool for pool in stack_pools(stack) if pool.is_gpu]
    key = config["gpuTaintKey"]
    for picker in pickers:
        tolerations = as_list(dig(picker.spec, "tolerations"))
        if tolerations is UNKNOWN:
            continue
        gpu_toleration = [t for t in tolerations if isinstance(t, dict) and (t.get("key") == key or (
            t.get("key") in (None, "") and t.get("operator") == "Exists"))]
        if gpu_toleration:
            yield (f"{picker.label} tolerates the GPU taint {key}, so it can land on a GPU node, which it holds up "
                   "for CPU work. Remove the toleration and place it on the system pool "
                   "(router.epp.affinity on node.kubernetes.io/purpose=system).", picker.urn)
            continue
        alternatives = node_selection(picker.spec)
        if alternatives is None:
            continue
        landing = [pool.label for pool in gpu_pools
                   if labels_match(pool, alternatives)[0] is True and untolerated_taints(pool, tolerations) == []]
        if landing:
            yield (f"{picker.label} can land on GPU pool(s) {', '.join(landing)}, which it holds up for CPU work. "
                   "Place it on the system pool (router.epp.affinity on node.kubernetes.io/purpose=system).", picker.urn)


def _route_check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    known = {(p.namespace, p.name) for p in stack_inference_pools(stack)}
    for route in stack.of_type(HTTP_ROUTE):
        namespace = _namespace(route)
        for rule in as_list(route.get("spec", "rules")):
            for ref in as_list(dig(rule, "backendRefs")):
                if not isinstance(ref, dict) or ref.get("kind") != "InferencePool" or contains_unknown(ref):
                    continue
                target = (ref.get("namespace") or namespace, ref.get("name"))
                if ref.get("group") == POOL_GROUP and target not in known:
                    yield (f"{route.label} sends traffic to InferencePool {target[0]}/{target[1]}, which the stack does "
                           "not define: the gateway answers 500 for every request it matches. Name a pool the stack "
                           "defines (its InferencePool or llm-d-router release name) or define it.", route.urn)


POLICIES = [
    stack_policy(
        name="inference-pool-selects-one-model",
        description="Make every InferencePool's selector match the model-server pods of exactly one model in its namespace.",
        check=_pool_check,
        enforcement=MANDATORY,
        custom_workloads=True,
    ),
    stack_policy(
        name="endpoint-picker-off-gpu-nodes",
        description="Keep Endpoint Pickers off GPU nodes: no GPU toleration, placement on the system pool.",
        check=_picker_check,
        enforcement=MANDATORY,
        custom_workloads=True,
        contract=("gpuTaintKey",),
    ),
    stack_policy(
        name="httproute-inference-pool-exists",
        description="Point HTTPRoute backendRefs of kind InferencePool at a pool the stack defines.",
        check=_route_check,
        enforcement=MANDATORY,
    ),
]
