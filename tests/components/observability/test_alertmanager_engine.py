"""Routing and inhibition judged by the real Alertmanager (Debian's ``prometheus-alertmanager``) on
127.0.0.1, running the configuration the program emits, with alerts posted to its v2 API and the
notifications a local webhook receives recorded.

Only the receivers' endpoints are rewritten (each to the local webhook, at a path named after the
receiver) and only ``group_wait`` is lowered, from the emitted 30s to 1s, so a test waits a second
instead of half a minute; routes, grouping and inhibit rules are exactly as emitted. The second of
group wait also leaves Alertmanager's inhibitor time to take in the critical alert posted first.

Alertmanager compares an inhibit rule's ``equal`` labels by value, and a label missing on both alerts
compares equal (``inhibit/inhibit.go``, ``InhibitRule.hasEqual``): the textbook reading ("only alerts
about the same model are muted") and the engine's answer differ for alerts without those labels.
"""

from __future__ import annotations

import time

import pytest
import yaml

from tests.components.observability.test_alerting import ALL_RECEIVERS, alertmanager_yaml
from tests.conftest import plan_with, read_stack_config
from tests.support.alertmanager import AlertmanagerServer, WebhookRecorder, alertmanager_binary, with_local_receivers

TEST_GROUP_WAIT = "1s"
#: Bound on every wait for a notification: group_wait plus ample margin on a loaded 2-core machine.
DELIVERY_SECONDS = 15

MODEL_X = {"namespace": "serving-interactive", "tier": "interactive", "model_name": "model-x"}
MODEL_Y = {"namespace": "serving-interactive", "tier": "interactive", "model_name": "model-y"}
#: The chart's KubeSchedulerDown as EKS would raise it: no namespace, model or GPU labels.
UNSCOPED_CRITICAL = {"alertname": "KubeSchedulerDown", "severity": "critical"}
#: The GPU-hours budget alert: cluster-wide, no namespace, model or GPU labels either.
BUDGET_WARNING = {"alertname": "GpuHoursAboveMonthlyBudget", "severity": "warning", "team": "ml-platform"}


def names(delivered) -> set[str]:
    return {labels["alertname"] + "/" + labels.get("model_name", labels.get("gpu", "")) for _, labels in delivered}


@pytest.fixture
def alertmanager(tmp_path):
    """Start Alertmanager with a plan's emitted configuration (receivers pointed at a local webhook)."""
    alertmanager_binary()  # skip (or fail in CI) before building anything
    started: list[tuple[AlertmanagerServer, WebhookRecorder]] = []

    def start(plan) -> tuple[AlertmanagerServer, WebhookRecorder]:
        emitted = yaml.safe_load(alertmanager_yaml(plan))
        recorder = WebhookRecorder().start()
        config = with_local_receivers(emitted, recorder.url)
        assert emitted["route"]["group_wait"] == "30s"
        config["route"]["group_wait"] = TEST_GROUP_WAIT
        workdir = tmp_path / f"alertmanager-{len(started)}"
        workdir.mkdir()
        server = AlertmanagerServer(workdir, config)
        started.append((server, recorder))
        return server.start(), recorder

    yield start
    for server, recorder in started:
        server.stop()
        recorder.stop()


@pytest.fixture(scope="module")
def all_receivers_plan():
    observability = {**read_stack_config("dev")["llm-platform:observability"], "alerting": ALL_RECEIVERS}
    return plan_with("dev", observability=observability)


def test_a_critical_without_the_labels_does_not_mute_the_gpu_hours_budget_warning(prod_plan, alertmanager):
    """With ``equal: [namespace, model_name, Hostname, gpu]`` alone, KubeSchedulerDown (which EKS
    raised forever) muted the budget warning: both lack every one of those labels."""
    server, recorder = alertmanager(prod_plan)
    server.post(UNSCOPED_CRITICAL)
    server.wait_until_known(1)
    server.post(BUDGET_WARNING)
    assert recorder.wait_for(lambda d: {"KubeSchedulerDown/", "GpuHoursAboveMonthlyBudget/"} <= names(d), DELIVERY_SECONDS), (
        f"delivered: {recorder.delivered()}; alertmanager: {server.alerts()}"
    )
    budget = [a for a in server.alerts() if a["labels"]["alertname"] == "GpuHoursAboveMonthlyBudget"]
    assert [a["status"]["inhibitedBy"] for a in budget] == [[]]
    # Routed as prod says: critical to the pager, a warning without a tier to the team's topic.
    assert ("oncall-pager", UNSCOPED_CRITICAL) in recorder.delivered()
    assert ("ml-platform-alerts", BUDGET_WARNING) in recorder.delivered()


