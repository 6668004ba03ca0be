"""The generated pack config from the driver's side: the ``pack-config`` verb and the offline check's
refusal of a config whose program facts are stale."""

from __future__ import annotations

import json

import pytest

from automation import exit_codes
from automation.cli import main
from automation.offline import check
from automation.offline.pack.config import fact_disagreements
from automation.offline.pack.findings import PolicyConfigError
from automation.offline.plan import ROOT


def test_a_hand_edited_fact_is_named():
    config = {"all": "mandatory", "gpu-pools-tainted": {"gpuTaintKey": "example.com/gpu", "gpuResource": "nvidia.com/gpu"},
              "system-pool-on-demand-ha": {"minSize": 5}, "gpu-capacity-cap": "advisory"}
    assert fact_disagreements(config) == [
        'gpu-pools-tainted.gpuTaintKey is "example.com/gpu" but the program\'s is "nvidia.com/gpu"']


def test_the_committed_configs_agree_with_the_program():
    for stack in ("dev", "prod"):
        assert fact_disagreements(json.loads((ROOT / "policies" / "config" / f"{stack}.json").read_text())) == []


def test_the_check_refuses_a_stale_stack_config(tmp_path, monkeypatch):
    """Before anything runs: the pack would otherwise judge by labels the program no longer writes."""
    pack_dir = tmp_path / "policies"
    (pack_dir / "config").mkdir(parents=True)
    config = json.loads((ROOT / "policies" / "config" / "dev.json").read_text())
    config["gpu-pool-labels"]["acceleratorLabel"] = "example.com/accelerator"
    (pack_dir / "config" / "dev.json").write_text(json.dumps(config))
    monkeypatch.setattr(check, "POLICY_PACK_DIR", pack_dir)
    with pytest.raises(PolicyConfigError) as refused:
        check.run_check("dev", tmp_path / "out")
    assert str(refused.value) == (
        'dev.json: gpu-pool-labels.acceleratorLabel is "example.com/accelerator" but the program\'s is '
        '"llm-platform.io/accelerator"; regenerate it with `python -m automation pack-config write --stack dev`')
    assert not (tmp_path / "out").exists()


def test_pack_config_check_passes_on_the_committed_files(capsys):
    assert main(["pack-config", "check"]) == exit_codes.OK
    assert capsys.readouterr().out.split("\n")[:2] == ["policies/config/dev.json: up to date",
                                                       "policies/config/prod.json: up to date"]


def test_pack_config_for_a_stack_without_choices_is_a_usage_error(capsys):
    assert main(["pack-config", "write", "--stack", "staging"]) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no pack choices for staging" in err and "Traceback" not in err
