"""Post-deploy checks of a GPU cluster, planned from the stack's settings.

The plan follows what the stack actually installed: the standalone device plugin (its chart's
namespace and labels) or the GPU Operator (its operand DaemonSet ``nvidia-device-plugin-daemonset``,
label ``app=nvidia-device-plugin-daemonset``, in the operator's namespace, on nodes labelled
``nvidia.com/gpu.deploy.device-plugin=true``), or nothing when the AMI/Auto Mode ships the plugin.
The GPU pools checked are those with a Ready node now (by the ``llm-platform.io/pool`` node label
from ``components.contract``), managed and Karpenter pools alike; a pool without one is SKIP.
Then ``nvidia-smi`` on each of those pools, every warm model's ``/health``, every model at zero woken
by one request and Ready within its cold-start bound, and one chat completion and one embedding
through the gateway, all through ``kubectl port-forward``: its traffic enters the
pod's network namespace through the kubelet, so the serving namespaces' NetworkPolicies (which admit
only the gateway and Prometheus) do not stop it, whereas the API server's service proxy comes from
the control plane's ENIs and is dropped (it would also drop the gateway's ``Authorization`` header).

Everything goes through ``kubectl`` against the stack's kubeconfig. Scheduling values
(toleration, node selector, GPU resource) come from ``components.contract``.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from automation.driver.preflight import bedrock_checks, bedrock_targets, gateway_role_checks
from automation.driver.results import CheckResult
from components import contract, versions
from policies.capacity import bounded_json

#: ``nvidia-smi`` comes from the node's driver (the NVIDIA runtime mounts it); the image only needs
#: to set NVIDIA_DRIVER_CAPABILITIES=utility, which the CUDA base images do.
SMOKE_IMAGE = versions.CUDA_SMOKE_IMAGE
SMOKE_NAMESPACE = "llm-platform-smoke"
SMOKE_JOB = "gpu-smoke"
DEVICE_PLUGIN_SELECTOR = "app.kubernetes.io/name=nvidia-device-plugin"
#: The GPU Operator's device plugin operand (gpu-operator ``assets/state-device-plugin/0500_daemonset.yaml``).
OPERATOR_PLUGIN_SELECTOR = "app=nvidia-device-plugin-daemonset"
#: Nodes labelled ``false`` here run no device plugin by design (Auto Mode, DRA pools).
DEPLOY_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
POLL_SECONDS = 10.0
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+)")


class KubectlError(Exception):
    """kubectl failed or is missing; the message names the command."""


class GatewayAnswerError(KubectlError):
    """The gateway answered a request with an HTTP error: the request reached it (and was counted)."""


class Kubectl(Protocol):
    def __call__(self, *args: str, input: str | None = None) -> str: ...


class KubectlCli:
    """Runs the ``kubectl`` binary against one kubeconfig file."""

    def __init__(self, kubeconfig: Path, binary: str = "kubectl", timeout: float = 900):
        self.kubeconfig, self.binary, self.timeout = kubeconfig, binary, timeout

    def __call__(self, *args: str, input: str | None = None) -> str:
        command = [self.binary, "--kubeconfig", str(self.kubeconfig), *args]
        try:
            done = subprocess.run(command, input=input, capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            raise KubectlError(f"{self.binary} not found; install kubectl or pass --kubectl PATH") from None
        except subprocess.TimeoutExpired:
            raise KubectlError(f"kubectl {' '.join(args)} timed out after {self.timeout:.0f}s") from None
        if done.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    @contextmanager
    def port_forward(self, namespace: str, target: str, port: int, wait: float = 30) -> Iterator[int]:
        """``kubectl port-forward`` to a free local port on 127.0.0.1; yields that port."""
        command = [self.binary, "--kubeconfig", str(self.kubeconfig), "port-forward", "-n", namespace,
                   "--address", "127.0.0.1", target, f":{port}"]
        try:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except FileNotFoundError:
            raise KubectlError(f"{self.binary} not found; install kubectl or pass --kubectl PATH") from None
        try:
            deadline = time.monotonic() + wait
            line = ""
            while time.monotonic() < deadline:
                line = process.stdout.readline() if process.stdout else ""
                match = _FORWARDING.search(line)
                if match:
                    break
                if not line and process.poll() is not None:
                    error = process.stderr.read().strip() if process.stderr else ""
                    raise KubectlError(f"kubectl port-forward {target}: {error}")
            else:
                raise KubectlError(f"kubectl port-forward {target}: no local port within {wait:.0f}s")
            yield int(match.group(1))
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()


@contextmanager
def kubeconfig_file(kubeconfig: Any) -> Iterator[Path]:
    """The stack's ``kubeconfig`` output (object or JSON text) in a private temporary file."""
    text = kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig)
    fd, name = tempfile.mkstemp(prefix="kubeconfig-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        yield Path(name)
    finally:
        os.unlink(name)


@dataclass
class GpuTarget:
    """The GPU pool the smoke Job runs on and how many of its nodes the run asked for."""

    pool: str
    purpose: str
    nodes: int


#: What a probe answers: ``(ok, detail)``, or ``(ok, detail, final)`` where a final failure stops waiting.
Probed = tuple[bool, str] | tuple[bool, str, bool]


@dataclass
class Poller:
    """Retries a check until it passes or the shared deadline passes; the clock is injectable.

    The deadline starts with the first check, not when the poller is made (before a long ``up``).
    """

    timeout: float
    interval: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    deadline: float | None = field(default=None, init=False)

    def until(self, name: str, probe: Callable[[], Probed]) -> CheckResult:
        """``probe`` returns ``(ok, detail)`` or ``(ok, detail, final)``; final failures stop waiting."""
        if self.deadline is None:
            self.deadline = self.clock() + self.timeout
        while True:
            try:
                ok, detail, *final = probe()
            except KubectlError as exc:  # an API server that is still settling is retried like a failed check
                ok, detail, final = False, str(exc), []
            if ok or (final and final[0]):
                return CheckResult(name, ok, detail)
            if self.clock() >= self.deadline:
                return CheckResult(name, False, f"{detail} (gave up after {self.timeout:.0f}s)")
            self.sleep(self.interval)


def _items(kubectl: Kubectl, *args: str) -> list[dict[str, Any]]:
    return json.loads(kubectl("get", *args, "-o", "json")).get("items", [])


def _ready(conditions: list[dict[str, Any]] | None, kind: str = "Ready") -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions or [])


