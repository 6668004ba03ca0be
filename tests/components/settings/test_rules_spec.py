"""Cross-field rules (components/settings/rules.py) as a specification: each rule's finding in full
(key, value shown, reason) on a variant of the shipped prod or dev stack, and its passing twin."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError
from tests.support.config_changes import with_changes

DEV, PROD = read_stack_config("dev"), read_stack_config("prod")
INTERACTIVE = "serving.tiers[interactive].models[llama-3-1-70b-instruct-awq]"


def problems_at(base: dict[str, Any], key: str, **changes: Any) -> list[str]:
    """Every problem reported at ``llm-platform:<key>`` for ``base`` with ``changes``."""
    try:
        parse_settings(with_changes(base, changes))
    except SettingsError as error:
        return [str(p) for p in error.problems if p.key == f"llm-platform:{key}"]
    return []


def test_production_endpoint_is_not_open_to_the_world():
    open_world = {"publicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}
    assert problems_at(PROD, "endpoint.publicAccessCidrs", endpoint=open_world) == [
        'llm-platform:endpoint.publicAccessCidrs: got ["0.0.0.0/0"]: contains 0.0.0.0/0 in a production stack; '
        "list your own CIDRs or set endpoint.publicAccess to false"]
    office = {"publicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}
    assert problems_at(PROD, "endpoint.publicAccessCidrs", endpoint=office) == []
    assert problems_at(DEV, "endpoint.publicAccessCidrs", endpoint=open_world) == []


def test_production_pins_its_amis():
    assert problems_at(PROD, "karpenter.allowLatestAmi", karpenter__allowLatestAmi=True) == [
        "llm-platform:karpenter.allowLatestAmi: got true: true in a production stack; pin dated AMI aliases"]
    assert problems_at(DEV, "karpenter.allowLatestAmi", karpenter__allowLatestAmi=True) == []


def test_a_pool_name_is_one_pool_across_kinds():
    assert problems_at(PROD, "karpenter.nodePools[0].name", gpuPools__0__name="gpu-inference") == [
        'llm-platform:karpenter.nodePools[0].name: got "gpu-inference": pool name \'gpu-inference\' is repeated: '
        "gpuPools[0].name has it too; GPU pool names must be unique across gpuPools, karpenter.nodePools, "
        "autoMode.gpuNodePools and hybridNodes.pools (models target pools by name)"]
    assert problems_at(PROD, "karpenter.nodePools[0].name", gpuPools__0__name="inference-t4") == []


def test_the_interactive_tier_keeps_two_replicas_in_production():
    assert problems_at(PROD, f"{INTERACTIVE}.replicas.min",
                       serving__tiers__0__models__0__replicas={"min": 1, "max": 4}) == [
        f"llm-platform:{INTERACTIVE}.replicas.min: got 1: in a production stack the interactive tier keeps at "
        "least 2 so one node loss or drain never takes the model down"]
    assert problems_at(PROD, f"{INTERACTIVE}.replicas.min",
                       serving__tiers__0__models__0__replicas={"min": 2, "max": 4}) == []
    assert problems_at(DEV, "serving.tiers[interactive].models[llama-3-1-8b-instruct].replicas.min",
                       serving__tiers__0__models__0__replicas={"min": 1, "max": 2}) == []


def test_the_interactive_tier_runs_on_demand_in_production():
    """gpu-inference allows spot (capacityTypes [on-demand, spot]); gpu-interactive is on-demand only."""
    assert problems_at(PROD, f"{INTERACTIVE}.pool", serving__tiers__0__models__0__pool="gpu-inference") == [
        f'llm-platform:{INTERACTIVE}.pool: got "gpu-inference": allows Spot capacity; in production the interactive '
        "tier runs on an on-demand-only pool (a Spot reclaim would take replicas away under load)"]
    assert problems_at(PROD, f"{INTERACTIVE}.pool") == []


def test_production_keeps_a_warm_replica_of_every_model():
    batch = "serving.tiers[batch].models[qwen2-5-32b-instruct]"
    assert problems_at(PROD, f"{batch}.replicas.min", serving__tiers__2__models__0__replicas={"min": 0, "max": 4}) == [
        f"llm-platform:{batch}.replicas.min: got 0: 0 in a production stack; keep at least 1 warm replica"]
    assert problems_at(PROD, f"{batch}.replicas.min", serving__tiers__2__models__0__replicas={"min": 1, "max": 4}) == []


def test_a_model_names_a_gpu_pool_that_can_hold_it():
    batch = "serving.tiers[batch].models[qwen2-5-32b-instruct]"
    [unknown] = problems_at(PROD, f"{batch}.pool", serving__tiers__2__models__0__pool="inference-t4")
    assert unknown.startswith(f'llm-platform:{batch}.pool: got "inference-t4": not a GPU pool; allowed: ')
    assert "inference-a10g" in unknown and "gpu-interactive" in unknown
    assert problems_at(PROD, f"{batch}.pool", serving__tiers__2__models__0__pool="gpu-training") == [
        f'llm-platform:{batch}.pool: got "gpu-training": a gpu-training pool; serve from gpu-inference pools']
    # g6e.2xlarge, the roomiest type of inference-l40s, has 1 GPU: tensor parallelism stays within a node
    assert problems_at(PROD, f"{batch}.gpusPerReplica", serving__tiers__2__models__0__gpusPerReplica=2) == [
        f"llm-platform:{batch}.gpusPerReplica: got 2: 'inference-l40s' nodes have at most 1 GPUs; tensor "
        "parallelism stays within one node"]


def test_a_hugging_face_source_needs_the_token():
    source = {"huggingFace": "Qwen/Qwen2.5-32B-Instruct-AWQ"}
    [problem] = problems_at(PROD, "huggingFaceToken", serving__tiers__2__models__0__source=source)
    assert problem == ("llm-platform:huggingFaceToken: got (missing): serving.tiers[batch].models[qwen2-5-32b-instruct] "
                       "loads from Hugging Face; set the token with `pulumi config set --secret "
                       "llm-platform:huggingFaceToken`")
    assert problems_at(PROD, "huggingFaceToken") == []


def test_bedrock_fallbacks_need_a_region():
    assert problems_at(PROD, "serving.gateway.bedrockRegion", serving__gateway__bedrockRegion=None) == [
        "llm-platform:serving.gateway.bedrockRegion: got (missing): required when bedrockModels are listed; an AWS "
        "region such as us-east-1"]
    assert problems_at(PROD, "serving.gateway.bedrockRegion", serving__gateway__bedrockRegion=None,
                       serving__gateway__bedrockModels=[], serving__gateway__bedrockEmbeddingModels=[]) == []


@pytest.mark.parametrize("days, ok", [(29, False), (30, True)])
def test_retention_covers_the_gpu_hour_window(days, ok):
    """The GPU-hour budget rule reads 30 days of samples."""
    found = problems_at(PROD, "observability.prometheus.retentionDays", observability__prometheus__retentionDays=days)
    assert found == ([] if ok else [
        f"llm-platform:observability.prometheus.retentionDays: got {days}: shorter than the 30-day window of the "
        "GPU-hour budget rule; keep at least 30"])


def test_production_runs_two_prometheus_replicas():
    assert problems_at(PROD, "observability.prometheus.replicas", observability__prometheus__replicas=1) == [
        "llm-platform:observability.prometheus.replicas: got 1: in a production stack run 2 so alerts and KEDA's "
        "queries survive a Prometheus restart"]
    assert problems_at(PROD, "observability.prometheus.replicas", observability__prometheus__replicas=2) == []
    assert problems_at(DEV, "observability.prometheus.replicas", observability__prometheus__replicas=1) == []


def test_alert_routes_name_known_tiers():
    assert problems_at(PROD, "observability.alerting.routes[1].tiers",
                       observability__alerting__routes__1__tiers=["interactive", "premium"]) == [
        'llm-platform:observability.alerting.routes[1].tiers: got ["interactive", "premium"]: names unknown '
        "tier(s) premium; tiers: batch, embedding, interactive"]
    assert problems_at(PROD, "observability.alerting.routes[1].tiers",
                       observability__alerting__routes__1__tiers=["interactive", "batch"]) == []


def test_a_cold_start_budget_on_a_later_tier_judges_its_models_past_a_tier_without_one():
    """dev's interactive tier (first) sets no budget and its model is passed over; the batch tier's
    qwen2.5-7b still meets its own 300 s budget (it predicts 342.7 s on a new g5.4xlarge: 121 + 109.56 (the
    image with SOCI parallel pull) + 0 + 12.18 (15.23 GB streamed at the 10 Gbps network) + 90 + 10)."""
    batch_budget = {"serving__tiers__1__coldStartBudgetSeconds": 300}
    (problem,) = problems_at(DEV, "serving.tiers[batch].models[qwen2-5-7b-instruct]", **batch_budget)
    assert "is above serving.tiers[batch].coldStartBudgetSeconds 300" in problem
    assert problems_at(DEV, "serving.tiers[interactive].models[llama-3-1-8b-instruct]", **batch_budget) == []


def test_an_unknown_support_type_names_the_key():
    assert problems_at(PROD, "upgradePolicy.supportType", upgradePolicy={"supportType": "standard"}) == [
        "llm-platform:upgradePolicy.supportType: got \"standard\": Input should be 'STANDARD' or 'EXTENDED'"]
    assert problems_at(PROD, "deletionProtection", deletionProtection="yes please") == [
        'llm-platform:deletionProtection: got "yes please": Input should be a valid boolean, unable to interpret input']


def test_a_nodepool_without_size_restrictions_is_budgeted_on_every_size():
    """dev's g5 and g6e NodePools without instanceSizes admit g5.16xlarge ($4.096/GPU-h) and g6e.16xlarge
    ($7.577/GPU-h): the worst case passes the $25,000 budget."""
    base = copy.deepcopy(DEV)
    for pool in base["llm-platform:karpenter"]["nodePools"]:
        pool.pop("instanceSizes")
    (problem,) = problems_at(base, "gpuBudget.monthlyBudgetUsd")
    assert "$50,788/month" in problem and "'gpu-inference': limit 8 GPUs at up to $4.096/GPU-h" in problem
    assert "'gpu-training': limit 4 GPUs at up to $7.577/GPU-h" in problem


def test_a_size_the_families_do_not_sell_names_the_sizes_they_do():
    base = copy.deepcopy(DEV)
    base["llm-platform:karpenter"]["nodePools"][1]["instanceSizes"] = ["xlarge", "3xlarge"]
    assert problems_at(base, "karpenter.nodePools[1].instanceSizes") == [
        "llm-platform:karpenter.nodePools[1].instanceSizes: got [\"xlarge\", \"3xlarge\"]: '3xlarge' not sold "
        "in g6e; sizes: xlarge, 2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge, 48xlarge"]
