"""Benchmark of the offline check against its floor and its yardstick, and how it grows with models.

In one run it prints:

- the import floor: a fresh interpreter importing exactly the Pulumi SDK modules the prod program
  loads (the list is taken from a real recording, so it follows the program as it grows);
- ``python -m automation check`` for dev and prod;
- checkov (from the benchmark's own environment, ``.venv-bench``) scanning the manifests the prod
  check wrote;
- the check for generated stacks of 10, 100 and 500 served models (``generated_stack.py``);

- for the largest generated stack, the same program recorded alone in a fresh interpreter (no
  pack, no report, no files): the memory floor the check's peak is judged against;
- how many times one program run simulates the cluster's capacity (``cProfile``'s call count of
  ``policies.capacity.simulate.simulate`` while the prod program is recorded);

each as the median wall time of whole processes (start-up included) with min-max, and the peak
resident memory of the largest process; then the ratios the check is judged by, each against its
target (``TARGETS``). The table is also
written to ``build/bench/check.md``, and a plot of time and memory against models to
``build/bench/check-models.png`` beside it (drawn by matplotlib in ``.venv-bench``). On a shared
machine wall times move with the load: read the spread, and compare ratios taken in one run.
Prints figures; asserts nothing.

    python benchmarks/bench_check.py [--runs 5] [--models 10 100 500] [--model-runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.generated_stack import write_stack  # noqa: E402

BENCH_VENV = ROOT / ".venv-bench"
OUT = ROOT / "build" / "bench"
SDK_PACKAGES = ("pulumi_aws", "pulumi_eks", "pulumi_kubernetes", "pulumi_random")

#: What the check is judged by, as ratios of wall times taken in the same round: the prod check
#: against the import floor (the check should cost little beyond loading the SDK the program needs)
#: and against checkov on the same manifests (a static scanner that runs no program); the check of
#: ``models`` generated models against the prod check; its peak memory against recording the same
#: program alone (what the pack, the report and the files add); and capacity simulations per
#: program run (the blueprint is judged once).
TARGETS = {"prod_over_floor": 1.5, "prod_over_checkov": 1.0, "models": 500, "models_over_prod": 8.0,
           "peak_over_recording": 1.10, "simulations_per_run": 1}

#: Run in a fresh interpreter: record the prod plan and print the SDK modules it really loaded
#: (the SDKs register their sub-packages lazily; a registered but untouched one costs nothing).
_LOADED_SDK_MODULES = """
import json, sys, types
sys.path.insert(0, {root!r})
from automation.offline.plan import record_plan
from automation.stacks import load_stack
from components.settings import config_strings
config, settings = load_stack("prod")
record_plan("prod", config_strings(config), region=settings.region)
loaded = sorted(name for name, module in sys.modules.items()
                if name.split(".")[0] in {packages!r} and type(module) is types.ModuleType)
print(json.dumps(loaded))
"""

#: Run in a fresh interpreter: record a stack's program alone, nothing else.
_RECORD_ALONE = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from automation.offline.plan import record_plan
from automation.stacks import load_stack
from components.settings import config_strings
config, settings = load_stack({stack!r}, path=Path({path!r}))
record_plan({stack!r}, config_strings(config), region=settings.region)
"""

#: Run in a fresh interpreter: record the prod program and print how many times the capacity
#: simulation was entered (a profile hook counting calls of its code object).
_SIMULATIONS = """
import importlib, sys, threading
sys.path.insert(0, {root!r})
from automation.offline.plan import record_plan
from automation.stacks import load_stack
from components.settings import config_strings
code, calls = importlib.import_module("policies.capacity.simulate").simulate.__code__, [0]
def count(frame, event, arg):
    if event == "call" and frame.f_code is code:
        calls[0] += 1
config, settings = load_stack("prod")
threading.setprofile(count)
sys.setprofile(count)
record_plan("prod", config_strings(config), region=settings.region)
sys.setprofile(None)
print(calls[0])
"""

_FLOOR = """
import importlib
for name in {modules!r}:
    # A lazily registered SDK module runs on its first attribute access.
    getattr(importlib.import_module(name), "floor_probe", None)
"""


