"""Every series the emitted plan's queries read belongs to an exporter's contract
(:mod:`components.observability.metric_contract`), to the program's own recording rules, or to
Prometheus itself; every label they match, group or template on is one the contract gives those
series (or one Prometheus puts on every target). Queries are taken from the recorded dev and prod
plans: PrometheusRule exprs, the Grafana dashboards' panel targets (ConfigMaps), and KEDA's Prometheus
triggers. A rename (DCGM exporter 4.9's ``..._FB_FREE`` as bytes, say) fails here naming the metric.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from components.observability import metric_contract as mc
from tests.support.promql import reads, tokens

RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
#: Strings that look like PromQL over an exporter's series (used to prove no query is missed).
EXPORTER_SERIES = re.compile(
    r"\b(?:DCGM_[A-Z_]+|vllm:[a-z_:]+|litellm_[a-z_]+|kube_[a-z_]+|keda_[a-z_]+|cluster_autoscaler_[a-z_]+)\b"
)
#: A recording rule that writes a constant (a price generated from a catalog) reads no series by design.
CONSTANT = re.compile(r"vector\([0-9.e+-]+\)")
TEMPLATE_LABEL = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)")


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the plan, where it is, and the labels its alert templates use."""

    source: str
    where: str
    expr: str
    template_labels: tuple[str, ...] = ()


def carried_labels(item: dict, recorded: dict[str, set[str]]) -> set[str]:
    """Labels a recording rule's series may carry: its own ``labels``, the labels its expression makes
    or groups by, and those of every series it reads (contract labels, target labels, and what earlier
    rules record)."""
    what = reads(item["expr"])
    labels = set(item.get("labels") or {}) | what.made_labels | what.grouping_labels | set(mc.TARGET_LABELS)
    for selector in what.selectors:
        exporter = mc.exporter_of(selector.metric)
        labels |= set(exporter.metric(selector.metric).labels) if exporter else recorded.get(selector.metric, set())
    return labels


def plan_queries(plan) -> tuple[list[Query], dict[str, set[str]]]:
    """Every PromQL expression the plan emits, and the series its recording rules define with the labels
    each carries."""
    queries: list[Query] = []
    recorded: dict[str, set[str]] = {}
    for rule in plan.of_type(RULE):
        for group in rule.inputs["spec"]["groups"]:
            for item in group["rules"]:
                name = item.get("alert") or item.get("record")
                if "record" in item:
                    recorded[item["record"]] = recorded.get(item["record"], set()) | carried_labels(item, recorded)
                templates = " ".join(str(v) for v in (item.get("annotations") or {}).values())
                queries.append(
                    Query("PrometheusRule", f"{rule.name} {group['name']}/{name}", item["expr"], tuple(sorted(set(TEMPLATE_LABEL.findall(templates)))))
                )
    for config_map in plan.of_type(CONFIG_MAP):
        if (config_map.inputs["metadata"].get("labels") or {}).get("grafana_dashboard") != "1":
            continue
        for key, text in config_map.inputs["data"].items():
            for panel in json.loads(text)["panels"]:
                for target in panel["targets"]:
                    queries.append(Query("dashboard", f"{config_map.name} {key} panel {panel['title']!r}", target["expr"]))
    for scaled in plan.of_type(SCALED_OBJECT):
        for trigger in scaled.inputs["spec"]["triggers"]:
            if trigger["type"] == "prometheus":
                queries.append(Query("ScaledObject", f"{scaled.name} trigger {trigger['name']}", trigger["metadata"]["query"]))
    return queries, recorded


