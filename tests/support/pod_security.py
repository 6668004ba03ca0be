"""Pod Security Standards, ``restricted`` level (which includes ``baseline``), over a pod spec.

A port of the checks of kubernetes/pod-security-admission (policy/check_*.go) for the latest policy
version, written here because PyPI has no maintained implementation. Each check returns the
reasons a pod fails it (empty when it passes); :func:`violations` runs them all. Checks read only
the pod spec and pod metadata (AppArmor annotations), as admission does for a template.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Pod = dict[str, Any]  # {"metadata": {...}, "spec": {...}}

#: restricted: volume types a pod may use (check_restrictedVolumes.go).
ALLOWED_VOLUME_TYPES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret", "image"}
)
#: baseline: sysctls in the safe set (check_sysctls.go, newest policy version).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
#: baseline: SELinux types a pod may set (check_seLinuxOptions.go).
ALLOWED_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_VOLUME_META_KEYS = frozenset({"name"})


def containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container admission looks at: init, regular and ephemeral."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _ctx(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def host_namespaces(pod: Pod) -> list[str]:
    spec = pod["spec"]
    return [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]


def privileged(pod: Pod) -> list[str]:
    return [f"container {c['name']} is privileged" for c in containers(pod["spec"]) if _ctx(c).get("privileged")]


def host_process(pod: Pod) -> list[str]:
    spec = pod["spec"]
    found = []
    if ((spec.get("securityContext") or {}).get("windowsOptions") or {}).get("hostProcess"):
        found.append("pod sets windowsOptions.hostProcess")
    found += [
        f"container {c['name']} sets windowsOptions.hostProcess"
        for c in containers(spec)
        if (_ctx(c).get("windowsOptions") or {}).get("hostProcess")
    ]
    return found


def host_path_volumes(pod: Pod) -> list[str]:
    return [f"volume {v['name']} is hostPath" for v in pod["spec"].get("volumes") or [] if "hostPath" in v]


def host_ports(pod: Pod) -> list[str]:
    return [
        f"container {c['name']} uses hostPort {p['hostPort']}"
        for c in containers(pod["spec"])
        for p in c.get("ports") or []
        if p.get("hostPort")
    ]


def app_armor(pod: Pod) -> list[str]:
    found = []
    allowed_types = {"RuntimeDefault", "Localhost"}
    for key, value in ((pod.get("metadata") or {}).get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/"):
            if not (value == "runtime/default" or value.startswith("localhost/")):
                found.append(f"annotation {key}={value}")
    profiles = [("pod", (pod["spec"].get("securityContext") or {}).get("appArmorProfile"))]
    profiles += [(f"container {c['name']}", _ctx(c).get("appArmorProfile")) for c in containers(pod["spec"])]
    found += [f"{who} sets appArmorProfile {p.get('type')}" for who, p in profiles if p and p.get("type") not in allowed_types]
    return found


def selinux(pod: Pod) -> list[str]:
    found = []
    options = [("pod", (pod["spec"].get("securityContext") or {}).get("seLinuxOptions"))]
    options += [(f"container {c['name']}", _ctx(c).get("seLinuxOptions")) for c in containers(pod["spec"])]
    for who, opts in options:
        if not opts:
            continue
        if opts.get("type", "") not in ALLOWED_SELINUX_TYPES:
            found.append(f"{who} sets seLinuxOptions.type {opts['type']}")
        if opts.get("user") or opts.get("role"):
            found.append(f"{who} sets seLinuxOptions user/role")
    return found


def proc_mount(pod: Pod) -> list[str]:
    return [
        f"container {c['name']} sets procMount {_ctx(c)['procMount']}"
        for c in containers(pod["spec"])
        if _ctx(c).get("procMount") not in (None, "Default")
    ]


def sysctls(pod: Pod) -> list[str]:
    found = (pod["spec"].get("securityContext") or {}).get("sysctls") or []
    return [f"sysctl {s['name']} is not in the safe set" for s in found if s["name"] not in SAFE_SYSCTLS]


def volume_types(pod: Pod) -> list[str]:
    found = []
    for volume in pod["spec"].get("volumes") or []:
        kinds = set(volume) - _VOLUME_META_KEYS
        bad = kinds - ALLOWED_VOLUME_TYPES
        if bad:
            found.append(f"volume {volume['name']} has type {', '.join(sorted(bad))}")
    return found


def privilege_escalation(pod: Pod) -> list[str]:
    return [
        f"container {c['name']} does not set allowPrivilegeEscalation=false"
        for c in containers(pod["spec"])
        if _ctx(c).get("allowPrivilegeEscalation") is not False
    ]


def run_as_non_root(pod: Pod) -> list[str]:
    pod_level = (pod["spec"].get("securityContext") or {}).get("runAsNonRoot")
    found = []
    if pod_level is False:
        found.append("pod sets runAsNonRoot=false")
    for c in containers(pod["spec"]):
        value = _ctx(c).get("runAsNonRoot")
        if value is False:
            found.append(f"container {c['name']} sets runAsNonRoot=false")
        elif value is None and pod_level is not True:
            found.append(f"container {c['name']} does not set runAsNonRoot=true (nor does the pod)")
    return found


def run_as_user(pod: Pod) -> list[str]:
    found = []
    if (pod["spec"].get("securityContext") or {}).get("runAsUser") == 0:
        found.append("pod sets runAsUser=0")
    found += [f"container {c['name']} sets runAsUser=0" for c in containers(pod["spec"]) if _ctx(c).get("runAsUser") == 0]
    return found


def seccomp(pod: Pod) -> list[str]:
    """restricted: RuntimeDefault or Localhost, at pod level or on every container; never Unconfined."""
    allowed = {"RuntimeDefault", "Localhost"}
    pod_type = ((pod["spec"].get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    found = []
    if pod_type is not None and pod_type not in allowed:
        found.append(f"pod sets seccompProfile {pod_type}")
    for c in containers(pod["spec"]):
        own = (_ctx(c).get("seccompProfile") or {}).get("type")
        if own is not None and own not in allowed:
            found.append(f"container {c['name']} sets seccompProfile {own}")
        elif own is None and pod_type is None:
            found.append(f"container {c['name']} has no seccompProfile (nor does the pod)")
    return found


def capabilities(pod: Pod) -> list[str]:
    found = []
    for c in containers(pod["spec"]):
        caps = _ctx(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"container {c['name']} does not drop ALL capabilities")
        extra = [cap for cap in caps.get("add") or [] if cap != "NET_BIND_SERVICE"]
        if extra:
            found.append(f"container {c['name']} adds {', '.join(extra)}")
    return found


CHECKS: dict[str, Callable[[Pod], list[str]]] = {
    # baseline
    "host-namespaces": host_namespaces,
    "privileged": privileged,
    "host-process": host_process,
    "host-path-volumes": host_path_volumes,
    "host-ports": host_ports,
    "apparmor": app_armor,
    "selinux": selinux,
    "proc-mount": proc_mount,
    "sysctls": sysctls,
    # restricted
    "restricted-volume-types": volume_types,
    "allow-privilege-escalation": privilege_escalation,
    "run-as-non-root": run_as_non_root,
    "run-as-user": run_as_user,
    "seccomp": seccomp,
    "capabilities": capabilities,
}


def violations(pod: Pod) -> dict[str, list[str]]:
    """Failed checks of the ``restricted`` level, by check name."""
    result = {name: check(pod) for name, check in CHECKS.items()}
    return {name: reasons for name, reasons in result.items() if reasons}


def pod_templates(kind: str, body: dict[str, Any]) -> list[Pod]:
    """The pod (template) of a workload object, as admission evaluates it."""
    spec = body.get("spec") or {}
    if kind == "Pod":
        return [{"metadata": body.get("metadata") or {}, "spec": spec}]
    if kind == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template = spec.get("template")
    return [template] if template else []
