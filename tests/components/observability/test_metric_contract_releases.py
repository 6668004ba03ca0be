"""The metric contract against what each pinned release defines, and the bump guard.

- LiteLLM: the installed proxy (``.venv-gateway``, the release of ``versions.LITELLM_IMAGE``) is asked,
  in a subprocess, which metrics its ``prometheus`` callback registers and with which labels.
- DCGM exporter: the counters file the program ships (read from the plan) enables every field the
  contract uses, with its type and unit; the field exists in the pinned release's default counters
  (``metric_contract_data/dcgm-exporter.json``, read from the tag) with the same unit.
- vLLM, KEDA, kube-state-metrics, Cluster Autoscaler: names, types, labels and units as recorded from
  the pinned releases' sources (``metric_contract_data/*.json``, each with its repository, tag and files);
  the autoscaler's per-group series exist only with the flag the plan must set.
- Bump guard: each contract's release equals the pin; moving a pin without re-checking fails naming
  the exporter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from automation.offline.plan import ROOT
from components import versions
from components.observability import metric_contract as mc
from tests.support.helm_render import cached_chart
from tests.support.litellm_proxy import GATEWAY_VENV, require_litellm
from tests.support.needs import missing

DATA = Path(__file__).parent / "metric_contract_data"
REQUIREMENTS_GATEWAY = ROOT / "requirements-gateway.txt"
COUNTERS_HEADER = "# DCGM field, Prometheus metric type"
#: How each contract unit is written in a DCGM counters file's help text ("(in MiB)").
DCGM_HELP_UNITS = {mc.MIB: "MiB", mc.PERCENT: "%", mc.WATT: "W", mc.COUNT: None}


def recorded(exporter: str) -> dict:
    return json.loads((DATA / f"{exporter}.json").read_text())


# --- Bump guard -------------------------------------------------------------------------------------


def kube_state_metrics_release(chart_archive: Path) -> str:
    """kube-state-metrics as kube-prometheus-stack ships it: its subchart's appVersion."""
    with tarfile.open(chart_archive) as archive:
        parent = yaml.safe_load(archive.extractfile("kube-prometheus-stack/Chart.yaml").read())
        (dependency,) = [d for d in parent["dependencies"] if d["name"] == "kube-state-metrics"]
        sub = yaml.safe_load(archive.extractfile("kube-prometheus-stack/charts/kube-state-metrics/Chart.yaml").read())
    assert sub["version"] == dependency["version"]
    return f"v{sub['appVersion']}"


def litellm_requirement() -> str:
    (pin,) = [line for line in REQUIREMENTS_GATEWAY.read_text().splitlines() if line.startswith("litellm==")]
    return "v" + pin.removeprefix("litellm==")


def pinned_releases() -> dict[str, tuple[str, ...]]:
    """What each exporter runs as, per the pins (several pins where two files pin one release)."""
    archive = cached_chart(versions.KUBE_PROMETHEUS_STACK)
    if not archive.is_file():
        missing(f"{archive} missing: the pinned kube-prometheus-stack chart names the kube-state-metrics release")
    return {
        "dcgm-exporter": (versions.DCGM_EXPORTER_IMAGE.tag,),
        "vllm": (versions.VLLM_IMAGE.tag,),
        "litellm": (versions.LITELLM_IMAGE.tag, litellm_requirement()),
        "keda": (versions.KEDA.version,),
        "kube-state-metrics": (kube_state_metrics_release(archive),),
        "cluster-autoscaler": (versions.CLUSTER_AUTOSCALER_IMAGES[versions.DEFAULT_KUBERNETES_VERSION].tag,),
    }


def stale_contracts(pins: dict[str, tuple[str, ...]]) -> list[str]:
    """One line per exporter whose contract was checked against another release than the pin."""
    return [
        f"{contract.exporter}: metric contract checked against {contract.release}, pinned {pin} "
        f"({contract.pinned_by}); re-check the contract (docs/metric-contracts.md)"
        for contract in mc.EXPORTERS
        for pin in pins[contract.exporter]
        if pin != contract.release
    ]


def test_every_contract_was_checked_against_the_pinned_release():
    assert stale_contracts(pinned_releases()) == []


def test_the_pins_are_read_from_where_they_are_set():
    pins = pinned_releases()
    assert pins == {
        "dcgm-exporter": ("4.5.3-4.8.2",),
        "vllm": ("v0.33.0",),
        "litellm": ("v1.110.2", "v1.110.2"),
        "keda": ("2.20.2",),
        "kube-state-metrics": ("v2.20.0",),
        "cluster-autoscaler": ("v1.35.2",),
    }


