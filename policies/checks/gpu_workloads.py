"""GPU workloads follow the contract: a GPU in limits and the GPU toleration, both or neither.

A request without the toleration never schedules on a tainted GPU pool; a toleration without a
request lets CPU work occupy a GPU node. DaemonSets are node agents (device plugin, DCGM, log
shippers) that must run on GPU nodes without consuming a GPU, so they may tolerate freely.

Every pod template of a workload is judged (LeaderWorkerSet leader and worker, each Ray group...;
see ``lib.pod_templates`` and the ``customWorkloads`` parameter). MIG slices
(``nvidia.com/mig-1g.10gb`` and the like, the ``extraGpuResources`` patterns) are GPUs too; pods that
get their GPU through DRA ``resourceClaims`` request no extended resource and may tolerate the taint.
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase
from typing import Any

from lib.contract_config import OTHER_GPU_RESOURCES, SHARED_GPU_RESOURCE
from lib.kit import ADVISORY, MANDATORY, Stack, resource_policy, stack_policy
from lib.pod_templates import POD_TEMPLATE_PATHS, PodTemplate, pod_templates, workload_paths
from lib.resources import HELM_TYPES, Resource
from lib.values import UNKNOWN, as_dict, contains_unknown, fmt, quantity

#: GPU-like extended resources besides the contract's: NVIDIA MIG slices (mixed strategy).
MIG_RESOURCES = OTHER_GPU_RESOURCES  # time-sliced and MIG GPUs (lib/contract_config.py)


def tolerates_gpu_key(toleration: Any, key: str) -> bool | None:
    """Whether a toleration covers a NoSchedule taint with ``key`` and whatever value the pool uses.

    An ``Equal`` toleration counts here; whether its value matches an actual pool's taint is the
    stack-level scheduling policy's question.
    """
    if not isinstance(toleration, dict) or contains_unknown(toleration):
        return None
    effect = toleration.get("effect") or ""
    if effect and effect != "NoSchedule":
        return False
    tol_key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not tol_key:
        return operator == "Exists"
    return tol_key == key


def gpu_toleration_state(template: PodTemplate, key: str) -> tuple[bool | None, bool]:
    """(tolerates the GPU taint key, via a blanket toleration that tolerates everything)."""
    tolerations = template.tolerations
    if tolerations is UNKNOWN:
        return None, False
    verdicts = [(tolerates_gpu_key(t, key), t) for t in tolerations]
    hits = [t for verdict, t in verdicts if verdict]
    if hits:
        return True, all(not (t.get("key") or "") for t in hits)
    if any(verdict is None for verdict, _ in verdicts):
        return None, False
    return False, False


def container_gpus(container: dict[str, Any], resource_name: str) -> tuple[Any, Any]:
    """(limit, request) of the GPU resource in one container; ``None`` if absent."""
    resources = as_dict(container.get("resources"))
    if resources is UNKNOWN:
        return UNKNOWN, UNKNOWN
    limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
    limit = UNKNOWN if limits is UNKNOWN else limits.get(resource_name)
    request = UNKNOWN if requests is UNKNOWN else requests.get(resource_name)
    return limit, request


def pod_gpus(template: PodTemplate, resource_name: str) -> float | None:
    """GPUs one pod holds: app containers and native sidecars (init containers with ``restartPolicy:
    Always``) summed, against each ordinary init container plus the sidecars before it (Kubernetes'
    effective request: kubernetes/kubernetes staging/src/k8s.io/component-helpers/resource/helpers.go,
    ``AggregateContainerRequests``; KEP-753)."""
    if template.spec is UNKNOWN:
        return None
    total = 0.0
    for container in template.containers("containers"):
        limit, _ = container_gpus(container, resource_name)
        if limit is UNKNOWN:
            return None
        total += quantity(limit) or 0
    sidecars = peak = 0.0
    for container in template.containers("initContainers"):
        limit, _ = container_gpus(container, resource_name)
        if limit is UNKNOWN:
            return None
        gpus = quantity(limit) or 0
        if container.get("restartPolicy") == "Always":
            total += gpus
            sidecars += gpus
            peak = max(peak, sidecars)
        else:
            peak = max(peak, gpus + sidecars)
    return max(total, peak)


def asks_for_gpu(template: PodTemplate, resource_name: str) -> bool | None:
    """Whether any container names the GPU resource in limits or requests (``None`` = unknown)."""
    if template.spec is UNKNOWN:
        return None
    unknown = False
    for container in template.containers("initContainers", "containers"):
        limit, request = container_gpus(container, resource_name)
        if (limit not in (None, UNKNOWN) and quantity(limit) != 0) or (
            request not in (None, UNKNOWN) and quantity(request) != 0
        ):
            return True
        unknown = unknown or UNKNOWN in (limit, request)
    return None if unknown else False


def uses_dra(template: PodTemplate) -> bool:
    claims = template.spec.get("resourceClaims") if isinstance(template.spec, dict) else None
    return bool(claims)


def gpu_resource_names(container: dict[str, Any], gpu: str, patterns: list[str]) -> list[str]:
    """The GPU resource names a container uses: the contract's plus names matching ``patterns``."""
    resources = as_dict(container.get("resources"))
    names = {gpu}
    if isinstance(resources, dict):
        for part in ("limits", "requests"):
            section = resources.get(part)
            if isinstance(section, dict):
                names.update(n for n in section if any(fnmatchcase(n, p) for p in patterns))
    return sorted(names)


