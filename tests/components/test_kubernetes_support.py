"""Kubernetes minors and their EKS support windows: what a stack is told on a given day, and what
a 1.36 cluster gets. Dates are the EKS release calendar's; ``LLM_PLATFORM_TODAY`` sets the day."""

from __future__ import annotations

import subprocess
import sys

import pytest

from automation import exit_codes
from automation.offline.plan import ROOT
from automation.stacks import read_stack_config
from components import versions
from components.capacity_check import parse_settings
from components.settings import SettingsError, settings_warnings
from tests.conftest import plan_with


def config_on(minor: str, stack: str = "dev") -> dict:
    config = read_stack_config(stack)
    config["llm-platform:kubernetesVersion"] = minor
    return config


def test_the_support_calendar():
    calendar = {m: (s.standard_support_ends.isoformat(), s.extended_support_ends.isoformat())
                for m, s in versions.EKS_KUBERNETES_SUPPORT.items()}
    assert calendar["1.34"] == ("2026-12-02", "2027-12-02")
    assert calendar["1.35"] == ("2027-03-27", "2028-03-27")
    assert calendar["1.36"] == ("2027-08-02", "2028-08-02")


def test_the_default_is_1_35_while_keda_2_20_is_not_tested_on_1_36():
    assert versions.DEFAULT_KUBERNETES_VERSION == "1.35"
    assert versions.COMPONENT_KUBERNETES_RANGES["KEDA 2.20.2"][:2] == ("1.33", "1.35")


def test_1_34_is_accepted_with_a_warning_in_its_last_60_days(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-11-26")
    config = config_on("1.34")
    settings = parse_settings(config)
    assert settings_warnings(config, settings) == [
        "warning: llm-platform:kubernetesVersion 1.34 leaves EKS standard support on 2026-12-02 (in 6 day(s)); "
        "from then on it is refused, and a running cluster bills extended support: upgrade to 1.36"
    ]


def test_no_warning_before_the_60_days(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-10-02")  # 61 days before 2026-12-02
    config = config_on("1.34")
    assert settings_warnings(config, parse_settings(config)) == []
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-10-03")  # 60 days before
    assert len(settings_warnings(config, parse_settings(config))) == 1


def test_1_34_is_refused_the_day_after_its_standard_support_ends(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-02")
    parse_settings(config_on("1.34"))  # its last day
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-12-03")
    with pytest.raises(SettingsError) as caught:
        parse_settings(config_on("1.34", "prod"))
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:kubernetesVersion"
    assert problem.reason.startswith("1.34 left EKS standard support on 2026-12-02: every cluster hour now bills "
                                     "extended support (until 2027-12-02); upgrade to 1.36 (allowed: 1.35, 1.36)")


def test_the_check_refuses_1_34_after_the_date_with_exit_2(tmp_path):
    text = (ROOT / "Pulumi.prod.yaml").read_text().replace('kubernetesVersion: "1.35"', 'kubernetesVersion: "1.34"')
    assert 'kubernetesVersion: "1.34"' in text
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "prod", "--stack-file", str(stack_file),
         "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "LLM_PLATFORM_TODAY": "2026-12-03"},
    )
    assert done.returncode == exit_codes.USAGE, done.stderr
    assert "llm-platform:kubernetesVersion" in done.stderr and "2026-12-02" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_1_35_warns_in_its_last_60_days(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2027-02-01")
    config = config_on("1.35")
    (line,) = settings_warnings(config, parse_settings(config))
    assert "1.35 leaves EKS standard support on 2027-03-27 (in 54 day(s))" in line


def test_1_36_is_told_which_component_is_not_known_to_run_on_it(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-11-26")
    config = config_on("1.36")
    assert settings_warnings(config, parse_settings(config)) == [
        "warning: llm-platform:kubernetesVersion 1.36: KEDA 2.20.2 is known to run on 1.33-1.35 "
        "(keda.sh/docs/2.20/operate/cluster (tested window; 2.21 is tested on 1.34-1.36))"
    ]


def test_a_bad_override_date_is_a_one_line_problem(monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "tomorrow")
    with pytest.raises(SettingsError, match="LLM_PLATFORM_TODAY"):
        parse_settings(config_on("1.35"))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_1_36_cluster_gets_its_own_add_ons_and_autoscaler(stack):
    plan = plan_with(stack, kubernetesVersion="1.36")
    (cluster,) = plan.of_type("eks:index:Cluster")
    assert cluster.inputs["version"] == "1.36"
    addons = {r.inputs["addonName"]: r.inputs["addonVersion"] for r in plan.of_type("aws:eks/addon:Addon")}
    assert addons == {"coredns": "v1.14.3-eksbuild.24", "eks-pod-identity-agent": "v1.4.0-eksbuild.2",
                      "aws-ebs-csi-driver": "v1.66.0-eksbuild.1"}
    # pulumi-eks creates kube-proxy and the VPC CNI itself, at the versions it is given
    assert cluster.inputs["kubeProxyAddonOptions"]["version"] == "v1.36.0-eksbuild.25"
    assert cluster.inputs["vpcCniOptions"]["addonVersion"] == "v1.23.1-eksbuild.1"
    releases = {r.inputs["name"]: r.inputs for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    autoscaler = next(v for k, v in releases.items() if "autoscaler" in k)
    assert autoscaler["values"]["image"]["tag"] == (
        "v1.36.0@sha256:dc5d62770338c2902f31b01f95c9fc8c456fd88baa5364ca154d6e47069ec885"
    )


def test_karpenter_nodes_use_the_pinned_ami_release():
    assert versions.KARPENTER_AMI_ALIAS == "al2023@v20260930"


def test_1_37_is_refused_naming_why_and_the_components_that_do_not_run_on_it():
    """Upstream released 1.37 on 2026-08-26; EKS does not offer it yet, and five pins stop at 1.35/1.36."""
    with pytest.raises(SettingsError) as caught:
        parse_settings(config_on("1.37"))
    assert [str(p) for p in caught.value.problems] == [
        'llm-platform:kubernetesVersion: got "1.37": 1.37 is refused: EKS does not offer it yet (no 1.37 in the EKS '
        "release calendar; aws/containers-roadmap's request for it is open); pinned components not known to run on "
        "it: Karpenter 1.14.1 (1.26-1.36), KEDA 2.20.2 (1.33-1.35), DRA driver for NVIDIA GPUs 0.4.1 (1.32-1.36), "
        "kube-prometheus-stack 88.5.3 (1.25-1.36), NVIDIA GPU Operator v26.7.0 (1.33-1.36); allowed: 1.34, 1.35, 1.36"]


def test_the_gpu_operator_range_is_nvidias_matrix_not_the_charts_kube_version():
    """The chart says kubeVersion >= 1.16.0-0 (Helm would install it on 1.20); NVIDIA validates v26.7.0
    on Amazon EKS 1.33-1.36 only."""
    assert versions.COMPONENT_KUBERNETES_RANGES["NVIDIA GPU Operator v26.7.0"][:2] == ("1.33", "1.36")