def test_a_bumped_pin_fails_naming_the_exporter():
    pins = {**pinned_releases(), "dcgm-exporter": ("4.6.0-4.9.0",)}
    (line,) = stale_contracts(pins)
    assert line.startswith("dcgm-exporter: metric contract checked against 4.5.3-4.8.2, pinned 4.6.0-4.9.0")


def test_a_bumped_gateway_requirement_alone_fails_too():
    pins = {**pinned_releases(), "litellm": (versions.LITELLM_IMAGE.tag, "v1.110.0")}
    assert [line.split(":")[0] for line in stale_contracts(pins)] == ["litellm"]


def test_the_recorded_upstream_facts_are_of_the_contract_release():
    for contract in (mc.DCGM_EXPORTER, mc.VLLM, mc.KEDA, mc.KUBE_STATE_METRICS, mc.CLUSTER_AUTOSCALER):
        data = recorded(contract.exporter)
        assert data["release"].lstrip("v") == contract.release.lstrip("v"), contract.exporter
        # kubernetes/autoscaler tags each component's releases with its name
        tag = data["source"]["tag"].removeprefix("cluster-autoscaler-")
        assert tag.lstrip("v") == contract.release.lstrip("v"), contract.exporter


# --- DCGM exporter ----------------------------------------------------------------------------------


def shipped_counters(plan) -> list[str]:
    """The DCGM counters files the plan ships (standalone chart's customMetrics or the GPU Operator's
    counters ConfigMap data)."""
    found: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value.startswith(COUNTERS_HEADER):
            found.append(value)

    for resource in plan.resources:
        walk(resource.inputs)
    return found


