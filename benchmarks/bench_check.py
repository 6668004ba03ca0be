"""Benchmark of the offline check: wall time per stack (median of N runs) and resource count.

Two figures per stack: the whole command as a user runs it (a fresh process, imports included),
and the recording alone in a warm process (settings, program under mocks, plan). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def time_command(stack: str, runs: int) -> tuple[float, int]:
    timings, resources = [], 0
    with tempfile.TemporaryDirectory() as out:
        for _ in range(runs):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "automation", "check", "--stack", stack, "--out", out, "--output", "json"],
                cwd=ROOT, capture_output=True, text=True,
            )
            if done.returncode not in (0, 1):  # 1: policy violations, still a full check
                raise SystemExit(done.stderr)
            timings.append(time.perf_counter() - start)
            resources = json.loads(done.stdout)["summary"]["resource_count"]
    return statistics.median(timings), resources


def time_recording(stack: str, runs: int) -> float:
    from automation.plan import record_plan
    from automation.stacks import load_stack
    from components.settings import config_strings

    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        config, settings = load_stack(stack)
        record_plan(stack, config_strings(config), region=settings.region)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("stacks", nargs="*", default=["dev", "prod"])
    args = parser.parse_args()
    print(f"offline check, median of {args.runs} runs")
    print(f"{'stack':<8}{'resources':>10}{'command s':>12}{'recording s':>14}")
    for stack in args.stacks:
        command, resources = time_command(stack, args.runs)
        recording = time_recording(stack, args.runs)
        print(f"{stack:<8}{resources:>10}{command:>12.2f}{recording:>14.3f}")


if __name__ == "__main__":
    main()
