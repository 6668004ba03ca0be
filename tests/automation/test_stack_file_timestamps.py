"""A timestamp-like value in a stack file reaches the program as its text, as the Pulumi CLI passes it
(go-yaml decodes a timestamp into ``interface{}`` as the scalar's string): an unquoted Capacity Block
``endDate`` is read, not a crash."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import yaml

from automation import exit_codes
from automation.stacks import load_yaml, read_stack_config
from components.capacity_check import parse_settings
from components.settings import config_strings
from tests.fixtures.reserved_copies import ROOT, capacity_block_copy


def test_timestamps_and_dates_stay_text():
    assert load_yaml("a: 2026-12-20T11:30:00Z\nb: 2026-12-20\nc: '2026-12-20'\n") == {
        "a": "2026-12-20T11:30:00Z", "b": "2026-12-20", "c": "2026-12-20"}


def _unquoted_stack_file(tmp_path):
    text = yaml.safe_dump({"config": capacity_block_copy()},
                          sort_keys=False)
    unquoted = text.replace("'2026-12-20T11:30:00Z'", "2026-12-20T11:30:00Z")
    assert unquoted != text
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(unquoted)
    return path


def test_an_unquoted_end_date_is_the_same_setting(tmp_path):
    config = read_stack_config("dev", path=_unquoted_stack_file(tmp_path))
    settings = parse_settings(config_strings(config))
    (pool,) = [p for p in settings.gpu_pools if p.reservation is not None]
    assert pool.reservation.end_date == datetime(2026, 12, 20, 11, 30, tzinfo=UTC)


def test_check_reads_an_unquoted_end_date_without_a_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(_unquoted_stack_file(tmp_path)),
         "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "LLM_PLATFORM_TODAY": "2026-12-01"},
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == exit_codes.OK, done.stdout[-3000:] + done.stderr
