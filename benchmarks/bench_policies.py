"""Benchmark of the policy pack over its gRPC protocol, the way the CLI drives it.

The pack runs on pulumi_policy's own analyzer loops (it patches nothing), started as the engine
starts it for a preview: the stack's configuration in ``PULUMI_CONFIG`` (``--stack``'s
Pulumi.<stack>.yaml), ``PULUMI_PROJECT``, ``PULUMI_STACK``, ``PULUMI_DRY_RUN=true``.
Figures: pack start-up (process start -> port printed -> channel ready -> GetAnalyzerInfo
answered), Configure, milliseconds per Analyze call (median over all resources, per round, then
the median of rounds; the target is <= 3 ms on the prod plan) and AnalyzeStack time (median of
rounds). The plan is the offline check's ``build/<stack>/plan.json`` (default prod); if it is
missing, a synthetic plan is built from the test builders. Prints figures; asserts nothing.

    python benchmarks/bench_policies.py [plan.json] [--stack prod] [--config policies/config/prod.json] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from automation.offline.pack.runner import PolicyPackRunner, load_plan  # noqa: E402

DEFAULT_PLAN = ROOT / "build" / "prod" / "plan.json"


def synthetic_plan(workloads: int = 24) -> list[dict[str, Any]]:
    """A prod-sized stack from the tests' builders: pools of every shape, agents, workloads, quotas."""
    from tests.policies import builders as b

    resources = [
        b.eks_cluster(), b.aws_cluster(), b.launch_template(), b.ec2nodeclass(),
        b.patch(b.system_node_group(), {"scalingConfig.minSize": 3}), b.gpu_node_group(b.NODE_GROUP_SHAPES[0], "inference-a"),
        b.gpu_node_group(b.NODE_GROUP_SHAPES[1], "inference-b"), b.nodepool("gpu-inference"), b.nodepool("gpu-training"),
        b.helm_release(), b.helm_release("dcgm-exporter", "4.4.1", {"tolerations": [b.GPU_TOLERATION]}),
        b.prometheus_rule("vllm:kv_cache_usage_perc > 0.9", "histogram_quantile(0.95, vllm:time_to_first_token_seconds_bucket) > 2"),
    ]
    kinds = list(b.WORKLOAD_KINDS)
    for i in range(workloads):
        kind = kinds[i % len(kinds)]
        namespace = f"tier-{i % 4}"
        resources.append(b.workload(kind, f"model-{i}", namespace=namespace))
        if i < 4:
            resources.append(b.resource_quota(namespace))
        if kind == "Deployment":
            resources.append({**b.scaled_object(), "name": f"model-{i}", "urn": b.urn("kubernetes:keda.sh/v1alpha1:ScaledObject", f"model-{i}")})
    return resources


def engine_env(stack: str) -> dict[str, str]:
    """The environment the engine gives a policy pack during a preview (``constructEnv``)."""
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["name"]
    return {"PULUMI_CONFIG": pulumi_config(stack), "PULUMI_PROJECT": project, "PULUMI_STACK": stack,
            "PULUMI_DRY_RUN": "true"}


def pulumi_config(stack: str) -> str:
    """``PULUMI_CONFIG`` as the engine sets it for a policy pack: "namespace:key" -> string, structured
    values JSON-encoded (pulumi/pulumi sdk/go/common/resource/plugin/analyzer_plugin.go, constructConfig)."""
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text()).get("config") or {}
    return json.dumps({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", type=Path, default=DEFAULT_PLAN)
    parser.add_argument("--stack", default="prod", help="whose Pulumi.<stack>.yaml goes to PULUMI_CONFIG")
    parser.add_argument("--config", type=Path, default=None, help="default: policies/config/<stack>.json")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pack", type=Path, default=None, help="the pack directory (default: policies/)")
    args = parser.parse_args()

    if args.plan.exists():
        resources, source = load_plan(args.plan), str(args.plan)
    else:
        print(f"{args.plan} not found (run `python -m automation check --stack prod` to create it); "
              f"using a synthetic plan from tests/policies/builders.py")
        resources, source = synthetic_plan(), "synthetic"

    config = args.config or ROOT / "policies" / "config" / f"{args.stack}.json"
    started = time.perf_counter()
    with PolicyPackRunner(args.pack, env=engine_env(args.stack)) as pack:
        info = pack.info()
        info_answered = time.perf_counter() - started
        t = time.perf_counter()
        pack.configure(config)
        configure_ms = (time.perf_counter() - t) * 1000

        round_medians, all_calls, stack_times, findings = [], [], [], 0
        for _ in range(args.rounds):
            calls = []
            for resource in resources:
                t = time.perf_counter()
                findings += len(pack.analyze(resource))
                calls.append((time.perf_counter() - t) * 1000)
            round_medians.append(statistics.median(calls))
            all_calls += calls
            t = time.perf_counter()
            findings += len(pack.analyze_stack(resources))
            stack_times.append((time.perf_counter() - t) * 1000)

    print(f"pack {info.name}@{info.version}: {len(info.policies)} policies; plan {source}: {len(resources)} resources; "
          f"config {config.name}; engine environment of stack {args.stack}; {args.rounds} rounds")
    print(f"start-up: port printed {pack.timings['port_printed'] * 1000:.0f} ms, channel ready "
          f"{pack.timings['channel_ready'] * 1000:.0f} ms, GetAnalyzerInfo answered {info_answered * 1000:.0f} ms")
    print(f"Configure: {configure_ms:.1f} ms")
    print(f"Analyze: {statistics.median(round_medians):.2f} ms per call (median of round medians; mean "
          f"{statistics.mean(all_calls):.2f} ms, p95 {statistics.quantiles(all_calls, n=20)[-1]:.2f} ms, max "
          f"{max(all_calls):.2f} ms; target <= 3 ms); {sum(all_calls) / args.rounds:.0f} ms per round of "
          f"{len(resources)} calls")
    print(f"AnalyzeStack: {statistics.median(stack_times):.1f} ms (median; min {min(stack_times):.1f}, "
          f"max {max(stack_times):.1f})")
    print(f"findings per round: {findings // args.rounds}")


if __name__ == "__main__":
    main()
