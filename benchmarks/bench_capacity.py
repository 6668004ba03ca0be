"""Benchmark of the capacity simulation: its cost at 10, 100 and 500 generated valid models.

Each size is the stack of ``benchmarks/generated_stack.py`` (prod with N one-GPU 8B models spread
over its tiers and A10G pools), a configuration the simulation passes. Three figures per size
(median of N runs): the blueprint plus simulation (what the capacity verdict adds), the engine
adapter plus simulation over the same objects in engine form (what the pack's policy does), and the
simulation alone; "findings" counts blocking findings (0: the generated stacks are valid). The last
line compares with one offline check of dev. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def generated_config(models: int) -> dict:
    from benchmarks.generated_stack import stack_config

    return stack_config(models)


def median_seconds(function, runs: int) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def offline_check_seconds() -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "automation", "check", "--stack", "dev", "--out", out, "--output", "json"],
                       cwd=ROOT, capture_output=True, text=True)
        return time.perf_counter() - start


def main() -> None:
    from components.capacity_check import CheckedStack, parse_settings
    from components.settings import config_strings
    from policies.capacity.engine import cluster_from_resources
    from policies.capacity.simulate import simulate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("sizes", nargs="*", type=int, default=[10, 100, 500])
    args = parser.parse_args()
    print(f"capacity simulation, median of {args.runs} runs")
    print(f"{'models':>7}{'findings':>10}{'settings+sim ms':>17}{'engine+sim ms':>15}{'sim only ms':>13}")
    largest = 0.0
    for size in args.sizes:
        settings = parse_settings(config_strings(generated_config(size)))
        resources = CheckedStack.of(settings).blueprint.objects
        cluster = CheckedStack.of(settings).cluster
        findings = [f for f in simulate(cluster).findings if f.blocking]
        through_settings = median_seconds(lambda settings=settings: CheckedStack.of(settings).simulation, args.runs)
        through_engine = median_seconds(lambda resources=resources: simulate(cluster_from_resources(resources)), args.runs)
        alone = median_seconds(lambda cluster=cluster: simulate(cluster), args.runs)
        largest = max(largest, through_settings, through_engine)
        print(f"{size:>7}{len(findings):>10}{through_settings * 1000:>17.1f}{through_engine * 1000:>15.1f}{alone * 1000:>13.1f}")
    check = offline_check_seconds()
    print(f"offline check of dev: {check:.2f} s; slowest simulation above is {largest / check:.1%} of it")


if __name__ == "__main__":
    main()