def _gpu_nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in nodes if n["metadata"].get("labels", {}).get(contract.GPU_PRESENT_LABEL) == "true"]


def _allocatable_gpus(node: dict[str, Any]) -> int:
    value = node.get("status", {}).get("allocatable", {}).get(contract.GPU_RESOURCE, "0")
    try:
        return int(value)
    except ValueError:
        return 0


def nodes_ready(kubectl: Kubectl) -> tuple[bool, str]:
    nodes = _items(kubectl, "nodes")
    not_ready = [n["metadata"]["name"] for n in nodes if not _ready(n.get("status", {}).get("conditions"))]
    if not nodes:
        return False, "no nodes registered"
    if not_ready:
        return False, f"{len(not_ready)} of {len(nodes)} node(s) not Ready: {', '.join(not_ready)}"
    return True, f"{len(nodes)} node(s) Ready"


def _pool(node: dict[str, Any]) -> str:
    return node["metadata"].get("labels", {}).get(contract.POOL_LABEL, "")


def _ready_gpu_nodes(kubectl: Kubectl) -> list[dict[str, Any]]:
    return [n for n in _gpu_nodes(_items(kubectl, "nodes")) if _ready(n.get("status", {}).get("conditions"))]


def _in_pools(nodes: list[dict[str, Any]], pools: set[str] | None) -> list[dict[str, Any]]:
    return nodes if pools is None else [n for n in nodes if _pool(n) in pools]


