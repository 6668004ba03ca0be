"""``kubernetesVersion`` as the Pulumi CLI hands it over, and the advice once a minor left standard support.

The CLI passes a top-level config value to the program as the scalar's text (pulumi ``config.Value``
decodes a YAML scalar into a string; go-yaml gives a float scalar as written): ``1.360`` arrives as
"1.360" and ``1.30`` as "1.30". PyYAML alone makes them 1.36 and 1.3, so the check must keep the text.
EKS calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html): 1.35 standard support
ends 2027-03-27 (extended 2028-03-27), 1.36 ends 2027-08-02 (extended 2028-08-02).
"""

from __future__ import annotations

import pytest

from automation.paths import ROOT
from automation.stacks import load_stack, read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError, config_strings


def stack_with_version(tmp_path, written: str):
    text = tmp_path / "Pulumi.dev.yaml"
    base = (ROOT / "Pulumi.dev.yaml").read_text()
    lines = [line for line in base.splitlines() if not line.startswith("  llm-platform:kubernetesVersion:")]
    lines.insert(lines.index("config:") + 1, f"  llm-platform:kubernetesVersion: {written}")
    text.write_text("\n".join(lines) + "\n")
    return text


@pytest.mark.parametrize("written", ["1.360", "1.350", "1.3"])
def test_a_float_the_cli_passes_as_other_text_is_refused(tmp_path, written):
    with pytest.raises(SettingsError) as raised:
        load_stack("dev", path=stack_with_version(tmp_path, written))
    [problem] = raised.value.problems
    assert problem.key == "llm-platform:kubernetesVersion"
    assert problem.reason.startswith(f"'{written}' is not supported; allowed: 1.34, 1.35, 1.36")


def test_an_unquoted_minor_written_as_itself_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2026-11-28")
    config, settings = load_stack("dev", path=stack_with_version(tmp_path, "1.35"))
    assert config_strings(config)["llm-platform:kubernetesVersion"] == "1.35"
    assert settings.kubernetes_version == "1.35"


def _refusal(monkeypatch, today: str, minor: str) -> str:
    monkeypatch.setenv("LLM_PLATFORM_TODAY", today)
    config = read_stack_config("dev")
    config["llm-platform:kubernetesVersion"] = minor
    with pytest.raises(SettingsError) as raised:
        parse_settings(config_strings(config))
    [problem] = raised.value.problems
    assert problem.key == "llm-platform:kubernetesVersion"
    return problem.reason


def test_a_minor_out_of_support_is_told_the_newest_in_support(monkeypatch):
    assert _refusal(monkeypatch, "2027-04-01", "1.35") == (
        "1.35 left EKS standard support on 2027-03-27: every cluster hour now bills extended support (until "
        "2028-03-27); upgrade to 1.36 (allowed: 1.36)")


def test_when_no_pinned_minor_is_in_support_the_advice_says_so(monkeypatch):
    assert _refusal(monkeypatch, "2027-09-01", "1.36") == (
        "1.36 left EKS standard support on 2027-08-02: every cluster hour now bills extended support (until "
        "2028-08-02); no minor this project pins is in standard support on 2027-09-01 (the newest, 1.36, left it "
        "on 2027-08-02): update the project's components/versions.py to a newer EKS minor")
