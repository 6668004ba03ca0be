"""Pod Security ``restricted``: the port's checks on violating and compliant pods, then every pod
template the program writes, in both stacks."""

from __future__ import annotations

import copy

import pytest

from tests.support import pod_security

COMPLIANT = {
    "metadata": {"annotations": {}},
    "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [
            {"name": "init", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
        ],
        "containers": [
            {
                "name": "app",
                "ports": [{"containerPort": 80}],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                },
            }
        ],
        "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "x"}}],
    },
}


def _with(path: str, value):
    """COMPLIANT with one field (dotted path; ``init``/``app`` select the container) set to ``value``."""
    pod = copy.deepcopy(COMPLIANT)
    keys = path.split(".")
    node = pod
    for key in keys[:-1]:
        if key == "app":
            node = node["containers"][0]
        elif key == "init":
            node = node["initContainers"][0]
        else:
            node = node.setdefault(key, {})
    node[keys[-1]] = value
    return pod


def _without(path: str):
    pod = copy.deepcopy(COMPLIANT)
    keys = path.split(".")
    node = pod
    for key in keys[:-1]:
        node = node["containers"][0] if key == "app" else node["initContainers"][0] if key == "init" else node[key]
    del node[keys[-1]]
    return pod


VIOLATIONS = {
    "host-namespaces": [_with("spec.hostNetwork", True), _with("spec.hostPID", True), _with("spec.hostIPC", True)],
    "privileged": [_with("spec.app.securityContext.privileged", True)],
    "host-process": [_with("spec.securityContext.windowsOptions", {"hostProcess": True})],
    "host-path-volumes": [_with("spec.volumes", [{"name": "h", "hostPath": {"path": "/"}}])],
    "host-ports": [_with("spec.app.ports", [{"containerPort": 80, "hostPort": 80}])],
    "apparmor": [
        _with("metadata.annotations", {"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}),
        _with("spec.app.securityContext.appArmorProfile", {"type": "Unconfined"}),
    ],
    "selinux": [_with("spec.securityContext.seLinuxOptions", {"type": "spc_t"}), _with("spec.app.securityContext.seLinuxOptions", {"user": "root"})],
    "proc-mount": [_with("spec.app.securityContext.procMount", "Unmasked")],
    "sysctls": [_with("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}])],
    "restricted-volume-types": [_with("spec.volumes", [{"name": "n", "nfs": {"server": "x", "path": "/"}}])],
    "allow-privilege-escalation": [_without("spec.init.securityContext.allowPrivilegeEscalation"), _with("spec.app.securityContext.allowPrivilegeEscalation", True)],
    "run-as-non-root": [_without("spec.securityContext.runAsNonRoot"), _with("spec.app.securityContext.runAsNonRoot", False)],
    "run-as-user": [_with("spec.securityContext.runAsUser", 0), _with("spec.app.securityContext.runAsUser", 0)],
    "seccomp": [_without("spec.securityContext.seccompProfile"), _with("spec.app.securityContext.seccompProfile", {"type": "Unconfined"})],
    "capabilities": [_with("spec.app.securityContext.capabilities", {"drop": ["NET_RAW"]}), _with("spec.app.securityContext.capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]})],
}


def test_compliant_pod_passes_every_check():
    assert pod_security.violations(COMPLIANT) == {}


def test_every_check_has_violating_cases():
    assert set(VIOLATIONS) == set(pod_security.CHECKS)


@pytest.mark.parametrize("check,pod", [(name, pod) for name, pods in VIOLATIONS.items() for pod in pods])
def test_each_violation_fails_its_check_only(check, pod):
    # A hostPath volume fails baseline's hostPath check and restricted's volume types, as upstream.
    also = {"restricted-volume-types"} if check == "host-path-volumes" else set()
    assert set(pod_security.violations(pod)) == {check} | also


def test_container_level_settings_satisfy_pod_level_rules():
    pod = _without("spec.securityContext.seccompProfile")
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        container["securityContext"]["seccompProfile"] = {"type": "Localhost", "localhostProfile": "p.json"}
    assert pod_security.violations(pod) == {}


def test_safe_sysctl_and_allowed_selinux_type_pass():
    pod = _with("spec.securityContext.sysctls", [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}])
    pod["spec"]["securityContext"]["seLinuxOptions"] = {"type": "container_t", "level": "s0:c1,c2"}
    assert pod_security.violations(pod) == {}


WORKLOAD_TYPES = {
    "kubernetes:apps/v1:Deployment": "Deployment",
    "kubernetes:apps/v1:StatefulSet": "StatefulSet",
    "kubernetes:apps/v1:DaemonSet": "DaemonSet",
    "kubernetes:batch/v1:Job": "Job",
    "kubernetes:batch/v1:CronJob": "CronJob",
    "kubernetes:core/v1:Pod": "Pod",
}


def _plan_pods(plan):
    for type_, kind in WORKLOAD_TYPES.items():
        for resource in plan.of_type(type_):
            for pod in pod_security.pod_templates(kind, resource.inputs):
                yield resource.inputs["metadata"]["name"], pod


def test_every_pod_the_program_writes_is_restricted(stack_plan):
    pods = list(_plan_pods(stack_plan))
    assert {name for name, _ in pods} >= {"llm-gateway"} and len(pods) >= 2
    failures = {name: found for name, pod in pods if (found := pod_security.violations(pod))}
    assert failures == {}


def test_fetcher_and_servers_run_with_read_only_root_and_no_api_token(prod_plan):
    for name, pod in _plan_pods(prod_plan):
        assert pod["spec"]["automountServiceAccountToken"] is False, name
        for container in pod_security.containers(pod["spec"]):
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, (name, container["name"])
    init = sorted({(name, c["name"]) for name, pod in _plan_pods(prod_plan) for c in pod["spec"].get("initContainers", [])})
    # Downloaded models fetch their weights first; the image pre-pull's only init container pulls the image.
    assert ("vllm-image", "pull") in init
    fetchers = [entry for entry in init if entry != ("vllm-image", "pull")]
    assert fetchers and all(container == "fetch-weights" for _, container in fetchers)


def test_serving_and_gateway_namespaces_enforce_restricted(stack_plan):
    namespaces = {r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels", {}) for r in stack_plan.of_type("kubernetes:core/v1:Namespace")}
    owned = [ns for ns in namespaces if ns.startswith("serving-") or ns == "llm-gateway"]
    assert len(owned) >= 2
    for ns in owned:
        assert namespaces[ns]["pod-security.kubernetes.io/enforce"] == "restricted", ns


def test_smoke_test_pod_of_the_automation_is_restricted():
    """The GPU smoke-test Job of ``python -m automation test`` is a pod the program writes too."""
    from automation.driver.postdeploy import GpuTarget, smoke_job_manifests

    (job,) = [d for d in smoke_job_manifests(GpuTarget(pool="inference", purpose="inference", nodes=1)) if d["kind"] == "Job"]
    (pod,) = pod_security.pod_templates("Job", job)
    assert pod_security.violations(pod) == {}