def violations(queries: list[Query], recorded: dict[str, set[str]]) -> list[str]:
    """What breaks the contract: series no contract holds, labels no contract gives. One line each,
    naming the series or label and where the query is."""
    found: list[str] = []
    for query in queries:
        what = reads(query.expr)
        if not what.selectors and not CONSTANT.fullmatch(query.expr):
            found.append(f"{query.where}: no series found in {query.expr!r}")
        labels: set[str] = set(mc.TARGET_LABELS) | what.made_labels
        for selector in what.selectors:
            exporter = mc.exporter_of(selector.metric)
            if exporter is None and selector.metric not in recorded and selector.metric not in mc.PROMETHEUS_SERIES:
                found.append(
                    f"{query.where}: series {selector.metric!r} is in no exporter's metric contract, "
                    "no recording rule of the program and not Prometheus's own"
                )
                continue
            own = set(exporter.metric(selector.metric).labels) if exporter else recorded.get(selector.metric, set())
            labels |= own
            for label in selector.matcher_labels:
                if not _allowed(label, own | set(mc.TARGET_LABELS)):
                    found.append(f"{query.where}: label {label!r} of {selector.metric!r} is not in its contract")
        # Recording rules keep the labels of what they read, make or group by (:func:`carried_labels`);
        # grouping labels are checked against what the query reads.
        for label in sorted(what.grouping_labels | set(query.template_labels)):
            if not _allowed(label, labels):
                found.append(f"{query.where}: label {label!r} is not given by any series the query reads")
    return found


def _allowed(label: str, labels: set[str]) -> bool:
    return label in labels or any(pattern.endswith("*") and label.startswith(pattern[:-1]) for pattern in labels)


def all_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in all_strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in all_strings(item)]
    return [value] if isinstance(value, str) else []


@pytest.fixture(scope="module", params=["dev", "prod"])
def emitted(request) -> tuple[object, list[Query], dict[str, set[str]]]:
    plan = request.getfixturevalue(f"{request.param}_plan")
    queries, recorded = plan_queries(plan)
    return plan, queries, recorded


def test_every_series_and_label_the_plan_queries_is_in_a_contract(emitted):
    _, queries, recorded = emitted
    assert violations(queries, recorded) == []


def test_the_queries_read_every_exporter_whose_series_they_use(emitted):
    """The extraction finds what a reader sees: each kind of query is there, and reads what it should."""
    _, queries, recorded = emitted
    by_exporter = {
        (mc.exporter_of(m).exporter if mc.exporter_of(m) else m)
        for q in queries
        for m in reads(q.expr).metrics
    }
    assert {"dcgm-exporter", "vllm", "litellm", "kube-state-metrics", "cluster-autoscaler", "up"} <= by_exporter
    assert set(recorded) >= {"llm_platform:gpus_allocatable:sum", "llm_platform:gpu_hours:30d"}
    assert {q.source for q in queries} == {"PrometheusRule", "dashboard", "ScaledObject"}


def test_no_exporter_series_is_queried_outside_what_is_checked(emitted):
    """Every string of the plan that names an exporter's series is a checked query, the gateway's
    LiteLLM config or the DCGM counters file (checked against the contract in the releases test)."""
    plan, queries, _ = emitted
    checked = {q.expr for q in queries}
    unchecked = []
    for resource in plan.resources:
        for text in all_strings(resource.inputs):
            if not EXPORTER_SERIES.search(text) or text in checked:
                continue
            if text.startswith("# DCGM field") or text.startswith("{\"panels\"") or "model_list:" in text:
                continue
            if text == "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE":
                continue
            unchecked.append(f"{resource.type} {resource.name}: {text[:120]!r}")
    assert unchecked == []


def test_a_renamed_metric_fails_naming_it(dev_plan):
    """DCGM exporter 4.9 reports the framebuffer in bytes under new names: a rule still reading the
    new name the contract does not hold fails, and the message names the metric and the rule."""
    queries, recorded = plan_queries(dev_plan)
    renamed = [Query(q.source, q.where, q.expr.replace("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE_BYTES"), q.template_labels) for q in queries]
    found = violations(renamed, recorded)
    assert found
    assert all("'DCGM_FI_DEV_FB_FREE_BYTES' is in no exporter's metric contract" in line for line in found)
    assert any("GpuFramebufferExhausted" in line for line in found)
    assert any("Framebuffer used per node and GPU" in line for line in found)


def test_a_renamed_label_fails_naming_it(dev_plan):
    """DCGM exporter 4.9 renames labels too: a query grouping by a label no contract gives fails."""
    queries, recorded = plan_queries(dev_plan)
    renamed = [Query(q.source, q.where, q.expr.replace("Hostname", "hostname"), q.template_labels) for q in queries]
    found = violations(renamed, recorded)
    assert any("label 'hostname' is not given by any series" in line and "GpuXidHardwareError" in line for line in found)


