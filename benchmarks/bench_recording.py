"""Benchmark of recording under the SDK's mock runtime, per resource: the program's plan for a
generated stack of N served models, recorded in this process (imports excluded, after one warm-up
recording), with the CPU the garbage collector took.

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

from automation.offline.check import fewer_collections  # noqa: E402
from automation.offline.plan import record_plan  # noqa: E402
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
    gc_seconds = [0.0]
    started: list[float] = []

    def on_gc(phase: str, _info: dict) -> None:
        if phase == "start":
            started.append(time.process_time())
        elif started:
            gc_seconds[0] += time.process_time() - started.pop()

    gc.callbacks.append(on_gc)
    record_plan("warm-up", config_strings(config), region=settings.region)  # imports, type hints
    rows = []
    for _ in range(args.rounds):
        gc_seconds[0] = 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        with contextlib.nullcontext() if args.default_gc else fewer_collections():
            plan = record_plan(f"bench{args.models}", config_strings(config), region=settings.region)
        rows.append((time.process_time() - cpu, time.perf_counter() - wall, gc_seconds[0], len(plan.resources)))
    cpu, wall, collector, resources = (statistics.median(column) for column in zip(*rows))
    collector_setting = "default collector thresholds" if args.default_gc else "the check's collector settings"
    print(f"recording {int(resources)} resources ({args.models} models) on the SDK's mock runtime, median of "
          f"{args.rounds} rounds in a warm process, {collector_setting}:")
    print(f"  {1000 * cpu / resources:.2f} ms CPU per resource ({cpu:.2f} s CPU, {wall:.2f} s wall), of which the "
          f"garbage collector {1000 * collector / resources:.2f} ms")


if __name__ == "__main__":
    main()
