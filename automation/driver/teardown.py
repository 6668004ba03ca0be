"""What must go before ``pulumi destroy``: cloud resources the cluster made that Pulumi does not own.

Karpenter's nodes and the AWS load balancers of Services and Ingresses are created by controllers
in the cluster, not by the program; left running they keep ENIs and security groups in the VPC,
and the VPC's deletion fails with DependencyViolation. So, in order:

1. Karpenter NodePools, then NodeClaims: deleting a NodePool makes Karpenter drain and terminate
   the nodes it launched; the NodeClaim's termination finalizer holds the object until the
   instance is gone, so waiting for the NodeClaims is waiting for the instances.
2. Ingresses, then Services of type LoadBalancer: their finalizers (``ingress.k8s.aws/resources``,
   ``service.k8s.aws/resources`` of the AWS Load Balancer Controller, or the in-tree
   ``service.kubernetes.io/load-balancer-cleanup``) hold the object until the load balancer is
   deleted, so ``kubectl delete --wait`` returns when the load balancer is gone.
3. Whatever is still there is listed, so the operator knows what may block the VPC.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from automation.driver.postdeploy import Kubectl, KubectlError

NODEPOOLS = "nodepools.karpenter.sh"
NODECLAIMS = "nodeclaims.karpenter.sh"
DEFAULT_TIMEOUT = "10m"


@dataclass
class TeardownReport:
    deleted: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"deleted": self.deleted, "leftovers": self.leftovers, "warnings": self.warnings}


def _list(kubectl: Kubectl, resource: str, *, namespaced: bool = True) -> list[dict[str, Any]] | None:
    """Objects of ``resource``, or None when the cluster has no such type (no Karpenter CRDs)."""
    args = ["get", resource] + (["--all-namespaces"] if namespaced else []) + ["-o", "json"]
    try:
        return json.loads(kubectl(*args)).get("items", [])
    except KubectlError as exc:
        if "doesn't have a resource type" in str(exc) or "NotFound" in str(exc):
            return None
        raise


def _name(obj: dict[str, Any], kind: str) -> str:
    meta = obj["metadata"]
    return f"{kind}/{meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{kind}/{meta['name']}"


def _load_balancers(kubectl: Kubectl) -> list[tuple[str, dict[str, Any]]]:
    found = [("ingress", o) for o in _list(kubectl, "ingresses") or []]
    services = _list(kubectl, "services") or []
    found += [("service", o) for o in services if o.get("spec", {}).get("type") == "LoadBalancer"]
    return found


def _delete(kubectl: Kubectl, kind: str, obj: dict[str, Any], timeout: str, report: TeardownReport) -> None:
    meta = obj["metadata"]
    args = ["delete", kind, meta["name"]] + (["--namespace", meta["namespace"]] if meta.get("namespace") else [])
    try:
        kubectl(*args, "--wait=true", f"--timeout={timeout}")
        report.deleted.append(_name(obj, kind))
    except KubectlError as exc:
        report.warnings.append(f"{_name(obj, kind)}: {exc}")


def prepare_destroy(kubectl: Kubectl, timeout: str = DEFAULT_TIMEOUT) -> TeardownReport:
    """Karpenter nodes, then Ingresses and LoadBalancer Services deleted and awaited; leftovers listed."""
    report = TeardownReport()
    pools = _list(kubectl, NODEPOOLS, namespaced=False)
    if pools is not None:
        for pool in pools:
            _delete(kubectl, "nodepool.karpenter.sh", pool, timeout, report)
        for claim in _list(kubectl, NODECLAIMS, namespaced=False) or []:
            _delete(kubectl, "nodeclaim.karpenter.sh", claim, timeout, report)
    for kind, obj in _load_balancers(kubectl):
        _delete(kubectl, kind, obj, timeout, report)
    remaining = [_name(o, k) for k, o in _load_balancers(kubectl)]
    if pools is not None:
        remaining += [_name(o, "nodeclaim.karpenter.sh") for o in _list(kubectl, NODECLAIMS, namespaced=False) or []]
    report.leftovers = remaining
    return report