@dataclass
class Row:
    what: str
    command: list[str]
    ok: tuple[int, ...] = (0,)
    resources: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.peak_mib = 0.0
        self.stdout = ""

    def measure(self) -> float:
        wall, cpu, rss, self.stdout = run(self.command, ok=self.ok)
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.peak_mib = max(self.peak_mib, rss)
        return wall

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    def cells(self) -> list[str]:
        spread = f"{min(self.wall):.2f}-{max(self.wall):.2f}" if len(self.wall) > 1 else "-"
        return [self.what, "" if self.resources is None else str(self.resources), f"{self.median:.2f}", spread,
                f"{statistics.median(self.cpu):.2f}", str(len(self.wall)), f"{self.peak_mib:.0f}", self.note]


def run(command: list[str], *, ok: tuple[int, ...] = (0,)) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + system, waited-for children included), peak RSS (MiB) of
    the largest of them, and stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode not in ok:
            raise SystemExit(f"{' '.join(command)} exited {process.returncode}:\n{err.read().decode()[-3000:]}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read().decode()


def sdk_modules() -> list[str]:
    code = _LOADED_SDK_MODULES.format(root=str(ROOT), packages=SDK_PACKAGES)
    return json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                     check=True).stdout.splitlines()[-1])


def check_command(stack: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "automation", "check", "--stack", stack, "--out", str(out), "--output", "json", *extra]


def resources_of(stdout: str) -> int:
    return json.loads(stdout)["summary"]["resource_count"]