def counters(text: str) -> dict[str, tuple[str, str]]:
    """Enabled fields of a counters file: type and help text, as dcgm-exporter reads it (``#`` lines
    are comments; ``field, type, help``)."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        field, kind, help_text = (part.strip() for part in line.split(",", 2))
        out[field] = (kind, help_text)
    return out


def help_unit(help_text: str) -> str | None:
    found = re.search(r"\(in ([^)]+)\)", help_text)
    return found.group(1) if found else None


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_dcgm_field_used_is_enabled_in_the_shipped_counters_with_its_unit(stack, request):
    plan = request.getfixturevalue(f"{stack}_plan")
    files = shipped_counters(plan)
    assert len(files) == 1, f"{stack}: expected one DCGM counters file in the plan, found {len(files)}"
    enabled = counters(files[0])
    for metric in mc.DCGM_EXPORTER.metrics:
        assert metric.name in enabled, f"{metric.name} is read by the queries but not enabled in the shipped counters"
        kind, help_text = enabled[metric.name]
        assert kind == metric.kind, metric.name
        assert help_unit(help_text) == DCGM_HELP_UNITS[metric.unit], metric.name


def test_every_dcgm_field_used_exists_in_the_pinned_release_with_its_unit():
    data = recorded("dcgm-exporter")
    upstream = {f["field"]: f for f in data["fields"]}
    for metric in mc.DCGM_EXPORTER.metrics:
        assert metric.name in upstream, f"{metric.name} is not a field of dcgm-exporter {data['release']}"
        assert upstream[metric.name]["unit_in_help"] == DCGM_HELP_UNITS[metric.unit], metric.name
    # The XID count is off in the release's defaults (commented out): the program's counters file
    # turns it on (components/specs/dcgm_counters.py).
    assert upstream[mc.DCGM_XID_ERRORS_COUNT]["enabled_by_default"] is False
    assert upstream[mc.DCGM_FB_FREE]["enabled_by_default"] is True


def test_dcgm_labels_are_the_release_labels():
    data = recorded("dcgm-exporter")
    for metric in mc.DCGM_EXPORTER.metrics:
        extra = set(data["xid_count_labels"]) if metric.name == mc.DCGM_XID_ERRORS_COUNT else set()
        assert set(metric.labels) <= set(data["gpu_labels"]) | extra, metric.name


def test_dcgm_units_literally():
    """The units DCGM exporter 4.9 changes (MiB to bytes, percent to ratio), as the contract holds them."""
    assert (mc.DCGM_EXPORTER.metric("DCGM_FI_DEV_FB_FREE").unit, mc.DCGM_EXPORTER.metric("DCGM_FI_DEV_GPU_UTIL").unit) == (
        "MiB", "percent (0-100)",
    )


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_dcgm_exporter_the_plan_runs_is_the_contract_release(stack, request):
    plan = request.getfixturevalue(f"{stack}_plan")
    images = []
    for release in plan.of_type("kubernetes:helm.sh/v3:Release"):
        values = release.inputs.get("values") or {}
        if "customMetrics" in values:
            images.append(values["image"]["tag"])
        if "dcgmExporter" in values and values["dcgmExporter"].get("enabled"):
            images.append(values["dcgmExporter"].get("version"))
    assert images and all(tag == mc.DCGM_EXPORTER.release for tag in images), images


# --- vLLM -------------------------------------------------------------------------------------------


def registered_name(name: str, kind: str) -> str:
    """The name vLLM registers for an exposed series: prometheus_client appends ``_total`` to
    counters and ``_bucket``/``_sum``/``_count`` to histograms."""
    suffix = {"counter": "_total", "histogram": "_bucket", "created": "_created"}.get(kind, "")
    assert name.endswith(suffix), name
    return name.removesuffix(suffix) if suffix else name


def test_every_vllm_metric_used_is_registered_by_the_pinned_release():
    data = recorded("vllm")
    upstream = {m["name"]: m for m in data["metrics"]}
    for metric in mc.VLLM.metrics:
        name = registered_name(metric.name, metric.kind)
        assert name in upstream, f"{metric.name} is not registered by vLLM {data['release']}"
        assert upstream[name]["type"] == metric.kind, metric.name
        assert set(metric.labels) - {"le"} <= set(upstream[name]["labels"]), metric.name


def test_vllm_units_are_the_release_units():
    upstream = {m["name"]: m for m in recorded("vllm")["metrics"]}
    for metric in mc.VLLM.metrics:
        doc = upstream[registered_name(metric.name, metric.kind)]["documentation"]
        if metric.unit == mc.SECONDS:
            assert "seconds" in doc and metric.name.endswith("_seconds_bucket"), metric.name
        if metric.unit == mc.RATIO:
            assert "1 means 100 percent" in doc, metric.name
    # The _perc suffix notwithstanding: a ratio, which the KEDA target and alert threshold assume.
    assert mc.VLLM.metric("vllm:kv_cache_usage_perc").unit == "ratio (0-1)"


# --- LiteLLM ----------------------------------------------------------------------------------------

_LITELLM_PROBE = """
import json, typing
from importlib.metadata import version
import prometheus_client
from litellm.integrations.prometheus import PrometheusLogger
from litellm.types.integrations.prometheus import DEFINED_PROMETHEUS_METRICS
logger = PrometheusLogger()
defined = set(typing.get_args(DEFINED_PROMETHEUS_METRICS))
metrics = {}
for family in prometheus_client.REGISTRY.collect():
    if family.name.startswith("litellm_"):
        labels = logger.get_labels_for_metric(family.name) if family.name in defined else None
        metrics[family.name] = {"type": family.type, "labels": labels}
print(json.dumps({"version": version("litellm"), "metrics": metrics}))
"""


@pytest.fixture(scope="module")
def litellm_metrics() -> dict:
    """What the installed proxy's ``prometheus`` callback registers (offline: local cost map)."""
    require_litellm()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [str(GATEWAY_VENV / "bin" / "python"), "-c", _LITELLM_PROBE],
        capture_output=True, text=True, env=env, timeout=300, cwd=GATEWAY_VENV.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_installed_litellm_is_the_contract_release(litellm_metrics):
    assert "v" + litellm_metrics["version"] == mc.LITELLM.release == versions.LITELLM_IMAGE.tag == litellm_requirement()


def test_every_litellm_metric_and_label_used_is_registered_by_the_installed_proxy(litellm_metrics):
    registered = litellm_metrics["metrics"]
    for metric in mc.LITELLM.metrics:
        family = registered_name(metric.name, metric.kind)
        assert family in registered, f"{metric.name} is not registered by LiteLLM {litellm_metrics['version']}"
        # a "created" series is prometheus_client's creation time of a counter's children
        assert registered[family]["type"] == ("counter" if metric.kind == "created" else metric.kind), metric.name
        assert set(metric.labels) <= set(registered[family]["labels"]), (metric.name, registered[family]["labels"])


def test_the_litellm_probe_sees_the_proxy_metrics(litellm_metrics):
    """The probe reads the real registry: the request counter's labels as LiteLLM 1.110.2 defines them."""
    labels = litellm_metrics["metrics"]["litellm_proxy_total_requests_metric"]["labels"]
    assert {"requested_model", "status_code", "route", "model_id"} <= set(labels)
    assert len(litellm_metrics["metrics"]) > 20