def gpu_nodes_present(kubectl: Kubectl, target: GpuTarget) -> tuple[bool, str]:
    """``target.nodes`` Ready GPU nodes in ``target.pool`` (the pool a ``test`` run started)."""
    gpu = _in_pools(_ready_gpu_nodes(kubectl), {target.pool})
    if len(gpu) < target.nodes:
        return False, (f"{len(gpu)} Ready GPU node(s) in pool {target.pool} ({contract.POOL_LABEL}), "
                       f"want {target.nodes}")
    return True, f"{len(gpu)} Ready GPU node(s) in pool {target.pool}"


def gpu_pool_targets(kubectl: Kubectl, pools: dict[str, str]) -> tuple[list[GpuTarget], list[CheckResult]]:
    """The stack's GPU pools (name -> purpose) that have a Ready node now, read from the nodes' pool
    label, so managed groups at desiredSize 0 that run nothing and Karpenter pools that do are both
    judged by what exists; the others come back as SKIP rows (nothing to run ``nvidia-smi`` on)."""
    counts = Counter(_pool(n) for n in _ready_gpu_nodes(kubectl))
    targets: list[GpuTarget] = []
    skipped: list[CheckResult] = []
    for name, purpose in pools.items():
        check = f"gpu pool {name}"
        if purpose == contract.GPU_DRA_PURPOSE:
            skipped.append(CheckResult(check, True, f"DRA pool: GPUs are claimed through DRA, not "
                                       f"{contract.GPU_RESOURCE}; not smoke-tested", skipped=True))
        elif counts.get(name, 0) == 0:
            skipped.append(CheckResult(check, True, "no Ready node (scaled to zero); GPU checks need one",
                                       skipped=True))
        else:
            targets.append(GpuTarget(pool=name, purpose=purpose, nodes=counts[name]))
    return targets, skipped


@dataclass(frozen=True)
class GpuSoftwareTarget:
    """Where the device plugin of the installed GPU software runs; ``provider`` "none" means the AMI
    or Auto Mode brings its own and there is nothing of ours to check."""

    provider: str
    namespace: str = ""
    selector: str = ""


def _default_namespace(args_class: type) -> str:
    default = next(f.default for f in dataclasses.fields(args_class) if f.name == "namespace")
    if not isinstance(default, str):
        raise TypeError(f"{args_class.__name__}.namespace has no default namespace")
    return default


def gpu_software_target(provider: str) -> GpuSoftwareTarget:
    """The namespace each component installs into, from its args' default (one source)."""
    if provider == "gpu-operator":
        from components.gpu.operator import GpuOperatorArgs

        return GpuSoftwareTarget(provider, _default_namespace(GpuOperatorArgs), OPERATOR_PLUGIN_SELECTOR)
    if provider == "device-plugin":
        from components.gpu.device_plugin import GpuDevicePluginArgs

        return GpuSoftwareTarget(provider, _default_namespace(GpuDevicePluginArgs), DEVICE_PLUGIN_SELECTOR)
    return GpuSoftwareTarget(provider)


def device_plugin_ready(kubectl: Kubectl, software: GpuSoftwareTarget,
                        pools: set[str] | None = None) -> tuple[bool, str]:
    """A Ready device-plugin pod on every GPU node (of ``pools``, if given) meant to run one, and the
    DaemonSet rolled out."""
    nodes = _in_pools(_gpu_nodes(_items(kubectl, "nodes")), pools)
    gpu = {n["metadata"]["name"] for n in nodes
           if n["metadata"].get("labels", {}).get(DEPLOY_PLUGIN_LABEL) != "false"}
    where = f"{software.namespace} ({software.provider})"
    sets = _items(kubectl, "daemonsets", "-n", software.namespace, "-l", software.selector)
    if not sets:
        return False, f"no device plugin DaemonSet ({software.selector}) in {where}"
    pods = _items(kubectl, "pods", "-n", software.namespace, "-l", software.selector)
    covered = {
        p.get("spec", {}).get("nodeName")
        for p in pods
        if p.get("status", {}).get("phase") == "Running" and _ready(p.get("status", {}).get("conditions"))
    }
    missing = sorted(gpu - covered)
    status = sets[0].get("status", {})
    desired, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
    if missing:
        return False, f"no Ready device plugin pod of {where} on GPU node(s) {', '.join(missing)}"
    if ready < desired:
        return False, f"DaemonSet {sets[0]['metadata']['name']} in {where}: {ready}/{desired} pods ready"
    return True, f"{software.provider} device plugin Ready on {len(gpu)} GPU node(s) ({ready}/{desired} pods)"


