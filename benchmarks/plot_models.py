"""Plot of the check's wall time and peak memory against served models (run by bench_check.py in
the benchmark's own environment, which has matplotlib).

    .venv-bench/bin/python benchmarks/plot_models.py build/bench/check-models.json build/bench/check-models.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(data_path: str, png_path: str) -> None:
    data = json.load(open(data_path))
    points = data["scaling"]
    models = [p["models"] for p in points]
    seconds = [p["seconds"] for p in points]
    memory = [p["peak_mib"] for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    left.plot(models, seconds, "o-", color="tab:blue", label="check (median wall)")
    # The straight line through the first and last point: how far the middle sits from linear.
    left.plot(models, [p["cpu_seconds"] for p in points], "^--", color="tab:purple",
              label="check (median CPU, all processes)")
    left.plot([models[0], models[-1]], [seconds[0], seconds[-1]], ":", color="gray", label="linear, first to last")
    left.axhline(data["prod_seconds"], color="tab:green", linestyle="--", label=f"prod check ({data['prod_seconds']:.1f} s)")
    # The targets for 500 models (bench_check.TARGETS), drawn so the gap (or its absence) is visible.
    targets = data["targets"]
    time_target = targets["models_over_prod"] * data["prod_seconds"]
    # Memory is judged against the same program recorded alone at the largest stack.
    alone = data.get("recording_alone_mib")
    memory_target = targets["peak_over_recording"] * alone if alone else None
    left.axhline(time_target, color="tab:red", linestyle="-.", linewidth=1,
                 label=f"target at {targets['models']} models: {targets['models_over_prod']:g}x prod ({time_target:.1f} s)")
    left.set_xlabel("served models")
    left.set_ylabel("seconds")
    left.set_title("Offline check: wall time")
    for m, s, p in zip(models, seconds, points):
        left.annotate(f"{s:.1f} s\n{p['resources']} res.", (m, s), textcoords="offset points", xytext=(6, -22), fontsize=8)
    left.legend(fontsize=8, loc="upper left")
    right.plot(models, memory, "s-", color="tab:orange", label="peak RSS (largest process of the check)")
    if memory_target is not None:
        right.axhline(alone, color="tab:gray", linestyle=":", linewidth=1,
                      label=f"recording alone at {targets['models']} models ({alone:.0f} MiB)")
        right.axhline(memory_target, color="tab:red", linestyle="-.", linewidth=1,
                      label=f"target: {targets['peak_over_recording']:g}x recording alone ({memory_target:.0f} MiB)")
    right.set_xlabel("served models")
    right.set_ylabel("MiB")
    right.set_title("Offline check: peak memory")
    for m, v in zip(models, memory):
        right.annotate(f"{v:.0f} MiB", (m, v), textcoords="offset points", xytext=(6, -12), fontsize=8)
    right.legend(fontsize=8, loc="upper left")
    cpu = [p["cpu_seconds"] for p in points]
    left.set_ylim(bottom=0, top=max(seconds + cpu + [time_target]) * 1.15)
    right.set_ylim(bottom=0, top=max(memory + ([memory_target] if memory_target else [])) * 1.25)
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.set_xlim(left=0, right=max(models) * 1.2)
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
