"""The offline check's summary: names and sizes from the plan, every GPU count and price from the capacity model."""

from __future__ import annotations

import pytest

from automation.offline.plan import Plan, PlannedResource
from automation.offline.report import summarize
from policies.capacity.cost import per_gpu_hourly_usd
from policies.capacity.engine import cluster_from_resources
from policies.capacity.table import worst_case
from tests.policies.builders import GPU, gpu_node_group, nodepool, patch

G6E = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g6e"]}]


def _plan(*resources: dict) -> Plan:
    return Plan("llm-platform", "synthetic", [PlannedResource(**r) for r in resources])


def test_pool_rows_quote_the_capacity_models_worst_case():
    plan = _plan(
        patch(gpu_node_group(), {"scalingConfig.maxSize": 4, "instanceTypes": ["g5.xlarge", "g5.12xlarge"]}),
        patch(nodepool("capped"), {"spec.limits": {GPU: "64", "nodes": "5"}}),
        patch(nodepool("fixed"), {"spec.template.spec.requirements": G6E, "spec.replicas": 2, "spec.limits": {}}),
    )
    summary = summarize(plan)
    modelled = {p.name: p for p in cluster_from_resources(plan.resources).pools}
    rows = {p.name: p for p in summary.pools}
    assert set(rows) == set(modelled)
    for name, row in rows.items():
        worst = worst_case(modelled[name])
        assert (row.worst_case_gpus, row.worst_case_hourly_usd) == (worst.gpus, round(worst.hourly_usd, 4)), name
        assert row.max_usd_per_gpu_hour == per_gpu_hourly_usd(modelled[name].instances)
    # limits.nodes caps the NodePool's GPU limit; the static pool counts its replicas (the old report did neither).
    assert rows["capped"].worst_case_gpus == 5
    assert rows["inference"].worst_case_gpus == 4 * 4 and rows["inference"].gpu_model == "a10g"
    assert summary.worst_case_gpus == sum(r.worst_case_gpus for r in rows.values())
    assert summary.worst_case_gpu_monthly_usd == pytest.approx(
        sum(r.worst_case_hourly_usd for r in rows.values()) * summary.hours_per_month, abs=0.05)


def test_served_models_are_priced_at_their_pools_dearest_gpu_hour(dev_plan):
    summary = summarize(dev_plan)
    per_gpu = {p.label: p.max_usd_per_gpu_hour for p in summary.pools if p.label}
    assert summary.models
    for model in summary.models:
        assert model.worst_case_gpus == model.max_replicas * model.gpus_per_replica
        assert model.worst_case_monthly_usd == pytest.approx(
            model.worst_case_gpus * per_gpu[model.pool] * summary.hours_per_month, abs=0.01)


def test_served_models_quote_their_cost_per_token_at_the_tier_target(prod_plan):
    """Prod's interactive 70B on the gpu-interactive pool's planning type (g5.12xlarge) at the tier's 0.75
    KV-cache target: the hand-worked figure of tests/policies/capacity/test_throughput_spec.py; the
    embedding model gets none (no decode step)."""
    models = {m.model: m for m in summarize(prod_plan).models}
    llama = models["llama-3-1-70b-instruct-awq"]
    assert (llama.tokens_per_second_at_target, llama.usd_per_million_output_at_target,
            llama.usd_per_million_input_at_target) == (854, 1.845, 0.461)
    assert models["bge-m3"].usd_per_million_output_at_target is None
