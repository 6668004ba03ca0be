"""Fixtures of the driver's tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.automation.conftest import install

HERE = Path(__file__).resolve().parents[1]


@pytest.fixture
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The stand-in as ``aws`` on PATH; returns the recorded calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install(HERE / "aws_standin.py", bin_dir / "aws")
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_LOG", str(log))
    monkeypatch.delenv("STANDIN_AWS", raising=False)
    monkeypatch.delenv("STANDIN_IAM_POLICIES", raising=False)
    return lambda: [json.loads(line)["argv"] for line in log.read_text().splitlines()] if log.exists() else []
