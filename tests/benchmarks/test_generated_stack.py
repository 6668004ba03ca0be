"""The benchmarks' generated stacks are valid: settings (with the capacity simulation) accept them
and the offline check passes the smallest one with its own policy config."""

from __future__ import annotations

import pytest

from benchmarks.generated_stack import stack_config, write_stack
from components.capacity_check import parse_settings
from tests.automation.offline.test_check import run_check


@pytest.mark.parametrize("models", [10, 500])
def test_generated_stacks_pass_the_settings_and_capacity_checks(models):
    settings = parse_settings(stack_config(models))
    assert sum(len(t.models) for t in settings.serving.tiers) == models


def test_generated_stack_passes_the_offline_check(tmp_path):
    stack_file, policy_file = write_stack(10, tmp_path)
    done = run_check("--stack", "bench10", "--stack-file", str(stack_file), "--policy-config", str(policy_file),
                     "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
