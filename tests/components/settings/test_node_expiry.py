"""Node expiry against disruption budgets, as Karpenter v1's engine decides it.

Textbook: a budget with ``nodes: "0"`` during working hours means no node is disrupted then. Engine:
expiration is forceful (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/expiration): once
``expireAfter`` has passed the NodeClaim is deleted, whatever the budgets say, with no replacement
launched first. ``check`` refuses a pool that promises a zero window and expires nodes (exit 2, the
``expireAfter`` key); such pools run ``expireAfter: Never`` and rotate through drift.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from automation.cli import main
from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError
from components.settings.karpenter import DisruptionBudget, KarpenterNodePool, cron_fires_at
from tests.support.config_changes import with_changes

FORCEFUL = "Karpenter v1 expiration is forceful (budgets do not apply to it and no replacement is launched first)"


def check(capsys, tmp_path: Path, stack: str, changes: dict[str, Any]) -> tuple[int, list[str]]:
    stack_file = tmp_path / f"Pulumi.{stack}.yaml"
    stack_file.write_text(yaml.safe_dump({"config": with_changes(read_stack_config(stack), changes, separator=".")}))
    capsys.readouterr()
    code = main(["check", "--stack", stack, "--stack-file", str(stack_file), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, [line.strip() for line in (captured.out + captured.err).splitlines()]


def only_line(lines: list[str], key: str) -> str:
    (line,) = [line for line in lines if line.startswith(f"llm-platform:{key}:")]
    return line


@pytest.mark.parametrize(
    "stack, index, pool, window",
    [
        ("prod", 1, "gpu-interactive", "during '0 7 * * mon-fri' for 12h"),
        ("prod", 2, "gpu-training", "during '0 7 * * mon-fri' for 12h"),
        ("dev", 1, "gpu-training", "during '0 8 * * mon-fri' for 10h"),
    ],
)
def test_a_finite_expiry_beside_a_zero_window_is_refused(stack, index, pool, window, capsys, tmp_path):
    """What the shipped stacks had: expireAfter 720h beside a working-hours nodes: "0" budget."""
    assert read_stack_config(stack)["llm-platform:karpenter"]["nodePools"][index]["name"] == pool
    code, lines = check(capsys, tmp_path, stack, {f"karpenter.nodePools.{index}.expireAfter": "720h"})
    assert code == 2
    line = only_line(lines, f"karpenter.nodePools[{index}].expireAfter")
    assert line.startswith(f'llm-platform:karpenter.nodePools[{index}].expireAfter: got "720h": 720h while '
                           f"budgets[0] allows no disruption {window}: {FORCEFUL}")
    assert "Set expireAfter: Never" in line and "terminationGracePeriod only bounds the drain" in line


def test_shipped_protected_pools_never_expire_and_rotate_through_drift():
    expiry = {(stack, p.name): p.expire_after
              for stack in ("dev", "prod") for p in parse_settings(read_stack_config(stack)).karpenter.node_pools}
    assert expiry == {("dev", "gpu-inference"): "720h", ("dev", "gpu-training"): "Never",
                      ("prod", "gpu-inference"): "720h", ("prod", "gpu-interactive"): "Never",
                      ("prod", "gpu-training"): "Never"}


def _pool(**overrides: Any) -> dict[str, Any]:
    return {"name": "gpu-x", "nodeClass": "gpu", "instanceFamilies": ["g5"], "gpuLimit": 8, **overrides}


def test_an_always_on_zero_budget_for_drift_would_never_rotate_nodes():
    never = _pool(expireAfter="Never", budgets=[{"nodes": "0"}])
    with pytest.raises(ValueError, match="0 at all times for drift while expireAfter is Never: nodes would never"):
        KarpenterNodePool.model_validate(never)
    consolidation_only = _pool(expireAfter="Never", budgets=[{"nodes": "0", "reasons": ["Underutilized"]}])
    assert KarpenterNodePool.model_validate(consolidation_only).expire_after == "Never"


def test_the_error_names_the_budget_key(capsys, tmp_path):
    code, lines = check(capsys, tmp_path, "prod", {"karpenter.nodePools.1.budgets": [{"nodes": "0%"}]})
    assert code == 2
    assert "0 at all times for drift" in only_line(lines, "karpenter.nodePools[1].budgets[0].nodes")


def test_finite_expiry_stays_allowed_where_no_budget_is_zero():
    """dev's gpu-inference: 10% in working hours, 720h expiry (a burst pool, Spot included)."""
    pool = KarpenterNodePool.model_validate(_pool(expireAfter="720h", budgets=[
        {"nodes": "10%", "schedule": "0 8 * * mon-fri", "duration": "10h"}, {"nodes": "50%"}]))
    assert pool.expire_after == "720h"