def gpus_allocatable(kubectl: Kubectl, pools: set[str] | None = None) -> tuple[bool, str]:
    gpu = _in_pools(_gpu_nodes(_items(kubectl, "nodes")), pools)
    empty = [n["metadata"]["name"] for n in gpu if _allocatable_gpus(n) <= 0]
    if not gpu or empty:
        return False, f"allocatable {contract.GPU_RESOURCE} is 0 on: {', '.join(empty) or 'no GPU nodes'}"
    return True, f"{sum(_allocatable_gpus(n) for n in gpu)} allocatable {contract.GPU_RESOURCE} on {len(gpu)} node(s)"


def smoke_job_name(target: GpuTarget) -> str:
    return f"{SMOKE_JOB}-{target.pool}"[:63].rstrip("-")


def smoke_job_manifests(target: GpuTarget, name: str | None = None) -> list[dict[str, Any]]:
    """A Namespace and a Job running ``nvidia-smi`` on one GPU of ``target``'s pool, scheduled by the contract."""
    name = name or smoke_job_name(target)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SMOKE_NAMESPACE}}
    container = {
        "name": "nvidia-smi",
        "image": str(SMOKE_IMAGE),
        "command": ["nvidia-smi"],
        "resources": {"limits": {contract.GPU_RESOURCE: 1}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    labels = {"app.kubernetes.io/name": SMOKE_JOB, contract.POOL_LABEL: target.pool}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": SMOKE_NAMESPACE, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 900,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {contract.GPU_PRESENT_LABEL: "true", contract.POOL_LABEL: target.pool},
                    "tolerations": contract.workload_tolerations(target.purpose),
                    "containers": [container],
                },
            },
        },
    }
    return [namespace, job]


def run_smoke_job(kubectl: Kubectl, target: GpuTarget, poller: Poller) -> CheckResult:
    name = smoke_job_name(target)
    check = f"nvidia-smi on pool {target.pool}"
    documents = smoke_job_manifests(target, name)
    try:
        kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents, sort_keys=False))
    except KubectlError as exc:
        return CheckResult(check, False, str(exc))

    def finished() -> tuple[bool, str, bool]:
        status = json.loads(kubectl("get", "job", name, "-n", SMOKE_NAMESPACE, "-o", "json")).get("status", {})
        if status.get("succeeded", 0) >= 1:
            return True, "succeeded", True
        if status.get("failed", 0) >= 1:
            return False, "failed", True  # backoffLimit 0: a failed Job never recovers
        return False, "not finished", False

    result = poller.until(check, finished)
    try:
        logs = kubectl("logs", f"job/{name}", "-n", SMOKE_NAMESPACE)
    except KubectlError as exc:
        logs = f"(no logs: {exc})"
    if result.ok and "NVIDIA-SMI" not in logs:
        return CheckResult(check, False, "job succeeded but printed no nvidia-smi table")
    first = next((line.strip() for line in logs.splitlines() if "NVIDIA-SMI" in line or "error" in line.lower()), "")
    return CheckResult(check, result.ok, f"{result.detail}: {first}" if first else result.detail)


# --- models and the gateway ---------------------------------------------------------------------


@dataclass(frozen=True)
class ModelTarget:
    """A served model: where its Service is, whether it is chat or embedding, whether it should be up, and,
    for a model at ``replicas.min`` 0, the bound (seconds) of its cold start that its wake-up must fit."""

    name: str
    namespace: str
    kind: str
    warm: bool
    wake_bound_seconds: int | None = None


