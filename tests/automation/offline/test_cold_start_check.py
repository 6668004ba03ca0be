"""`check` and the tier's coldStartBudgetSeconds: prod's interactive model fits the 900 s budget its stack
file sets; a tighter one is a settings problem (exit 2) naming the model, the dominant step and the numbers."""

from __future__ import annotations

import subprocess
import sys

from automation import exit_codes
from automation.offline.plan import ROOT


def test_a_tighter_cold_start_budget_fails_check_naming_the_step(tmp_path):
    text = (ROOT / "Pulumi.prod.yaml").read_text()
    tighter = text.replace("coldStartBudgetSeconds: 900", "coldStartBudgetSeconds: 300")
    assert tighter != text
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text(tighter)
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "prod", "--stack-file", str(stack_file),
         "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == exit_codes.USAGE == 2, done.stdout[-2000:] + done.stderr
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if "coldStartBudgetSeconds" in line]
    assert len(lines) == 1
    # 156 (node: Karpenter 1 + 90, the GPU Operator's path 15 + 15 + 5 + 20 + 10) + 105.29 (the image, 197.91 s
    # serially x 0.532 with SOCI parallel pull) + 14.63 (streamed load) + 90 + 10 = 375.9 -> 376 s.
    assert ("llm-platform:serving.tiers[interactive].models[llama-3-1-70b-instruct-awq]: got 376: predicted cold "
            "start 376 s on a new g5.12xlarge of Karpenter NodePool 'gpu-interactive' is above "
            "serving.tiers[interactive].coldStartBudgetSeconds 300; the node step dominates with 156 s") in lines[0]
    assert not (tmp_path / "out").exists()