# --- KEDA -------------------------------------------------------------------------------------------


def test_keda_reads_every_trigger_key_the_contract_uses():
    data = recorded("keda")
    keys = {k["key"]: k for k in data["prometheus_trigger_metadata"]}
    assert set(mc.KEDA_PROMETHEUS_TRIGGER_KEYS) <= set(keys)
    required = {k for k, v in keys.items() if not v["optional"] and v["default"] is None}
    assert required == {"serverAddress", "query", "threshold"}
    assert required <= set(mc.KEDA_PROMETHEUS_TRIGGER_KEYS)
    assert mc.KEDA.names <= set(data["operator_metrics"])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_prometheus_trigger_the_plan_writes_uses_contract_keys(stack, request):
    plan = request.getfixturevalue(f"{stack}_plan")
    triggers = [
        trigger
        for scaled in plan.of_type("kubernetes:keda.sh/v1alpha1:ScaledObject")
        for trigger in scaled.inputs["spec"]["triggers"]
        if trigger["type"] == "prometheus"
    ]
    assert triggers
    for trigger in triggers:
        assert set(trigger["metadata"]) <= set(mc.KEDA_PROMETHEUS_TRIGGER_KEYS), trigger["name"]


# --- kube-state-metrics -----------------------------------------------------------------------------


def test_every_kube_state_metrics_series_used_is_in_the_pinned_release():
    data = recorded("kube-state-metrics")
    upstream = {m["name"]: m for m in data["metrics"]}
    for metric in mc.KUBE_STATE_METRICS.metrics:
        assert metric.name in upstream, f"{metric.name} is not in kube-state-metrics {data['release']}"
        assert upstream[metric.name]["type"] == metric.kind, metric.name
        labels = {"label_*" if label in ("label_NODE_LABEL", "label_POD_LABEL") else label
                  for label in upstream[metric.name]["labels"]}
        assert set(metric.labels) <= labels, metric.name
    assert data["extended_resource_unit"] == "integer"


def test_kube_state_metrics_label_spelling():
    """SanitizeLabelName: every character outside [a-zA-Z0-9_] becomes '_'."""
    assert mc.KSM_GPU_RESOURCE == "nvidia_com_gpu"
    assert mc.ksm_label("llm-platform.io/pool") == "label_llm_platform_io_pool"


# --- Cluster Autoscaler -----------------------------------------------------------------------------


def test_every_cluster_autoscaler_series_used_is_in_the_pinned_release():
    data = recorded("cluster-autoscaler")
    upstream = {m["name"]: m for m in data["metrics"]}
    for metric in mc.CLUSTER_AUTOSCALER.metrics:
        assert metric.name in upstream, f"{metric.name} is not in Cluster Autoscaler {data['release']}"
        assert upstream[metric.name]["type"] == metric.kind, metric.name
        assert set(metric.labels) <= set(upstream[metric.name]["labels"]), metric.name
    assert mc.CLUSTER_AUTOSCALER.metric("cluster_autoscaler_node_group_backoff_status").unit == "boolean (1 or 0)"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_plan_turns_on_the_flag_that_registers_the_per_group_series(stack, request):
    """Off by default in the release: without it the backoff gauge does not exist and its alert is dead."""
    data = recorded("cluster-autoscaler")
    flags = {m["registered_with_flag"] for m in data["metrics"] if m["name"] in mc.CLUSTER_AUTOSCALER.names}
    assert flags == {"emit-per-nodegroup-metrics"} and data["flags"]["emit-per-nodegroup-metrics"] == "false"
    plan = request.getfixturevalue(f"{stack}_plan")
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "cluster-autoscaler"]
    assert release.inputs["values"]["extraArgs"]["emit-per-nodegroup-metrics"] is True


def test_the_alert_runbook_names_every_recorded_reason():
    """The reasons the release backs a group off with, each with what to check in the runbook."""
    from components.observability.prometheus import cluster_autoscaler_rules

    (rule,) = [r for r in cluster_autoscaler_rules()["rules"] if r["alert"] == "ClusterAutoscalerCannotGrowNodeGroup"]
    reasons = recorded("cluster-autoscaler")["reasons"]
    assert reasons["aws_capacity"] == "placeholder-cannot-be-fulfilled"
    for code in reasons.values():
        assert re.search(rf"\b{re.escape(code)}\b", rule["annotations"]["description"]), code
