"""Every pod that gets AWS credentials from Pod Identity is created after its association.

EKS Pod Identity's webhook injects the credential variables and the token volume when a pod is
admitted, and only if an association for the pod's service account exists then; associations are
eventually consistent. A pod admitted first runs without credentials until it is recreated, and a
second ``pulumi up`` changes nothing (docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html;
PLATFORM.md, "How the engines differ"). The textbook ("the role exists, the pod will get it") passes;
the engine does not. So, on the recorded plans: for each ``PodIdentityAssociation`` (namespace +
service account), every workload whose pods run as that service account depends on it, directly or
through the recorded dependencies of what it depends on. Workloads are the plan's Deployments,
StatefulSets, DaemonSets, Jobs and CronJobs, and the Helm releases whose rendered objects (Helm's own
engine on the pinned chart, ``tests/support/helm_render.py``) name the service account.
"""

from __future__ import annotations

from typing import Any

import pytest

from components import versions
from tests.support import helm_render

ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
RELEASE = "kubernetes:helm.sh/v3:Release"
WORKLOAD_TYPES = {
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:batch/v1:Job",
    "kubernetes:batch/v1:CronJob",
}

#: The associations of each stack (a new one must be added here, so it is covered below).
ASSOCIATIONS = {
    "dev": [
        "karpenter-controller",
        "cluster-autoscaler-controller",
        "tier-interactive-llama-3-1-8b-instruct-weights",
        "tier-batch-qwen2-5-7b-instruct-weights",
        "gateway-bedrock",
    ],
    "prod": [
        "karpenter-controller",
        "cluster-autoscaler-controller",
        "observability-alertmanager-sns",
        "tier-interactive-llama-3-1-70b-instruct-awq-weights",
        "tier-embedding-bge-m3-weights",
        "tier-batch-qwen2-5-32b-instruct-weights",
        "gateway-bedrock",
    ],
}
#: Known not ordered on this branch; the fix lives in components/observability (another branch). Strict:
#: once fixed, the case XPASSes and fails, and this mark must go.
NOT_YET_ORDERED: dict[tuple[str, str], str] = {}


def _cases() -> list[Any]:
    cases = []
    for stack, names in ASSOCIATIONS.items():
        for name in names:
            reason = NOT_YET_ORDERED.get((stack, name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(stack, name, marks=marks, id=f"{stack}-{name}"))
    return cases


@pytest.fixture
def plans(dev_plan, prod_plan):
    return {"dev": dev_plan, "prod": prod_plan}


def test_the_listed_associations_are_the_plans(stack_plan):
    assert sorted(a.name for a in stack_plan.of_type(ASSOCIATION)) == sorted(ASSOCIATIONS[stack_plan.stack])


def _pod_service_account(inputs: dict[str, Any]) -> str:
    spec = inputs["spec"]
    template = spec["jobTemplate"]["spec"]["template"] if "jobTemplate" in spec else spec["template"]
    return template["spec"].get("serviceAccountName") or "default"


def _service_accounts_named(obj: Any) -> set[str]:
    """Every ``serviceAccountName`` anywhere in a rendered object: pod templates, and the pods the
    Prometheus operator creates from ``Prometheus``/``Alertmanager`` objects."""
    found: set[str] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "serviceAccountName" and isinstance(value, str):
                found.add(value)
            else:
                found |= _service_accounts_named(value)
    elif isinstance(obj, list):
        for item in obj:
            found |= _service_accounts_named(item)
    return found


def _pinned_chart(inputs: dict[str, Any]) -> versions.HelmChart:
    charts = [c for c in vars(versions).values() if isinstance(c, versions.HelmChart)]
    (chart,) = [c for c in charts if inputs["chart"] in (c.chart, c.ref) and inputs["version"] == c.version]
    return chart


def _release_runs_as(plan, release, namespace: str, account: str) -> bool:
    chart = _pinned_chart(release.inputs)
    reason = helm_render.missing_reason(chart)
    if reason:
        pytest.skip(reason)
    (cluster,) = plan.of_type("eks:index:Cluster")
    objects = helm_render.render(
        chart, release.inputs.get("values", {}), release_name=release.inputs["name"],
        namespace=release.inputs["namespace"], kube_version=cluster.inputs["version"],
    )
    return any(
        (obj.get("metadata") or {}).get("namespace", release.inputs["namespace"]) == namespace
        and account in _service_accounts_named(obj.get("spec"))
        for obj in objects
    )


def workloads_running_as(plan, namespace: str, account: str) -> list:
    found = [
        r for r in plan.resources
        if r.type in WORKLOAD_TYPES and r.inputs["metadata"].get("namespace") == namespace and _pod_service_account(r.inputs) == account
    ]
    found += [
        r for r in plan.of_type(RELEASE)
        if r.inputs["namespace"] == namespace and _release_runs_as(plan, r, namespace, account)
    ]
    return found


def transitive_dependencies(plan, resource) -> set[str]:
    by_urn = {r.urn: r for r in plan.resources}
    seen: set[str] = set()
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn in seen:
            continue
        seen.add(urn)
        if urn in by_urn:
            todo.extend(by_urn[urn].dependencies)
    return seen


@pytest.mark.parametrize(("stack", "name"), _cases())
def test_every_workload_using_an_association_is_created_after_it(plans, stack, name):
    plan = plans[stack]
    association = plan.named(ASSOCIATION, name)
    namespace, account = association.inputs["namespace"], association.inputs["serviceAccount"]
    workloads = workloads_running_as(plan, namespace, account)
    assert workloads, f"no workload of the plan runs as {namespace}/{account}"
    for workload in workloads:
        assert association.urn in transitive_dependencies(plan, workload), (
            f"{workload.type} {workload.name} runs as {namespace}/{account} but is not ordered after {name}"
        )


def test_the_walk_follows_recorded_dependencies_only(dev_plan):
    """The helper itself: a Namespace depends on nothing the gateway's association needs."""
    association = dev_plan.named(ASSOCIATION, "gateway-bedrock")
    (namespace,) = [r for r in dev_plan.of_type("kubernetes:core/v1:Namespace") if r.name == "gateway-namespace"]
    assert association.urn not in transitive_dependencies(dev_plan, namespace)
    assert association.urn in transitive_dependencies(dev_plan, dev_plan.named("kubernetes:apps/v1:Deployment", "gateway-deployment"))