def model_kind(model: Any, tier_name: str) -> str:
    """The model's ``kind`` setting (chat/embedding) when the settings have it; otherwise derived from
    the names (an ``embed`` model or tier is an embedding model)."""
    kind = getattr(model, "kind", None)
    if kind in ("chat", "embedding"):
        return kind
    return "embedding" if "embed" in model.name.lower() or "embed" in tier_name.lower() else "chat"


@dataclass(frozen=True)
class CheckPlan:
    """Every check a stack's settings call for, in order.

    ``pools`` maps each GPU pool of the stack (managed, Karpenter, Auto Mode) to its purpose; which of
    them are checked is decided on the cluster (:func:`gpu_pool_targets`). ``wait_for`` is the pool a
    ``test`` run started nodes in: the checks wait for those nodes first."""

    software: GpuSoftwareTarget
    pools: dict[str, str]
    models: list[ModelTarget] = field(default_factory=list)
    gateway: bool = False
    wait_for: GpuTarget | None = None
    #: The gateway's Bedrock fallbacks, (kind, model id), each invoked once, and their region.
    bedrock: tuple[tuple[str, str], ...] = ()
    bedrock_region: str | None = None
    #: The gateway's Pod Identity role (the stack's ``gatewayRoleArn`` output): each fallback is also
    #: simulated as that role, which is who calls Bedrock when a model fails.
    gateway_role_arn: str | None = None


def plan_checks(settings: Any, wait_for: GpuTarget | None = None) -> CheckPlan:
    """The checks for ``settings``: its GPU software, its GPU pools, its models and gateway, and, for
    ``verify`` (no ``wait_for``), the account's access to each of the gateway's Bedrock fallbacks. A
    ``test`` run proves the GPU path of a throwaway copy of the stack; the account's Bedrock access is
    the same for every stack of the account, and ``verify`` (and preflight, when given the targets)
    checks it."""
    models: list[ModelTarget] = []
    serving = getattr(settings, "serving", None)
    if serving is not None and serving.enabled:
        from components.specs.serving import namespace_name

        bounds = wake_bounds(settings)
        for tier in serving.tiers:
            for model in tier.models:
                warm = model.replicas.min >= 1
                models.append(ModelTarget(model.name, namespace_name(tier.name), model_kind(model, tier.name), warm,
                                          None if warm else bounds.get(model.name)))
    gateway_settings = serving.gateway if serving is not None and serving.enabled and serving.gateway.enabled else None
    gateway = gateway_settings is not None
    pools = {name: facts.purpose for name, facts in settings.gpu_pool_facts().items()}

    return CheckPlan(gpu_software_target(settings.gpu_software.provider), pools, models, gateway, wait_for,
                     bedrock=bedrock_targets(settings) if wait_for is None else (),
                     bedrock_region=gateway_settings.bedrock_region if gateway_settings is not None else None)


def wake_bounds(settings: Any) -> dict[str, int]:
    """Each served model's cold-start bound (seconds) on the pool it lands on: the await budget the model
    server's Deployment also gets (``components.specs.serving.cold_start_bound``)."""
    from components.capacity_check import CheckedStack
    from components.specs.serving import cold_start_bound

    pools = {model.name: pool for model, pool in CheckedStack.of(settings).model_pools().values()}
    return {model.name: cold_start_bound(model, pools.get(model.name)).total
            for tier in settings.serving.tiers for model in tier.models}


