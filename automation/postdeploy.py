"""Post-deploy checks of a GPU cluster, and the clean-up that must precede ``pulumi destroy``.

Everything goes through a ``Kubectl`` callable (``kubectl(*args, input=...) -> stdout``) so tests
substitute a fake; the real one runs the ``kubectl`` binary against the stack's kubeconfig.
Scheduling values (toleration, node selector, GPU resource) come from ``components.contract``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from components import contract
from components.gpu_device_plugin import GpuDevicePluginArgs
from components import versions

#: ``nvidia-smi`` comes from the node's driver (the NVIDIA runtime mounts it); the image only needs
#: to set NVIDIA_DRIVER_CAPABILITIES=utility, which the CUDA base images do.
SMOKE_IMAGE = versions.CUDA_SMOKE_IMAGE
SMOKE_NAMESPACE = "llm-platform-smoke"
SMOKE_JOB = "gpu-smoke"
DEVICE_PLUGIN_NAMESPACE = GpuDevicePluginArgs().namespace
DEVICE_PLUGIN_SELECTOR = "app.kubernetes.io/name=nvidia-device-plugin"
POLL_SECONDS = 10.0


class KubectlError(Exception):
    """kubectl failed or is missing; the message names the command."""


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
class CheckResult:
    name: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass
class GpuTarget:
    """The GPU pool the smoke Job runs on and how many of its nodes the run asked for."""

    pool: str
    purpose: str
    nodes: int


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

    def until(self, name: str, probe: Callable[[], tuple]) -> CheckResult:
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


def gpu_nodes_present(kubectl: Kubectl, target: GpuTarget) -> tuple[bool, str]:
    gpu = [n for n in _gpu_nodes(_items(kubectl, "nodes")) if _ready(n.get("status", {}).get("conditions"))]
    if len(gpu) < target.nodes:
        return False, f"{len(gpu)} Ready GPU node(s) labelled {contract.GPU_PRESENT_LABEL}=true, want {target.nodes}"
    return True, f"{len(gpu)} Ready GPU node(s)"


def device_plugin_ready(kubectl: Kubectl) -> tuple[bool, str]:
    """A Ready device-plugin pod on every GPU node, and the DaemonSet fully rolled out."""
    gpu = {n["metadata"]["name"] for n in _gpu_nodes(_items(kubectl, "nodes"))}
    sets = _items(kubectl, "daemonsets", "-n", DEVICE_PLUGIN_NAMESPACE, "-l", DEVICE_PLUGIN_SELECTOR)
    if not sets:
        return False, f"no device plugin DaemonSet ({DEVICE_PLUGIN_SELECTOR}) in {DEVICE_PLUGIN_NAMESPACE}"
    pods = _items(kubectl, "pods", "-n", DEVICE_PLUGIN_NAMESPACE, "-l", DEVICE_PLUGIN_SELECTOR)
    covered = {
        p.get("spec", {}).get("nodeName")
        for p in pods
        if p.get("status", {}).get("phase") == "Running" and _ready(p.get("status", {}).get("conditions"))
    }
    missing = sorted(gpu - covered)
    status = sets[0].get("status", {})
    desired, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
    if missing:
        return False, f"no Ready device plugin pod on GPU node(s) {', '.join(missing)}"
    if ready < desired:
        return False, f"DaemonSet {sets[0]['metadata']['name']}: {ready}/{desired} pods ready"
    return True, f"device plugin Ready on {len(gpu)} GPU node(s) ({ready}/{desired} pods)"


def gpus_allocatable(kubectl: Kubectl) -> tuple[bool, str]:
    gpu = _gpu_nodes(_items(kubectl, "nodes"))
    empty = [n["metadata"]["name"] for n in gpu if _allocatable_gpus(n) <= 0]
    if not gpu or empty:
        return False, f"allocatable {contract.GPU_RESOURCE} is 0 on: {', '.join(empty) or 'no GPU nodes'}"
    return True, f"{sum(_allocatable_gpus(n) for n in gpu)} allocatable {contract.GPU_RESOURCE} on {len(gpu)} node(s)"


def smoke_job_manifests(target: GpuTarget, name: str = SMOKE_JOB) -> list[dict[str, Any]]:
    """A Namespace and a Job running ``nvidia-smi`` on one GPU, scheduled by the contract."""
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
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": SMOKE_NAMESPACE, "labels": {"app.kubernetes.io/name": SMOKE_JOB}},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 900,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": SMOKE_JOB}},
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
    documents = smoke_job_manifests(target)
    try:
        kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents, sort_keys=False))
    except KubectlError as exc:
        return CheckResult("gpu smoke job", False, str(exc))

    def finished() -> tuple[bool, str, bool]:
        status = json.loads(kubectl("get", "job", SMOKE_JOB, "-n", SMOKE_NAMESPACE, "-o", "json")).get("status", {})
        if status.get("succeeded", 0) >= 1:
            return True, "succeeded", True
        if status.get("failed", 0) >= 1:
            return False, "failed", True  # backoffLimit 0: a failed Job never recovers
        return False, "not finished", False

    result = poller.until("gpu smoke job", finished)
    try:
        logs = kubectl("logs", f"job/{SMOKE_JOB}", "-n", SMOKE_NAMESPACE)
    except KubectlError as exc:
        logs = f"(no logs: {exc})"
    if result.ok and "NVIDIA-SMI" not in logs:
        return CheckResult(result.name, False, "job succeeded but printed no nvidia-smi table")
    first = next((line.strip() for line in logs.splitlines() if "NVIDIA-SMI" in line or "error" in line.lower()), "")
    return CheckResult(result.name, result.ok, f"{result.detail}: {first}" if first else result.detail)


def run_checks(kubectl: Kubectl, target: GpuTarget, poller: Poller) -> list[CheckResult]:
    """Nodes Ready, GPU nodes present, device plugin on each, allocatable GPUs, then nvidia-smi.

    Stops at the first failure: each check needs the one before it.
    """
    steps: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
        ("nodes ready", lambda: nodes_ready(kubectl)),
        ("gpu nodes present", lambda: gpu_nodes_present(kubectl, target)),
        ("device plugin ready on gpu nodes", lambda: device_plugin_ready(kubectl)),
        ("allocatable nvidia.com/gpu", lambda: gpus_allocatable(kubectl)),
    ]
    results: list[CheckResult] = []
    for name, probe in steps:
        results.append(poller.until(name, probe))
        if not results[-1].ok:
            return results
    results.append(run_smoke_job(kubectl, target, poller))
    return results


def delete_load_balancers(kubectl: Kubectl, timeout: str = "10m") -> list[str]:
    """Delete every Service of type LoadBalancer and wait for it to go, so that no cloud load
    balancer or ENI outlives the VPC that ``pulumi destroy`` is about to delete."""
    services = _items(kubectl, "services", "--all-namespaces")
    doomed = [
        (s["metadata"]["namespace"], s["metadata"]["name"])
        for s in services
        if s.get("spec", {}).get("type") == "LoadBalancer"
    ]
    for namespace, name in doomed:
        kubectl("delete", "service", name, "--namespace", namespace, "--wait=true", f"--timeout={timeout}")
    return [f"{namespace}/{name}" for namespace, name in doomed]