def render(rows: list[Row]) -> str:
    header = ["what", "resources", "wall s (median)", "wall min-max", "cpu s", "runs", "peak MiB", ""]
    table = [header] + [r.cells() for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |" for line in table]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of the floor, dev, prod and checkov")
    parser.add_argument("--models", type=int, nargs="*", default=[10, 100, 500])
    parser.add_argument("--model-runs", type=int, default=3, help="runs per generated stack")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-check-"))
    rows: list[Row] = []
    paired: dict[str, list[float]] = {}
    memory: tuple[float, float] | None = None
    try:
        modules = sdk_modules()
        floor = Row("import floor (SDK modules of the prod program)", [sys.executable, "-c", _FLOOR.format(modules=modules)],
                    note=f"{len(modules)} modules")
        dev = Row("check dev", check_command("dev", work / "dev"))
        # Kept in build/bench/prod: bench_policies.py replays this plan against the pack.
        prod = Row("check prod", check_command("prod", OUT / "prod"))
        checkov_bin = BENCH_VENV / "bin" / "checkov"
        # --skip-download: no network; exit 1 means "found failed checks", which is its normal answer.
        checkov = Row("checkov on the prod manifests", [str(checkov_bin), "-d", str(OUT / "prod" / "manifests"),
                      "--framework", "kubernetes", "--quiet", "--compact", "--skip-download", "-o", "json"], ok=(0, 1))
        if not checkov_bin.exists():
            print(f"checkov not found at {checkov_bin}; `make bench` creates the benchmark's environment")
        rows += [floor, dev, prod] + ([checkov] if checkov_bin.exists() else [])
        # Rounds interleave the commands, so a change of load hits all of them; ratios are per round.
        for _ in range(args.runs):
            for row in rows:
                row.measure()
            paired.setdefault("prod / floor", []).append(prod.wall[-1] / floor.wall[-1])
            if checkov_bin.exists():
                paired.setdefault("prod / checkov", []).append(prod.wall[-1] / checkov.wall[-1])
        dev.resources, prod.resources = resources_of(dev.stdout), resources_of(prod.stdout)
        checkov.note = f"{len(list((OUT / 'prod' / 'manifests').glob('*.yaml')))} files"
        scaling = []
        for models in args.models:
            stack_file, policy = write_stack(models, work)
            row = Row(f"check, {models} models", check_command(f"bench{models}", work / f"bench{models}",
                      "--stack-file", str(stack_file), "--policy-config", str(policy)))
            for _ in range(args.model_runs):
                row.measure()
                paired.setdefault(f"{models} models / prod", []).append(row.wall[-1] / prod.measure())
            row.resources = resources_of(row.stdout)
            rows.append(row)
            if models == TARGETS["models"]:
                alone = Row(f"recording alone, {models} models", [sys.executable, "-c", _RECORD_ALONE.format(
                    root=str(ROOT), stack=f"bench{models}", path=str(stack_file))], resources=row.resources,
                    note="the program under the mock runtime, nothing else")
                for _ in range(args.model_runs):
                    alone.measure()
                rows.append(alone)
                memory = (row.peak_mib, alone.peak_mib)
            scaling.append({"models": models, "resources": row.resources, "seconds": row.median,
                            "cpu_seconds": statistics.median(row.cpu), "peak_mib": row.peak_mib,
                            "phases": json.loads(row.stdout)["seconds"]})
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = render(rows)
    targets = {"prod / floor": TARGETS["prod_over_floor"], "prod / checkov": TARGETS["prod_over_checkov"],
               f"{TARGETS['models']} models / prod": TARGETS["models_over_prod"]}
    ratios = ["ratios of wall times taken in the same round (median, min-max), against their targets:"]
    for name, values in paired.items():
        median = statistics.median(values)
        target = targets.get(name)
        verdict = "" if target is None else f"; target <= {target:g}x: {'met' if median <= target else 'NOT met'}"
        ratios.append(f"  {name}: {median:.2f}x ({min(values):.2f}-{max(values):.2f}, {len(values)} pairs){verdict}")
    if memory:
        check_mib, alone_mib = memory
        over = check_mib / alone_mib
        ratios.append(f"  peak memory at {TARGETS['models']} models, check / recording alone: {over:.2f}x "
                      f"({check_mib:.0f} MiB / {alone_mib:.0f} MiB); target <= {TARGETS['peak_over_recording']:g}x: "
                      f"{'met' if over <= TARGETS['peak_over_recording'] else 'NOT met'}")
    simulations = int(subprocess.run([sys.executable, "-c", _SIMULATIONS.format(root=str(ROOT))], cwd=ROOT,
                                     capture_output=True, text=True, check=True).stdout.split()[-1])
    ratios.append(f"  capacity simulations in one run of the prod program: {simulations}; target "
                  f"{TARGETS['simulations_per_run']}: {'met' if simulations <= TARGETS['simulations_per_run'] else 'NOT met'}")
    ratios.append(f"cpu ratio prod / floor: {statistics.median(prod.cpu) / statistics.median(floor.cpu):.2f}x")
    if scaling:
        per = ", ".join(f"{s['models']}: {1000 * s['seconds'] / s['resources']:.1f}" for s in scaling)
        ratios.append(f"ms per resource (whole command): {per}")
        if len(scaling) > 1:
            a, b = scaling[-2], scaling[-1]
            marginal = (b["seconds"] - a["seconds"]) / (b["resources"] - a["resources"]) * 1000
            ratios.append(f"marginal ms per resource from {a['models']} to {b['models']} models: {marginal:.2f}")
        for point in scaling:
            phases = point["phases"]
            ratios.append(f"phases at {point['models']} models (last run, inside the command): recording with the pack "
                          f"analyzing beside it {phases['record']:.2f} s, summary and manifests with the pack analyzing "
                          f"the stack beside them {phases['summary']:.2f} s, the pack's remaining answers "
                          f"{phases['analyze']:.2f} s, files {phases['write']:.2f} s")
    text = f"offline check, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end\n\n{table}\n\n" + "\n".join(ratios)
    print(text)
    (OUT / "check.md").write_text(text + "\n")
    (OUT / "check-models.json").write_text(json.dumps({"prod_seconds": prod.median, "scaling": scaling, "targets": TARGETS,
                                                           "recording_alone_mib": memory[1] if memory else None},
                                                          indent=2))
    plot = BENCH_VENV / "bin" / "python"
    if scaling and plot.exists():
        subprocess.run([str(plot), str(ROOT / "benchmarks" / "plot_models.py"), str(OUT / "check-models.json"),
                        str(OUT / "check-models.png")], check=True)
        print(f"\ntable: {OUT / 'check.md'}; plot: {OUT / 'check-models.png'}")


if __name__ == "__main__":
    main()