def http_status(url: str, timeout: float = 30) -> int:
    """The HTTP status of a GET; a connection failure is a :class:`KubectlError` (retried)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError) as exc:
        raise KubectlError(f"GET {url}: {exc}") from None


def model_healthy(kubectl: Kubectl, model: ModelTarget) -> Probed:
    """vLLM's ``/health`` (200 when the engine is up) through ``kubectl port-forward`` to the model's
    Service: not through the API server's service proxy, which the namespace's NetworkPolicy drops."""
    from components.specs.serving import PORT

    forward = getattr(kubectl, "port_forward", None)
    if forward is None:
        return False, "this kubectl cannot port-forward", True
    where = f"{model.namespace}/{model.name}"
    with forward(model.namespace, f"svc/{model.name}", PORT) as local_port:
        status = http_status(f"http://127.0.0.1:{local_port}/health")
    if status != 200:
        return False, f"{where} /health: HTTP {status}"
    return True, f"{where} /health answered 200"


def gateway_master_key(kubectl: Kubectl) -> str:
    from components.specs.gateway import NAME, NAMESPACE

    secret = json.loads(kubectl("get", "secret", NAME, "-n", NAMESPACE, "-o", "json"))
    encoded = secret.get("data", {}).get("LITELLM_MASTER_KEY", "")
    if not encoded:
        raise KubectlError(f"secret {NAMESPACE}/{NAME} has no LITELLM_MASTER_KEY")
    return base64.b64decode(encoded).decode()


def call_gateway(base_url: str, key: str, path: str, body: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    request = urllib.request.Request(
        base_url + path, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bounded_json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:200]
        raise GatewayAnswerError(f"gateway {path}: HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise KubectlError(f"gateway {path}: {exc}") from None


def gateway_checks(kubectl: Kubectl, plan: CheckPlan) -> list[CheckResult]:
    """One chat completion and one embedding through the gateway, for the first model of each kind."""
    chat = next((m for m in plan.models if m.kind == "chat"), None)
    embedding = next((m for m in plan.models if m.kind == "embedding"), None)
    forward = getattr(kubectl, "port_forward", None)
    if forward is None:
        return [CheckResult("gateway", False, "this kubectl cannot port-forward")]
    from components.specs.gateway import NAME, NAMESPACE, PORT

    results = []
    try:
        key = gateway_master_key(kubectl)
        with forward(NAMESPACE, f"svc/{NAME}", PORT) as local_port:
            base = f"http://127.0.0.1:{local_port}"
            for model, kind in ((chat, "chat"), (embedding, "embedding")):
                name = f"gateway {kind}"
                if model is None:
                    results.append(CheckResult(name, True, f"no {kind} model in the settings", skipped=True))
                    continue
                try:
                    if kind == "chat":
                        answer = call_gateway(base, key, "/v1/chat/completions", {
                            "model": model.name, "max_tokens": 8,
                            "messages": [{"role": "user", "content": "Reply with the word: ready"}]})
                        text = answer["choices"][0]["message"]["content"]
                        results.append(CheckResult(name, bool(text), f"{model.name} answered {text[:40]!r}"))
                    else:
                        answer = call_gateway(base, key, "/v1/embeddings", {"model": model.name, "input": "ready"})
                        vector = answer["data"][0]["embedding"]
                        results.append(CheckResult(name, len(vector) > 0, f"{model.name}: {len(vector)} dimensions"))
                except (KubectlError, KeyError, IndexError, TypeError) as exc:
                    results.append(CheckResult(name, False, f"{model.name}: {exc}"))
    except KubectlError as exc:
        results.append(CheckResult("gateway", False, str(exc)))
    return results


# --- waking a model at zero ----------------------------------------------------------------------
# A model at replicas.min 0 is at zero after every update (KEDA's initialCooldownPeriod defaults to 0, so a
# new ScaledObject scales its target to zero at its first poll) and Pulumi's await proves nothing about it.
# One request through the gateway is what wakes it in production (the gateway counts it, KEDA's
# gateway-demand trigger reads the count): the check sends exactly that and waits for the Deployment to
# have a Ready replica within the model's cold-start bound. When it does not, the step the replica is in
# names what failed, in the cold-start model's words (docs/cold-start.md): wake (KEDA has not scaled it
# from zero), node, image, weights (the fetch-weights init container), load (the server runs and its
# startup probe has not passed: load, compile, readiness).

#: Waiting reasons that mean the image does not arrive (kubelet's image manager).
_IMAGE_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


def _waiting(status: dict[str, Any]) -> str:
    return str(((status.get("state") or {}).get("waiting") or {}).get("reason") or "")


def starting_step(deployment: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[str, str]:
    """The cold-start step a woken model's replica is in (``ready`` when one is Ready), and what shows it."""
    if (deployment.get("status") or {}).get("readyReplicas", 0) >= 1:
        return "ready", "a replica is Ready"
    wanted = (deployment.get("spec") or {}).get("replicas", 0)
    if not wanted:
        return "wake", "KEDA has not scaled it from zero (replicas 0)"
    if not pods:
        return "wake", f"replicas {wanted} but no pod yet"
    pod = pods[0]
    name = pod.get("metadata", {}).get("name", "?")
    status = pod.get("status") or {}
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    if scheduled is None or scheduled.get("status") != "True":
        reason = (scheduled or {}).get("message") or (scheduled or {}).get("reason") or "not scheduled"
        return "node", f"pod {name} Pending: {reason}"
    for init in status.get("initContainerStatuses") or []:
        if init.get("ready"):
            continue
        reason = _waiting(init)
        if reason in _IMAGE_FAILURES:
            return "image", f"init container {init.get('name')}: {reason}"
        if reason == "PodInitializing" or (not reason and "running" not in (init.get("state") or {})):
            return "image", f"init container {init.get('name')}: {reason or 'not started'}"
        return "weights", f"init container {init.get('name')}: {reason or 'running'} (restarts {init.get('restartCount', 0)})"
    containers = status.get("containerStatuses") or []
    if not containers:
        return "image", f"pod {name}: no container started yet"
    for container in containers:
        reason = _waiting(container)
        if reason in _IMAGE_FAILURES or reason in ("ContainerCreating", "PodInitializing"):
            return "image", f"container {container.get('name')}: {reason}"
        if reason:
            return "load", f"container {container.get('name')}: {reason} (restarts {container.get('restartCount', 0)})"
        if not container.get("ready"):
            return "load", (f"container {container.get('name')} running, startup probe not passed yet "
                            "(load, compile, readiness)")
    return "load", f"pod {name} not Ready"