def test_auto_mode_cannot_keep_a_zero_window():
    config = with_changes(read_stack_config("dev"), {"autoMode": {"enabled": True, "gpuNodePools": [
        _pool(name="auto-l40s", instanceFamilies=["g6e"], nodeClass=None, expireAfter="Never",
              budgets=[{"nodes": "0", "schedule": "0 8 * * mon-fri", "duration": "10h"}, {"nodes": "1"}])]}})
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:autoMode.gpuNodePools[0].budgets[0].nodes"
    assert "replaces every node within 504h (21 days) whatever expireAfter says" in problem.reason


# --- the textbook and the engine on one timeline ---------------------------------------------------


def test_cron_schedule_as_karpenter_reads_it():
    monday_7 = datetime(2026, 11, 2, 7, 0)
    assert monday_7.strftime("%a") == "Mon"
    assert cron_fires_at("0 7 * * mon-fri", monday_7)
    assert not cron_fires_at("0 7 * * mon-fri", monday_7 + timedelta(days=5))  # Saturday
    assert not cron_fires_at("0 7 * * mon-fri", monday_7 + timedelta(minutes=1))
    assert cron_fires_at("@daily", datetime(2026, 11, 7, 0, 0))
    assert cron_fires_at("*/15 9-17 * * 1-5", datetime(2026, 11, 4, 17, 45))
    # both day fields restricted: either matches (the 1st of December 2026 is a Tuesday)
    assert cron_fires_at("0 0 1 * sun", datetime(2026, 12, 1, 0, 0))


def test_a_protected_window_does_not_stop_an_expiry():
    """prod gpu-interactive as shipped before: two nodes launched by a Monday 09:00 scale-out expire
    together 720h later, Wednesday 09:00, inside the 07:00-19:00 zero window. Textbook: the budget is
    active and allows 0, so nothing is disrupted. Engine: both nodes are deleted then, no replacement
    first. The settings side with the engine."""
    window = DisruptionBudget(nodes="0", schedule="0 7 * * mon-fri", duration="12h", reasons=["Underutilized", "Drifted"])
    launched = datetime(2026, 11, 2, 9, 0)
    expires = launched + timedelta(hours=720)
    assert expires == datetime(2026, 12, 2, 9, 0) and expires.strftime("%a") == "Wed"
    # textbook: the window is active at expiry and allows no disruption, for any budgeted reason
    assert window.active_at(expires) and window.blocks_all
    assert window.covers("Drifted") and not window.covers("Empty")
    assert not window.active_at(datetime(2026, 12, 2, 19, 0)) and window.active_at(datetime(2026, 12, 2, 18, 59))
    # engine: expiry is not a budgeted reason, so the pool is refused with a finite expireAfter
    with pytest.raises(ValueError, match="720h while budgets\\[0\\] allows no disruption during '0 7 \\* \\* mon-fri'"):
        KarpenterNodePool.model_validate(_pool(expireAfter="720h", budgets=[window.model_dump(by_alias=True),
                                                                            {"nodes": "1"}]))
