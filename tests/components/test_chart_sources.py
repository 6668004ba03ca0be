"""Where the Helm-render tests find each pinned chart: the local cache first, then the shared
charts beside the clone; in CI a pinned chart found in neither place fails, naming it."""

from __future__ import annotations

import pytest

from components import versions
from tests.support import helm_render
from tests.support.needs import missing

PINNED = sorted(
    (c for c in vars(versions).values() if isinstance(c, versions.HelmChart)), key=lambda c: c.chart
)


@pytest.mark.parametrize("chart", PINNED, ids=lambda c: f"{c.chart}-{c.version}")
def test_every_pinned_chart_can_be_rendered(chart):
    """A new pin without its packaged chart fails CI here by name (and every render test of it)."""
    reason = helm_render.missing_reason(chart)
    if reason:
        missing(reason)
    assert helm_render.cached_chart(chart).name == f"{chart.chart}-{chart.version}.tgz"


def test_the_pins_include_every_chart_the_program_installs():
    assert {c.chart for c in PINNED} >= {
        "cluster-autoscaler", "dcgm-exporter", "gpu-operator", "karpenter", "karpenter-crd", "keda",
        "kube-prometheus-stack", "nvidia-device-plugin",
    }


def _chart(version: str = "1.2.3") -> versions.HelmChart:
    return versions.HelmChart(chart="demo", version=version, repository="https://example.invalid/charts")


def test_the_local_cache_wins_over_the_shared_charts(tmp_path, monkeypatch):
    local, shared = tmp_path / "local", tmp_path / "shared"
    local.mkdir()
    shared.mkdir()
    monkeypatch.setenv(helm_render.CACHE_ENV, str(local))
    monkeypatch.setattr(helm_render, "SHARED_CHARTS", shared)
    (shared / "demo-1.2.3.tgz").write_bytes(b"shared")
    assert helm_render.cached_chart(_chart()) == shared / "demo-1.2.3.tgz"
    (local / "demo-1.2.3.tgz").write_bytes(b"local")
    assert helm_render.cached_chart(_chart()) == local / "demo-1.2.3.tgz"


def test_a_chart_in_neither_place_is_named_with_its_version(tmp_path, monkeypatch):
    monkeypatch.setenv(helm_render.CACHE_ENV, str(tmp_path / "local"))
    monkeypatch.setattr(helm_render, "SHARED_CHARTS", tmp_path / "shared")
    if helm_render.helm is None:
        missing("helm-python-sdk is not installed (tests/requirements-helm.txt)")
    reason = helm_render.missing_reason(_chart("9.9.9"))
    assert reason is not None
    assert reason.startswith("pinned chart demo 9.9.9 is in neither the chart cache ")
    assert str(tmp_path / "shared") in reason


def test_the_shared_charts_sit_beside_the_clone():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    assert helm_render.SHARED_CHARTS == repo.parent / "shared" / "charts"