def wake_model(kubectl: Kubectl, model: ModelTarget, poller: Poller) -> CheckResult:
    """One request for ``model`` through the gateway, then its Deployment Ready within ``model.wake_bound_seconds``
    (a poller of its own, on ``poller``'s clock); a failure names the cold-start step the replica is stuck in."""
    name = f"model {model.name} wake"
    bound = model.wake_bound_seconds
    if bound is None:
        return CheckResult(name, True, "no cold-start bound known (the model lands on no pool)", skipped=True)
    forward = getattr(kubectl, "port_forward", None)
    if forward is None:
        return CheckResult(name, False, "step request: this kubectl cannot port-forward to the gateway")
    from components.specs.gateway import NAME, NAMESPACE, PORT

    try:
        key = gateway_master_key(kubectl)
        with forward(NAMESPACE, f"svc/{NAME}", PORT) as local_port:
            base = f"http://127.0.0.1:{local_port}"
            if model.kind == "embedding":
                call_gateway(base, key, "/v1/embeddings", {"model": model.name, "input": "wake"})
            else:
                call_gateway(base, key, "/v1/chat/completions", {
                    "model": model.name, "max_tokens": 1, "messages": [{"role": "user", "content": "wake"}]})
    except GatewayAnswerError:
        pass  # the gateway answered with an error (no healthy deployment yet, say) and counted the request
    except KubectlError as exc:
        return CheckResult(name, False, f"step request: {exc}")
    waiter = Poller(timeout=bound, interval=poller.interval, clock=poller.clock, sleep=poller.sleep)
    last: dict[str, str] = {}

    def ready() -> tuple[bool, str]:
        deployment = json.loads(kubectl("get", "deployment", model.name, "-n", model.namespace, "-o", "json"))
        pods = _items(kubectl, "pods", "-n", model.namespace, "-l", f"app.kubernetes.io/instance={model.name}")
        step, detail = starting_step(deployment, pods)
        last.update(step=step, detail=detail)
        if step == "ready":
            return True, f"woken by one request through the gateway; Ready within its cold-start bound of {bound} s"
        return False, f"step {step}: {detail}"

    result = waiter.until(name, ready)
    if result.ok:
        return result
    return CheckResult(name, False, f"not Ready within its cold-start bound of {bound} s; stuck at step "
                                    f"{last.get('step', 'wake')}: {last.get('detail', result.detail)}")


