"""kube-prometheus-stack and the DCGM exporters as EKS runs them, judged on what Helm's engine renders
from the program's values (charts from ``$LLM_PLATFORM_CHART_CACHE``; skipped with the reason when a
chart is not cached) and on the plan's dependency order.

- EKS does not expose kube-scheduler, kube-controller-manager or etcd (and its kube-proxy add-on
  binds metrics to 127.0.0.1): a ServiceMonitor or "down" rule for them fires forever
  (prometheus-community/helm-charts#4106).
- EKS Pod Identity injects credentials at pod admission only if the association exists then, so the
  release whose Alertmanager publishes to SNS must come after its association.
- The windowed XID count the alerts read must be in the counters file of whichever exporter runs.
"""

from __future__ import annotations

import pytest

from components import versions
from tests.components.test_helm_render import release_of, rendered

RELEASE = "kubernetes:helm.sh/v3:Release"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
HIDDEN_ON_EKS = ["kubeScheduler", "kubeControllerManager", "kubeEtcd", "kubeProxy"]
#: Jobs and alerts of those components in kube-prometheus-stack 88.5.3's templates.
HIDDEN_JOBS = {"kube-scheduler", "kube-controller-manager", "kube-etcd", "kube-proxy"}
HIDDEN_ALERTS = {"KubeSchedulerDown", "KubeControllerManagerDown", "KubeProxyDown", "etcdMembersDown", "etcdInsufficientMembers"}


def stack_release(plan):
    (release,) = [r for r in plan.of_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]
    return release


def test_stack_values_turn_off_what_eks_does_not_expose(stack_plan):
    values = stack_release(stack_plan).inputs["values"]
    assert {key: values.get(key) for key in HIDDEN_ON_EKS} == {key: {"enabled": False} for key in HIDDEN_ON_EKS}


def test_no_scrape_or_rule_for_what_eks_does_not_expose_is_rendered(stack_plan):
    objects = rendered(stack_plan, versions.KUBE_PROMETHEUS_STACK)
    monitors = [o["metadata"]["name"] for o in objects if o["kind"] == "ServiceMonitor"]
    assert not [m for m in monitors if any(job in m for job in HIDDEN_JOBS)], monitors
    # What EKS does expose is still scraped (the render is not empty for another reason).
    assert {"kube-prometheus-stack-apiserver", "kube-prometheus-stack-kubelet", "kube-prometheus-stack-coredns"} <= set(monitors)
    services = [o["metadata"]["name"] for o in objects if o["kind"] == "Service"]
    assert not [s for s in services if any(job in s for job in HIDDEN_JOBS)], services
    alerts = {
        rule["alert"]
        for o in objects if o["kind"] == "PrometheusRule"
        for group in o["spec"]["groups"] for rule in group["rules"] if "alert" in rule
    }
    assert "KubeAPIDown" in alerts and "KubeletDown" in alerts
    assert not alerts & HIDDEN_ALERTS, sorted(alerts & HIDDEN_ALERTS)


def test_prometheus_stack_waits_for_alertmanagers_pod_identity_association(prod_plan):
    """Prod's Alertmanager publishes to SNS with a Pod Identity role: the release (which creates the
    Alertmanager pods) depends on the association for the pod's own service account."""
    release = stack_release(prod_plan)
    objects = rendered(prod_plan, versions.KUBE_PROMETHEUS_STACK)
    (alertmanager,) = [o for o in objects if o["kind"] == "Alertmanager"]
    account = (alertmanager["metadata"]["namespace"], alertmanager["spec"]["serviceAccountName"])
    assert account == ("monitoring", "kube-prometheus-stack-alertmanager")
    (association,) = [
        a for a in prod_plan.of_type(ASSOCIATION) if (a.inputs["namespace"], a.inputs["serviceAccount"]) == account
    ]
    assert association.urn in release.dependencies, release.dependencies


def _counter_lines(csv: str) -> set[str]:
    return {line.split(",")[0].strip() for line in csv.splitlines() if line.strip() and not line.lstrip().startswith("#")}


def test_standalone_exporter_counts_xids_in_a_window(dev_plan):
    """dev runs the standalone dcgm-exporter chart: its counters ConfigMap (mounted over the file the
    container's ``-f`` argument reads) lists the windowed XID count, and the window is pinned."""
    objects = rendered(dev_plan, versions.DCGM_EXPORTER)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    counters_file = container["args"][container["args"].index("-f") + 1]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == counters_file]
    (volume,) = [v for v in daemonset["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]]
    (item,) = [i for i in volume["configMap"]["items"] if i["path"] == mount["subPath"]]
    counters = _counter_lines(config_map["data"][item["key"]])
    assert {"DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_POWER_USAGE"} <= counters
    assert {"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "value": "300000"} in container["env"]


def test_gpu_operator_exporter_counts_xids_in_a_window(prod_plan):
    """prod runs the GPU Operator: the chart creates the counters ConfigMap (key ``dcgm-metrics.csv``,
    which the operator mounts) and names it in the ClusterPolicy's dcgmExporter."""
    objects = rendered(prod_plan, versions.NVIDIA_GPU_OPERATOR)
    (policy,) = [o for o in objects if o["kind"] == "ClusterPolicy"]
    exporter = policy["spec"]["dcgmExporter"]
    name = exporter["config"]["name"]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name]
    assert "DCGM_EXP_XID_ERRORS_COUNT" in _counter_lines(config_map["data"]["dcgm-metrics.csv"])
    assert {"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", "value": "300000"} in exporter["env"]


@pytest.mark.parametrize("chart", [versions.DCGM_EXPORTER, versions.NVIDIA_GPU_OPERATOR])
def test_the_exporter_that_runs_is_the_one_configured(stack_plan, chart):
    """Each stack runs exactly one of the two exporters; the tests above cover the one it runs."""
    expected = {"dev": versions.DCGM_EXPORTER, "prod": versions.NVIDIA_GPU_OPERATOR}[stack_plan.stack]
    assert (release_of(stack_plan, chart) is not None) == (chart == expected)
