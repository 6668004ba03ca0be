"""A stack with N served models, derived from prod, for measuring how the check grows with models.

The models are valid and fit their pools: each is a one-GPU vLLM deployment of a catalogued 8B
model whose weights and KV cache fit an A10G at its memory utilization, spread round-robin over
prod's three tiers and over the pools that hold A10Gs (the managed ``inference-a10g`` group and the
Karpenter ``gpu-inference`` NodePool); each tier's quota covers its models at ``replicas.max`` plus
one surge pod each, and the pools' GPU capacity covers every model at ``replicas.max`` at once. A
stack of many models is a catalogue that scales idle models to zero, so the stack is not
``production`` (production refuses scale-to-zero) and the policy config is prod's with the GPU cap
and the monthly budget raised to what the pools can reach. Each model names only what differs from
the settings' defaults (one GPU, 8192 tokens, 4 CPUs): the engine hands the whole configuration to
the program and the policy pack in one environment variable, which Linux caps at 128 KiB, and a
500-model stack must fit it (the offline check refuses one that does not, as the CLI would fail). Both benchmarks that grow with models
(``bench_check.py``, ``bench_capacity.py``) use this one generator.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
NS = "llm-platform"


def stack_config(models: int, base: str = "prod") -> dict[str, Any]:
    """The ``config:`` block of a stack with ``models`` served models."""
    document = yaml.safe_load((ROOT / f"Pulumi.{base}.yaml").read_text())
    config = copy.deepcopy(document["config"])
    config[f"{NS}:environment"] = f"bench{models}"
    config[f"{NS}:production"] = False
    serving = config[f"{NS}:serving"]
    tiers = serving["tiers"]
    pools = ["inference-a10g", "gpu-inference"]
    per_tier: list[list[dict[str, Any]]] = [[] for _ in tiers]
    for i in range(models):
        per_tier[i % len(tiers)].append(
            {
                "name": f"model-{i:04d}",
                "source": {"s3": f"s3://bench-models/m{i:04d}/"},
                "pool": pools[i % len(pools)],
                "catalog": "llama-3.1-8b-instruct",
                "replicas": {"min": 0, "max": 1},
                "memory": "24Gi",
                "cacheSizeGib": 50,
            }
        )
    for tier, served in zip(tiers, per_tier):
        tier["models"] = served
        # max replicas plus one rollout surge pod per model (the capacity simulation's quota rule)
        pods = 2 * max(1, len(served))
        tier["quota"] = {"gpus": pods, "cpu": str(4 * pods), "memory": f"{24 * pods}Gi"}
    on_managed = sum(1 for i in range(models) if pools[i % len(pools)] == "inference-a10g")
    for pool in config[f"{NS}:gpuPools"]:
        if pool["name"] == "inference-a10g":
            pool["scaling"]["maxSize"] = max(pool["scaling"]["maxSize"], on_managed)
    for pool in config[f"{NS}:karpenter"]["nodePools"]:
        if pool["name"] == "gpu-inference":
            pool["gpuLimit"] = max(pool["gpuLimit"], models - on_managed)
    budget, gpus = config[f"{NS}:gpuBudget"], _worst_case_gpus(config)
    budget["maxGpus"] = max(budget["maxGpus"], gpus)
    budget["monthlyBudgetUsd"] = max(budget["monthlyBudgetUsd"], int(gpus * 60 * 730) + 1)
    return config


def write_stack(models: int, directory: Path, base: str = "prod") -> tuple[Path, Path]:
    """Write ``Pulumi.bench<N>.yaml`` and its policy config into ``directory``; return both paths."""
    config = stack_config(models, base)
    stack_file = directory / f"Pulumi.bench{models}.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    policy = json.loads((ROOT / "policies" / "config" / f"{base}.json").read_text())
    # The pack's cap and budget repeat the stack's gpuBudget (the offline check refuses a mismatch).
    policy["gpu-capacity-cap"]["maxGpus"] = config[f"{NS}:gpuBudget"]["maxGpus"]
    policy["gpu-monthly-budget"]["monthlyBudgetUsd"] = config[f"{NS}:gpuBudget"]["monthlyBudgetUsd"]
    policy_file = directory / f"policy-bench{models}.json"
    policy_file.write_text(json.dumps(policy, indent=2) + "\n")
    return stack_file, policy_file


def _worst_case_gpus(config: dict[str, Any]) -> int:
    """An upper bound on GPUs the pools can reach (8 per node for managed groups, the NodePools' limits)."""
    managed = sum(8 * p["scaling"]["maxSize"] for p in config[f"{NS}:gpuPools"])
    karpenter = sum(p["gpuLimit"] for p in config[f"{NS}:karpenter"]["nodePools"])
    return managed + karpenter
