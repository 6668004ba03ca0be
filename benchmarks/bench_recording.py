"""Benchmark of recording under mocks, per resource: the program's plan for a generated stack of N
served models, recorded in this process (imports excluded), with the CPU spent in the recording
monitor (engine-form inputs for the plan, the mocks' answer) and in the garbage collector.

    python benchmarks/bench_recording.py [--models 100] [--rounds 3]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import automation.offline.plan as plan_module  # noqa: E402
from automation.offline.check import fewer_collections  # noqa: E402
from automation.stacks import load_stack  # noqa: E402
from benchmarks.generated_stack import write_stack  # noqa: E402
from components.settings import config_strings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--default-gc", action="store_true", help="record with the collector's default thresholds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        stack_file, _ = write_stack(args.models, Path(work))
        config, settings = load_stack(f"bench{args.models}", path=stack_file)
    monitor_cpu = [0.0]
    register = plan_module.RecordingMonitor.RegisterResource

    def timed(self, request):
        start = time.thread_time()
        try:
            return register(self, request)
        finally:
            monitor_cpu[0] += time.thread_time() - start

    plan_module.RecordingMonitor.RegisterResource = timed
    gc_seconds = [0.0]
    started: list[float] = []

    def on_gc(phase: str, _info: dict) -> None:
        if phase == "start":
            started.append(time.thread_time())
        elif started:
            gc_seconds[0] += time.thread_time() - started.pop()

    gc.callbacks.append(on_gc)
    plan_module.record_plan("warm-up", config_strings(config), region=settings.region)  # imports, type hints
    rows = []
    for _ in range(args.rounds):
        monitor_cpu[0] = gc_seconds[0] = 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        with contextlib.nullcontext() if args.default_gc else fewer_collections():
            plan = plan_module.record_plan(f"bench{args.models}", config_strings(config), region=settings.region)
        rows.append((time.process_time() - cpu, time.perf_counter() - wall, monitor_cpu[0], gc_seconds[0], len(plan.resources)))
    cpu, wall, monitor, collector, resources = (statistics.median(column) for column in zip(*rows))
    collector_setting = "default collector thresholds" if args.default_gc else "the check's collector settings"
    print(f"recording {int(resources)} resources ({args.models} models), median of {args.rounds} rounds in a warm "
          f"process, {collector_setting}:")
    print(f"  {1000 * cpu / resources:.2f} ms CPU per resource ({cpu:.2f} s CPU, {wall:.2f} s wall)")
    print(f"  of which the recording monitor {1000 * monitor / resources:.2f} ms and the garbage collector "
          f"{1000 * collector / resources:.2f} ms; the rest is the program and the SDK")


if __name__ == "__main__":
    main()