def test_a_vllm_rename_in_a_keda_trigger_fails_naming_it(dev_plan):
    queries, recorded = plan_queries(dev_plan)
    renamed = [Query(q.source, q.where, q.expr.replace("vllm:num_requests_waiting", "vllm:num_requests_queued"), q.template_labels) for q in queries]
    found = violations(renamed, recorded)
    assert any("trigger waiting-requests" in line and "'vllm:num_requests_queued'" in line for line in found)


def test_dashboard_units_are_the_contract_units(emitted):
    """A panel that shows one series as it is (no arithmetic) says that series' unit; DCGM 4.9's
    percent-to-ratio change would then fail here unless the panel moves too."""
    plan, _, _ = emitted
    checked = 0
    for config_map in plan.of_type(CONFIG_MAP):
        if (config_map.inputs["metadata"].get("labels") or {}).get("grafana_dashboard") != "1":
            continue
        for text in config_map.inputs["data"].values():
            for panel in json.loads(text)["panels"]:
                expr = panel["targets"][0]["expr"]
                what = reads(expr)
                own = [m for m in what.metrics if mc.exporter_of(m) and m != mc.KSM_NODE_LABELS]
                toks = tokens(expr)
                arithmetic = any(
                    t.text in {"+", "-", "/", "%", "^"} or (t.text == "*" and toks[i + 1].text not in {"on", "ignoring"})
                    for i, t in enumerate(toks)
                )
                if len(own) != 1 or arithmetic or what.functions & {"rate", "histogram_quantile"}:
                    continue
                unit = mc.exporter_of(own[0]).metric(own[0]).unit
                if unit in mc.GRAFANA_UNITS:
                    checked += 1
                    assert panel["fieldConfig"]["defaults"]["unit"] == mc.GRAFANA_UNITS[unit], panel["title"]
    assert checked >= 4


def test_the_tier_label_the_queries_use_is_made_by_the_vllm_pod_monitor(emitted):
    """``tier`` is no exporter's label: the program's PodMonitor copies it from the pod's label."""
    plan, queries, _ = emitted
    assert any("tier" in reads(q.expr).grouping_labels for q in queries)
    (monitor,) = [r for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor") if r.inputs["metadata"]["name"] == "vllm"]
    targets = {r["targetLabel"] for e in monitor.inputs["spec"]["podMetricsEndpoints"] for r in e.get("relabelings", [])}
    assert "tier" in targets


def test_every_node_and_pod_label_the_queries_use_is_allow_listed_for_kube_state_metrics(emitted):
    """kube-state-metrics exports a node or pod label only when ``--metric-labels-allowlist`` names it
    for that resource (docs/developer/cli-arguments.md): every ``label_*`` a query reads of
    ``kube_node_labels`` or ``kube_pod_labels`` must come from that resource's list, including the
    source labels ``label_replace`` copies from."""
    plan, queries, _ = emitted
    used: dict[str, set[str]] = {mc.KSM_NODE_LABELS: set(), mc.KSM_POD_LABELS: set()}
    for query in queries:
        what = reads(query.expr)
        for selector in what.selectors:
            if selector.metric in used:
                used[selector.metric] |= {label for label in selector.matcher_labels if label.startswith("label_")}
        for metric in used:
            if metric in query.expr:
                used[metric] |= {label for label in re.findall(r'"(label_[a-zA-Z0-9_]+)"', query.expr)}
    (stack,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("name") == "kube-prometheus-stack"]
    allow = stack.inputs["values"]["kube-state-metrics"]["metricLabelsAllowlist"]
    exported = {}
    for entry in allow:
        resource, names = entry.split("=", 1)
        exported[resource] = {mc.ksm_label(name) for name in names.strip("[]").split(",")}
    assert set(exported) == {"nodes", "pods"}
    assert used[mc.KSM_NODE_LABELS] == {"label_llm_platform_io_pool", "label_node_kubernetes_io_instance_type",
                                        "label_karpenter_sh_capacity_type", "label_llm_platform_io_capacity_type"}
    assert used[mc.KSM_POD_LABELS] == {"label_app_kubernetes_io_name", "label_app_kubernetes_io_instance",
                                       "label_llm_platform_io_tier"}
    assert used[mc.KSM_NODE_LABELS] <= exported["nodes"]
    assert used[mc.KSM_POD_LABELS] <= exported["pods"]