def test_a_critical_for_a_model_mutes_that_models_warnings_only(prod_plan, alertmanager):
    server, recorder = alertmanager(prod_plan)
    server.post({"alertname": "VllmTimeToFirstTokenSlow", "severity": "critical", **MODEL_X})
    server.wait_until_known(1)
    server.post(
        {"alertname": "VllmKvCacheHigh", "severity": "warning", **MODEL_X},
        {"alertname": "VllmKvCacheHigh", "severity": "warning", **MODEL_Y},
        BUDGET_WARNING,
    )
    expected = {"VllmTimeToFirstTokenSlow/model-x", "VllmKvCacheHigh/model-y", "GpuHoursAboveMonthlyBudget/"}
    assert recorder.wait_for(lambda d: expected <= names(d), DELIVERY_SECONDS), recorder.delivered()
    state = {(a["labels"]["alertname"], a["labels"].get("model_name")): a["status"] for a in server.wait_until_known(4)}
    assert state[("VllmKvCacheHigh", "model-x")]["state"] == "suppressed"
    assert len(state[("VllmKvCacheHigh", "model-x")]["inhibitedBy"]) == 1
    assert state[("VllmKvCacheHigh", "model-y")]["inhibitedBy"] == []
    assert state[("GpuHoursAboveMonthlyBudget", None)]["inhibitedBy"] == []
    # The muted warning's group flushed with the others (same group_wait, posted together): nothing came.
    time.sleep(2)
    assert "VllmKvCacheHigh/model-x" not in names(recorder.delivered())
    # Interactive warnings page in prod (route: warning + tier interactive -> oncall-pager).
    assert ("oncall-pager", {"alertname": "VllmKvCacheHigh", "severity": "warning", **MODEL_Y}) in recorder.delivered()


def test_a_hardware_xid_mutes_that_gpus_warnings_only(prod_plan, alertmanager):
    server, recorder = alertmanager(prod_plan)
    gpu0, gpu1 = {"Hostname": "ip-10-0-1-1", "gpu": "0"}, {"Hostname": "ip-10-0-1-1", "gpu": "1"}
    server.post({"alertname": "GpuXidHardwareError", "severity": "critical", "xid": "79", **gpu0})
    server.wait_until_known(1)
    server.post(
        {"alertname": "GpuFramebufferExhausted", "severity": "warning", **gpu0},
        {"alertname": "GpuFramebufferExhausted", "severity": "warning", **gpu1},
    )
    assert recorder.wait_for(lambda d: {"GpuXidHardwareError/0", "GpuFramebufferExhausted/1"} <= names(d), DELIVERY_SECONDS), (
        recorder.delivered()
    )
    muted = [a for a in server.wait_until_known(3) if a["labels"]["alertname"] == "GpuFramebufferExhausted" and a["labels"]["gpu"] == "0"]
    assert [a["status"]["state"] for a in muted] == ["suppressed"]
    time.sleep(2)
    assert "GpuFramebufferExhausted/0" not in names(recorder.delivered())


def test_every_route_reaches_its_receiver(all_receivers_plan, alertmanager):
    """Routes by severity and tier, first match wins; Watchdog goes to ``null`` (no delivery)."""
    server, recorder = alertmanager(all_receivers_plan)
    server.post(
        {"alertname": "A", "severity": "critical", "tier": "interactive"},
        {"alertname": "B", "severity": "critical", "tier": "batch"},
        {"alertname": "C", "severity": "warning", "tier": "interactive"},
        {"alertname": "D", "severity": "info"},
        {"alertname": "Watchdog", "severity": "none"},
    )
    assert recorder.wait_for(lambda d: len(d) >= 4, DELIVERY_SECONDS), recorder.delivered()
    time.sleep(2)
    routed = sorted((path, labels["alertname"]) for path, labels in recorder.delivered())
    assert routed == [("chat", "C"), ("hook", "D"), ("pager", "A"), ("topic", "B")]
