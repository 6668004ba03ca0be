"""serving.tiers[].coldStartBudgetSeconds: each model's predicted cold start (policies/capacity/cold_start.py
on its pool's planning instance) within its tier's budget, or a settings problem at the model's key.

Expected figures are the cold-start model's, worked out by hand from docs/cold-start.md: prod's 70B AWQ
model on a new Karpenter g5.12xlarge (40 Gbps, root volume 750 MiB/s): node 1 + 90 + 65 = 156 s (prod's GPU
Operator: NFD 15 + validator 15 + toolkit-ready poll 5 + device plugin 20 + kubelet status 10 = 65 s); image
12.64 GB at 750 MiB/s + 28.60 GB unpacked at 150 MiB/s = 16.07 + 181.83 = 197.91 s serially, and its node
class turns on SOCI parallel pull (0.532 of a serial pull, measured): 105.29 s; weights streamed (no copy), load
39.80 GB at 32 x 85 MB/s = 14.63 s; compile 60 + 30 = 90 s; readiness 10 s: 156 + 105.29 + 14.63 + 90 + 10 =
375.92 -> 376 s.
"""

from __future__ import annotations

import copy

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError

PROD_70B = "llm-platform:serving.tiers[interactive].models[llama-3-1-70b-instruct-awq]"


def _with_budget(stack: str, tier: str, budget: object) -> dict:
    config = copy.deepcopy(read_stack_config(stack))
    serving = config["llm-platform:serving"]
    for entry in serving["tiers"]:
        if entry["name"] == tier:
            entry["coldStartBudgetSeconds"] = budget
    return config


def _problems(config: dict) -> list:
    with pytest.raises(SettingsError) as raised:
        parse_settings(config)
    return raised.value.problems


def test_prod_sets_a_budget_its_interactive_model_fits():
    settings = parse_settings(read_stack_config("prod"))
    interactive = next(t for t in settings.serving.tiers if t.name == "interactive")
    assert interactive.cold_start_budget_seconds == 900


def test_a_tighter_budget_names_the_model_the_dominant_step_and_the_numbers():
    (problem,) = _problems(_with_budget("prod", "interactive", 300))
    assert problem.key == PROD_70B
    # Prod streams the 70B model's weights (weights: stream, 32 S3 readers): no copy step, a 15 s load.
    # With SOCI parallel pull the image (105 s) no longer dominates: the node (156 s) does.
    assert problem.value == 376
    assert problem.reason.startswith(
        "predicted cold start 376 s on a new g5.12xlarge of Karpenter NodePool 'gpu-interactive' is above "
        "serving.tiers[interactive].coldStartBudgetSeconds 300; the node step dominates with 156 s "
        "(Karpenter: Karpenter batch idle duration 1 s + EC2 launch, boot and node join 90 s + NFD labels the node as "
        "a GPU node 15 s + GPU Operator driver and toolkit validations 15 s + operator's device plugin waits for "
        "toolkit-ready 5 s + device plugin pod start and kubelet registration 20 s + kubelet node status update 10 s); "
        "steps: node 156 s, image 105 s, weights 0 s, load 15 s, compile 90 s, readiness 10 s.")


def test_the_budget_is_judged_at_the_pools_planning_instance_and_capacity_source():
    """dev's 8B model runs on a managed group Cluster Autoscaler grows: its node step is 10 + 30 + 90 + 30 =
    160 s (Karpenter's is 121 s), on a g5.2xlarge (5 Gbps, 500 MiB/s root volume): the image 24.11 + 181.83 =
    205.94 s serially x 0.532 (SOCI parallel pull) = 109.56 s. Its s3 safetensors stream by default: no weights
    step, and the load is 8,030,261,248 parameters x 2 bytes = 16,060,522,496 B at min(16 readers x 85 MB/s =
    1.36 GB/s, the network's 5000 Mbps = 625 MB/s, host-to-GPU 25 GB/s) = 25.70 s:
    160 + 109.56 + 0 + 25.70 + 90 + 10 = 395.26 -> 395 s in all (downloaded it was 430.8: 30.63 s copy + 30.63 s
    disk read)."""
    (problem,) = _problems(_with_budget("dev", "interactive", 390))
    assert problem.key == "llm-platform:serving.tiers[interactive].models[llama-3-1-8b-instruct]"
    assert problem.value == 395
    assert "on a new g5.2xlarge of managed node group 'inference'" in problem.reason
    assert "steps: node 160 s, image 110 s, weights 0 s, load 26 s, compile 90 s, readiness 10 s." in problem.reason
    assert parse_settings(_with_budget("dev", "interactive", 396)) is not None


def test_a_budget_only_judges_its_own_tier():
    """dev's batch model predicts 342.7 s (121 + 109.56 + 12.18 streamed + 100), above a 300 s interactive budget,
    which names only the interactive model (395 s)."""
    (problem,) = _problems(_with_budget("dev", "interactive", 300))
    assert problem.key.endswith("models[llama-3-1-8b-instruct]")


@pytest.mark.parametrize("budget", [29, 7201, 0, -5, "soon", True])
def test_a_budget_out_of_range_is_refused_at_its_key(budget):
    problems = _problems(_with_budget("prod", "interactive", budget))
    assert [p.key for p in problems] == ["llm-platform:serving.tiers[0].coldStartBudgetSeconds"]