def _template_contract(template: PodTemplate, config: dict[str, Any]) -> Iterator[str]:
    gpu, key = config["gpuResource"], config["gpuTaintKey"]
    subject = template.label
    in_limits: list[str] = []
    for container in template.containers("initContainers", "containers"):
        name = container.get("name", "?")
        for resource_name in gpu_resource_names(container, gpu, config["extraGpuResources"]):
            limit, request = container_gpus(container, resource_name)
            if limit is UNKNOWN or request is UNKNOWN:
                continue
            if request is not None and limit is None:
                yield (
                    f"{subject}: container '{name}' requests {resource_name} only in resources.requests. Extended "
                    f"resources must be set in resources.limits (requests may be omitted or equal); put "
                    f"'{resource_name}: {fmt(request)}' under limits."
                )
            elif request is not None and limit is not None and quantity(request) != quantity(limit):
                yield (
                    f"{subject}: container '{name}' has {resource_name} request {fmt(request)} but limit {fmt(limit)}; "
                    f"the API server rejects extended resources whose request differs from the limit. Make them equal."
                )
            if limit is not None and not _whole(limit):
                yield (
                    f"{subject}: container '{name}' has {resource_name} limit {fmt(limit)}; the API server refuses "
                    f"extended resources that are not whole numbers (a GPU cannot be split by quantity). Request a "
                    f"whole GPU, or share one through time-slicing ({SHARED_GPU_RESOURCE}) or a MIG slice."
                )
            if limit is not None and quantity(limit) != 0 and resource_name not in in_limits:
                in_limits.append(resource_name)
    if not in_limits:
        return
    tolerated, _ = gpu_toleration_state(template, key)
    if tolerated is False:
        yield (
            f"{subject} requests {', '.join(in_limits)} but does not tolerate the GPU taint '{key}', so it can never "
            f"schedule on a GPU pool. Add tolerations: [{{key: {key}, operator: Exists, effect: NoSchedule}}]."
        )


def _whole(value: Any) -> bool:
    """Whether an extended resource quantity is an integer, as the API server requires
    (kubernetes/kubernetes pkg/apis/core/validation/validation.go, ``validateResourceQuantityValue``:
    an ``IsIntegerResourceName`` resource, every extended resource, "must be an integer")."""
    number = quantity(value)
    return number is None or float(number).is_integer()


