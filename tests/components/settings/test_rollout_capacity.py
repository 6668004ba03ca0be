"""A rollout at peak finishes: ``python -m automation check`` refuses a stack copy
whose pool ceiling has no room for a model's rollout surge pod, or whose model rolls out without
surge while fewer than 2 min replicas keep serving; exit 2, the key to edit and the numbers.

Every model Deployment surges by default (maxSurge 1, maxUnavailable 0): the deployment controller
takes no old pod down before the surge pod is ready, so the pool must hold max replicas + 1 with the
other models at min. ``rollout: noSurge`` (maxSurge 0, maxUnavailable 1) needs no room but takes one
replica down first, so it is allowed only with ``replicas.min >= 2`` (one keeps serving) or 0 (a
scale-to-zero model already accepts going cold).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from automation import exit_codes
from automation.cli import main
from automation.stacks import read_stack_config
from components import contract
from components.capacity_check import parse_settings
from components.settings import SettingsError
from components.specs.blueprint import blueprint
from tests.support.config_changes import with_changes

LLAMA_70B = "serving.tiers[interactive].models[llama-3-1-70b-instruct-awq]"
LLAMA_8B = "serving.tiers[interactive].models[llama-3-1-8b-instruct]"


def check(capsys, tmp_path: Path, stack: str, changes: dict[str, Any]) -> tuple[int, list[str]]:
    """``check`` on a copy of ``stack`` with ``changes``: exit code and the problem lines."""
    stack_file = tmp_path / f"Pulumi.{stack}.yaml"
    config = with_changes(read_stack_config(stack), changes, separator=".")
    stack_file.write_text(yaml.safe_dump({"config": config}))
    capsys.readouterr()
    code = main(["check", "--stack", stack, "--stack-file", str(stack_file), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    return code, [line.strip().removeprefix("- ").removeprefix("error: ") for line in output.splitlines()]


def refused_at(lines: list[str], key: str) -> str:
    (line,) = [line for line in lines if line.startswith(f"llm-platform:{key}:")]
    return line


REFUSED = {
    # id: (stack, changes, key named, fragments of the reason)
    "prod-gpu-interactive-16": (
        "prod", {"karpenter.nodePools.1.gpuLimit": 16}, "karpenter.nodePools[1].gpuLimit",
        ["got 16", "A rollout of Deployment serving-interactive/llama-3-1-70b-instruct-awq at its 4 max replicas "
         "stalls on Karpenter NodePool 'gpu-interactive'",
         "4 replicas x 4 GPUs + 1 surge x 4 GPUs = 20 GPUs", "needs 20 GPUs of g5.12xlarge", "allows limit 16"]),
    "prod-inference-l40s-4": (
        "prod", {"gpuPools.1.scaling.maxSize": 4}, "gpuPools[1].scaling.maxSize",
        ["got 4", "serving-batch/qwen2-5-32b-instruct at its 4 max replicas stalls on managed node group "
         "'inference-l40s'", "4 replicas x 1 GPUs + 1 surge x 1 GPUs = 5 GPUs", "needs 5 nodes of g6e.xlarge",
         "allows max 4"]),
    "dev-inference-3": (
        "dev", {"gpuPools.0.scaling.maxSize": 3}, "gpuPools[0].scaling.maxSize",
        ["got 3", "serving-interactive/llama-3-1-8b-instruct at its 3 max replicas stalls on managed node group "
         "'inference'", "3 replicas x 1 GPUs + 1 surge x 1 GPUs = 4 GPUs", "needs 4 nodes of g5.2xlarge",
         "allows max 3"]),
    "dev-no-surge-with-one-warm-replica": (
        "dev", {"serving.tiers.0.models.0.rollout": "noSurge", "serving.tiers.0.models.0.replicas.min": 1},
        f"{LLAMA_8B}.rollout",
        ['got "noSurge"', "rolls out with maxSurge: 0, maxUnavailable: 1", "at its 1 min replica(s)",
         "leaving 0 serving", "needs min replicas >= 2 (or 0, a model that may go cold anyway)"]),
    "prod-batch-no-surge-one-min": (
        # qwen at its ceiling (maxSize 4 = its max) would need noSurge, but its min of 1 would then serve nothing
        "prod", {"serving.tiers.2.models.0.rollout": "noSurge", "gpuPools.1.scaling.maxSize": 4},
        "serving.tiers[batch].models[qwen2-5-32b-instruct].rollout",
        ['got "noSurge"', "at its 1 min replica(s)", "leaving 0 serving", "needs min replicas >= 2"]),
    "prod-gpu-limit-below-max-replicas": (
        # 4 x 4-GPU replicas need 4 g5.12xlarge nodes = 16 GPUs: nodes count GPUs, not pods
        "prod", {"karpenter.nodePools.1.gpuLimit": 12}, f"{LLAMA_70B}.replicas.max",
        ["got 4", "can never reach its 4 max replicas", "need 16 GPUs of g5.12xlarge", "allows limit 12"]),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_check_refuses_a_rollout_that_cannot_finish(case, capsys, tmp_path):
    stack, changes, key, fragments = REFUSED[case]
    code, lines = check(capsys, tmp_path, stack, changes)
    assert code == exit_codes.USAGE == 2
    line = refused_at(lines, key)
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line}"
    assert not (tmp_path / "out").exists()


def test_prod_interactive_at_a_16_gpu_ceiling_may_roll_out_without_surge():
    """min 2 keeps one replica serving while the other is replaced: the pool needs no room beyond 16."""
    config = with_changes(read_stack_config("prod"), {"karpenter.nodePools.1.gpuLimit": 16,
                                                      "serving.tiers.0.models.0.rollout": "noSurge"}, separator=".")
    settings = parse_settings(config)
    (deployment,) = [r for r in blueprint(settings).objects
                     if r.type == "kubernetes:apps/v1:Deployment" and r.name == "llama-3-1-70b-instruct-awq"]
    assert deployment.props["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def test_a_scale_to_zero_model_at_its_pool_ceiling_may_roll_out_without_surge():
    """dev's one-node sandbox shape: 1 max replica on a 1-node pool, min 0. Surging stalls (1 + 1 > 1);
    taking the one replica down first is what scale-to-zero already accepts."""
    one_node = {"gpuPools.0.scaling.maxSize": 1, "serving.tiers.0.models.0.replicas.max": 1}
    with pytest.raises(SettingsError) as caught:
        parse_settings(with_changes(read_stack_config("dev"), one_node, separator="."))
    (problem,) = caught.value.problems
    assert problem.key == "llm-platform:gpuPools[0].scaling.maxSize" and problem.value == 1
    assert "needs 2 nodes of g5.2xlarge, the pool allows max 1" in problem.reason
    no_surge = {**one_node, "serving.tiers.0.models.0.rollout": "noSurge"}
    assert parse_settings(with_changes(read_stack_config("dev"), no_surge, separator=".")).gpu_pools[0].scaling.max_size == 1


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_surge_and_have_room_for_it(stack):
    """The shipped stacks raise ceilings rather than give up surge: every model keeps full capacity."""
    settings = parse_settings(read_stack_config(stack))
    models = [m for t in settings.serving.tiers for m in t.models]
    assert {m.rollout for m in models} == {"surge"}
    assert contract.rollout_strategy("surge") == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    ceilings = {p.name: p.scaling.max_size for p in settings.gpu_pools}
    ceilings |= {p.name: p.gpu_limit for p in settings.karpenter.node_pools}
    assert ceilings == {"dev": {"inference": 4, "gpu-inference": 8, "gpu-training": 4},
                        "prod": {"inference-a10g": 6, "inference-l40s": 5, "gpu-inference": 8,
                                 "gpu-interactive": 20, "gpu-training": 16}}[stack]


@pytest.mark.parametrize("bad", ["sometimes", "NoSurge", 1])
def test_rollout_names_a_known_strategy(bad, capsys, tmp_path):
    code, lines = check(capsys, tmp_path, "dev", {"serving.tiers.0.models.0.rollout": bad})
    assert code == 2
    assert "'surge' or 'noSurge'" in refused_at(lines, "serving.tiers[0].models[0].rollout")
