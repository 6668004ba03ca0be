"""The offline check refuses a stack's policy config that does not repeat the stack file's gpuBudget."""

from __future__ import annotations

import subprocess
import sys

from automation import exit_codes
from automation.offline.plan import ROOT


def test_a_policy_config_that_disagrees_with_the_stack_file_is_a_usage_error(tmp_path):
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    raised = text.replace("gpuBudget: {maxGpus: 16,", "gpuBudget: {maxGpus: 20,")
    assert raised != text
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(raised)
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(stack_file),
         "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == exit_codes.USAGE, done.stdout[-2000:] + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "llm-platform:gpuBudget.maxGpus is 20" in line and "gpu-capacity-cap.maxGpus sets 16" in line
    assert line.startswith("error: dev.json: ") and not (tmp_path / "out").exists()