def _check_contract(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    for template in pod_templates(resource, config):
        if template.spec is not UNKNOWN:
            yield from _template_contract(template, config)


def _asks_for_any_gpu(template: PodTemplate, config: dict[str, Any]) -> bool | None:
    verdicts = []
    names = {config["gpuResource"]}
    for container in template.containers("initContainers", "containers"):
        names.update(gpu_resource_names(container, config["gpuResource"], config["extraGpuResources"]))
    for name in sorted(names):
        verdicts.append(asks_for_gpu(template, name))
    if True in verdicts:
        return True
    return None if None in verdicts else False


def _check_waste(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    for template in pod_templates(resource, config):
        if template.spec is UNKNOWN or template.kind in config["exemptKinds"]:
            continue
        tolerated, blanket = gpu_toleration_state(template, config["gpuTaintKey"])
        if not tolerated or uses_dra(template):
            continue
        if _asks_for_any_gpu(template, config) is not False:
            continue
        how = "tolerates every taint (operator: Exists without a key)" if blanket else (
            f"tolerates the GPU taint '{config['gpuTaintKey']}'"
        )
        yield (
            f"{template.label} {how} but requests no {config['gpuResource']}, so CPU work can land on and hold a "
            f"GPU node. Remove the toleration, or request {config['gpuResource']} in limits if it needs a GPU."
        )


_EXTRA_GPU = {
    "extraGpuResources": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "default": MIG_RESOURCES,
        "description": "Glob patterns of further GPU extended resources (MIG slices by default) held to the contract.",
    }
}


WORKLOAD_TYPES = frozenset(POD_TEMPLATE_PATHS)
#: How deep an unknown kind is searched for something shaped like a pod spec.
_SEARCH_DEPTH = 8


def _pod_spec_path(node: Any, where: str = "", depth: int = 0) -> str | None:
    """The path of the first object that looks like a pod spec (a ``containers`` list of objects
    with an ``image``), else ``None``."""
    if depth > _SEARCH_DEPTH:
        return None
    if isinstance(node, dict):
        containers = node.get("containers")
        if isinstance(containers, list) and any(isinstance(c, dict) and "image" in c for c in containers):
            return where or "(the object)"
        for key, child in node.items():
            found = _pod_spec_path(child, f"{where}.{key}" if where else str(key), depth + 1)
            if found:
                return found
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found = _pod_spec_path(child, f"{where}[{index}]", depth + 1)
            if found:
                return found
    return None


def _check_undeclared_kinds(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """Kubernetes kinds outside the pod-template table that carry something shaped like a pod spec:
    the workload policies cannot judge them, so say so once for the stack instead of passing silently."""
    known = set(workload_paths(config)) | set(HELM_TYPES)
    found: dict[str, str] = {}
    for resource in stack.resources:
        if not resource.type.startswith("kubernetes:") or resource.type in known or resource.type in found:
            continue
        path = _pod_spec_path(resource.props)
        if path:
            found[resource.type] = path
    if found:
        kinds = "; ".join(f"{kind} (at {path})" for kind, path in sorted(found.items()))
        yield (
            f"The pack does not know where these kinds keep their pod templates, so their GPU requests, tolerations "
            f"and images are not judged: {kinds}. Declare each under customWorkloads (type -> template paths) in "
            f"this policy's and the workload policies' config.",
            None,
        )

POLICIES = [
    resource_policy(
        name="gpu-workload-contract",
        description=(
            "Request nvidia.com/gpu (or a time-sliced or MIG GPU) in container limits as a whole number (not only in "
            "requests, never 500m) and tolerate the GPU taint in every workload that uses a GPU."
        ),
        types=WORKLOAD_TYPES,
        check=_check_contract,
        enforcement=MANDATORY,
        contract=("gpuTaintKey", "gpuResource"),
        params=_EXTRA_GPU,
        custom_workloads=True,
    ),
    resource_policy(
        name="gpu-toleration-without-gpu",
        description="Remove the GPU toleration from workloads that do not request a GPU (node-agent DaemonSets excepted).",
        types=WORKLOAD_TYPES,
        check=_check_waste,
        enforcement=MANDATORY,
        contract=("gpuTaintKey", "gpuResource"),
        params={
            "exemptKinds": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["DaemonSet"],
                "description": "Workload kinds allowed to tolerate the GPU taint without a GPU (node agents).",
            },
            **_EXTRA_GPU,
        },
        custom_workloads=True,
    ),
    stack_policy(
        name="workload-kinds-known",
        description=(
            "Declare every custom kind that carries pod templates under customWorkloads (type -> template paths) so "
            "the workload policies can judge it; built in: apps/batch/core kinds, LeaderWorkerSet, KubeRay, KServe "
            "InferenceService and Kubeflow PyTorchJob."
        ),
        check=_check_undeclared_kinds,
        enforcement=ADVISORY,
        custom_workloads=True,
    ),
]