def run_checks(kubectl: Kubectl, plan: CheckPlan | GpuTarget, poller: Poller) -> list[CheckResult]:
    """The cluster's checks (:func:`cluster_checks`), then each of the gateway's Bedrock fallbacks
    invoked once and simulated as the gateway's role, whatever the cluster's state (a fallback that is not
    enabled, or that the role may not call, fails when it is needed)."""
    if isinstance(plan, GpuTarget):
        plan = CheckPlan(gpu_software_target("device-plugin"), {plan.pool: plan.purpose}, wait_for=plan)
    results = cluster_checks(kubectl, plan, poller)
    if plan.bedrock:
        results.extend(bedrock_checks(plan.bedrock, plan.bedrock_region))
        if plan.gateway_role_arn:
            results.extend(gateway_role_checks(plan.gateway_role_arn, plan.bedrock, plan.bedrock_region))
    return results


def cluster_checks(kubectl: Kubectl, plan: CheckPlan, poller: Poller) -> list[CheckResult]:
    """Nodes Ready, GPU nodes present, the installed GPU software's device plugin on each, allocatable
    GPUs (each needs the one before it: the first failure stops these), then ``nvidia-smi`` on every
    GPU pool, every warm model's health, every model at zero woken by one request through the gateway and
    Ready within its cold-start bound (:func:`wake_model`), and a chat completion and an embedding through
    the gateway."""
    steps: list[tuple[str, Callable[[], tuple[bool, str]]]] = [("nodes ready", lambda: nodes_ready(kubectl))]
    wait_for = plan.wait_for
    if wait_for is not None:
        steps.append(("gpu nodes present", lambda: gpu_nodes_present(kubectl, wait_for)))
    results: list[CheckResult] = []
    for name, probe in steps:
        results.append(poller.until(name, probe))
        if not results[-1].ok:
            return results
    try:
        targets, skipped = gpu_pool_targets(kubectl, plan.pools)
    except KubectlError as exc:
        results.append(CheckResult("gpu pools", False, str(exc)))
        return results
    results.extend(skipped)
    steps = []
    if not targets:
        results.append(CheckResult("gpu nodes present", True, "no GPU pool has a Ready node; "
                                   "GPU checks need a GPU node", skipped=True))
    else:
        pools = {t.pool for t in targets}
        if plan.software.provider != "none":
            steps.append((f"device plugin ready on gpu nodes ({plan.software.provider})",
                          lambda: device_plugin_ready(kubectl, plan.software, pools)))
        steps.append(("allocatable nvidia.com/gpu", lambda: gpus_allocatable(kubectl, pools)))
    if plan.software.provider == "none":
        results.append(CheckResult("device plugin ready on gpu nodes", True,
                                   "gpuSoftware.provider none: the AMI or Auto Mode runs it", skipped=True))
    for name, probe in steps:
        results.append(poller.until(name, probe))
        if not results[-1].ok:
            return results
    for target in targets:
        results.append(run_smoke_job(kubectl, target, poller))
    for model in plan.models:
        name = f"model {model.name} health"
        if not model.warm:
            if not plan.gateway:
                results.append(CheckResult(f"model {model.name} wake", True, "scaled to zero and no gateway to wake "
                                           "it through", skipped=True))
                continue
            results.append(wake_model(kubectl, model, poller))
            continue
        results.append(poller.until(name, functools.partial(model_healthy, kubectl, model)))
    if plan.gateway:
        results.extend(gateway_checks(kubectl, plan))
    return results
