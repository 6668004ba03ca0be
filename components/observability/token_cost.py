"""What each token costs: recording rules in the ``llm:`` namespace that price every serving pod's GPUs
at its node's instance type and capacity type, count the tokens vLLM processed, and divide; beside
them, what the model's Bedrock fallback would have charged for the same tokens.

How Prometheus learns what a GPU costs (all through kube-state-metrics, whose allow-list
:data:`components.specs.observability.KSM_LABELS_EXPORTED` exports the labels read here):

- which pods hold GPUs: ``kube_pod_container_resource_requests{resource="nvidia_com_gpu"}`` carries the
  pod's ``node`` once it is bound; pods in phase ``Pending`` (pulling the image, loading weights) or
  ``Running`` hold their GPUs, ``Succeeded``/``Failed`` ones do not;
- which model and tier a pod serves: ``kube_pod_labels`` with the serving pods' own labels
  (``app.kubernetes.io/instance`` is the model, the name vLLM serves it under; ``llm-platform.io/tier``),
  which every pod of a model carries, the pods of a multi-node replica included;
- what the node is: ``kube_node_labels`` with ``node.kubernetes.io/instance-type`` (the kubelet sets it
  from EC2) and the capacity type (``karpenter.sh/capacity-type`` on every Karpenter and Auto Mode node,
  the contract's ``llm-platform.io/capacity-type`` on managed groups);
- what a GPU of that type costs: one constant series per instance type and capacity type, generated from
  the instance catalog's prices in the stack's region (:func:`gpu_prices`), never typed here;
- what an on-prem GPU costs: a hybrid node has no EC2 instance type to price, so a hybrid pool's GPUs are
  priced by the node's pool label (``llm-platform.io/pool``) at the pool's ``costPerGpuHourUsd``, the
  stack's internal chargeback rate (:func:`chargeback_prices`, ``price_basis="chargeback"``). A pool
  without a rate stays unpriced (``llm:model_unpriced_gpus``) rather than costing nothing.

Windows: cost per hour and tokens per hour are instantaneous (5-minute rates); cost per million
tokens and the Bedrock comparison are over the last hour (``:1h``) and the alert over the last day
(``:1d``). A model at zero replicas has no pods: its cost series end at the next evaluation (Prometheus
marks a series a rule stops producing stale), and every division is guarded so that no tokens give no
cost per token rather than a division by zero.

Input and output tokens: one GPU-hour produces both, so the split needs a weight. An output token is
counted as :data:`OUTPUT_INPUT_COST_RATIO` input tokens (the default of Google's GKE Inference
Quickstart cost model, ``google.cloud.gkerecommender.v1.Cost``: "$/output token = GPU $/s /
(1/output-to-input-cost-ratio x input tokens/s + output tokens/s)", ratio 4 when not given).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import contract
from components.observability.metric_contract import (
    KSM_GPU_RESOURCE,
    KSM_NODE_LABELS,
    KSM_NODE_STATUS_ALLOCATABLE,
    KSM_POD_LABELS,
    KSM_POD_PHASE,
    KSM_POD_RESOURCE_REQUESTS,
    VLLM_GENERATION_TOKENS,
    VLLM_KV_CACHE_USAGE,
    VLLM_PROMPT_TOKENS,
    ksm_label,
)
from components.specs.serving import POD_LABELS
from policies.capacity.instances import CATALOG_PATH, load_instances
from policies.capacity.throughput import OUTPUT_INPUT_COST_RATIO

#: Pod phases in which a bound pod holds its GPUs (Pending: pulling the image or loading weights).
GPU_HOLDING_PHASES = ("Pending", "Running")
#: Node labels the rules read (and kube-state-metrics must export).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
KARPENTER_CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
#: Pod labels the rules read: the model (the name vLLM serves it under) and the serving pods' name.
MODEL_POD_LABEL = "app.kubernetes.io/instance"
SERVER_POD_LABEL = "app.kubernetes.io/name"
#: The catalog's capacity types whose price is its own figure; every other capacity type (Spot without a
#: Spot figure, reserved, a node without the label) is priced at the on-demand figure, an upper bound.
ON_DEMAND, SPOT = "on-demand", "spot"
#: Key of an optional Spot table in the instance catalog (same shape as ``onDemandHourlyUsd``).
SPOT_TABLE = "spotHourlyUsd"
#: "Low utilisation" for the cost alert: a tier's average KV cache usage over the day below this share
#: of its own KV-cache scaling target.
LOW_UTILISATION_SHARE = 0.5
#: The Bedrock price table beside the instance catalog (refreshed by ``catalog refresh``).
BEDROCK_PRICES_PATH = CATALOG_PATH.parent / "bedrock_prices.json"

# --- Recorded series ---------------------------------------------------------------------------------
PRICE = "llm:instance_gpu_price_usd_per_hour"
NODE_PRICE = "llm:node_gpu_price_usd_per_hour"
NODE_INSTANCE = "llm:node_instance:info"
POOL_PRICE = "llm:pool_gpu_price_usd_per_hour"
NODE_POOL = "llm:node_pool:info"
#: ``price_basis`` of an on-prem GPU: the hybrid pool's chargeback rate, not a cloud price.
CHARGEBACK = "chargeback"
POD_GPUS = "llm:pod_gpus"
NODE_COST = "llm:node_gpu_cost_usd_per_hour"
IDLE_COST = "llm:idle_gpu_cost_usd_per_hour"
MODEL_GPUS = "llm:model_gpus"
MODEL_UNPRICED_GPUS = "llm:model_unpriced_gpus"
MODEL_COST = "llm:model_gpu_cost_usd_per_hour"
MODEL_PROMPT_TOKENS = "llm:model_prompt_tokens_per_hour"
MODEL_GENERATION_TOKENS = "llm:model_generation_tokens_per_hour"
MODEL_COST_1H = "llm:model_gpu_cost_usd:1h"
MODEL_PROMPT_1H = "llm:model_prompt_tokens:1h"
MODEL_GENERATION_1H = "llm:model_generation_tokens:1h"
MODEL_PER_MILLION = "llm:model_cost_usd_per_million_tokens:1h"
MODEL_PER_MILLION_INPUT = "llm:model_cost_usd_per_million_input_tokens:1h"
MODEL_PER_MILLION_OUTPUT = "llm:model_cost_usd_per_million_output_tokens:1h"
TIER_COST_1H = "llm:tier_gpu_cost_usd:1h"
TIER_PROMPT_1H = "llm:tier_prompt_tokens:1h"
TIER_GENERATION_1H = "llm:tier_generation_tokens:1h"
TIER_PER_MILLION = "llm:tier_cost_usd_per_million_tokens:1h"
TIER_PER_MILLION_INPUT = "llm:tier_cost_usd_per_million_input_tokens:1h"
TIER_PER_MILLION_OUTPUT = "llm:tier_cost_usd_per_million_output_tokens:1h"
BEDROCK_INPUT = "llm:bedrock_input_price_usd_per_million_tokens"
BEDROCK_OUTPUT = "llm:bedrock_output_price_usd_per_million_tokens"
MODEL_BEDROCK_1H = "llm:model_bedrock_cost_usd:1h"
MODEL_RATIO = "llm:model_cost_vs_bedrock:ratio_1h"
TIER_FALLBACK_COST_1H = "llm:tier_gpu_cost_with_bedrock_fallback_usd:1h"
TIER_BEDROCK_1H = "llm:tier_bedrock_cost_usd:1h"
TIER_RATIO = "llm:tier_cost_vs_bedrock:ratio_1h"
TIER_FALLBACK_COST_1D = "llm:tier_gpu_cost_with_bedrock_fallback_usd:1d"
TIER_BEDROCK_1D = "llm:tier_bedrock_cost_usd:1d"
TIER_KV_1H = "llm:tier_kv_cache_usage:avg_1h"
TIER_KV_1D = "llm:tier_kv_cache_usage:avg_1d"

_MODEL = "namespace, tier, model"
_HOURS_SAMPLED = "scalar(count_over_time(vector(1)[1d:1h]))"


@dataclass(frozen=True)
class GpuPrice:
    """USD per GPU-hour of one instance type on one capacity type; ``basis`` says which figure it is."""

    instance_type: str
    capacity_type: str
    usd_per_gpu_hour: float
    basis: str


@dataclass(frozen=True)
class PoolPrice:
    """USD per GPU-hour of an on-prem (hybrid) pool's GPUs: its chargeback rate."""

    pool: str
    usd_per_gpu_hour: float


@dataclass(frozen=True)
class BedrockFallback:
    """A self-hosted model and the Bedrock model the gateway falls back to first, with that model's
    on-demand USD per million input and output tokens in the gateway's Bedrock region (``None``: the
    table has no price for it there)."""

    model: str
    bedrock_model: str
    region: str
    input_usd_per_million: float | None
    output_usd_per_million: float | None

    @property
    def priced(self) -> bool:
        return self.input_usd_per_million is not None and self.output_usd_per_million is not None


def gpu_prices(region: str, path: Path = CATALOG_PATH) -> tuple[GpuPrice, ...]:
    """Per-GPU hourly prices of every GPU type the catalog prices in ``region``: the on-demand figure,
    and the Spot figure where the catalog has one (its optional ``spotHourlyUsd.<region>`` table)."""
    catalog = load_instances(path, region)
    spot = (json.loads(path.read_text()).get(SPOT_TABLE) or {}).get(region) or {}
    prices: list[GpuPrice] = []
    for instance in sorted(catalog.gpu_types(), key=lambda i: i.name):
        if instance.hourly_usd is None:
            continue
        prices.append(GpuPrice(instance.name, ON_DEMAND, round(instance.hourly_usd / instance.gpus, 6), ON_DEMAND))
        if instance.name in spot:
            prices.append(GpuPrice(instance.name, SPOT, round(float(spot[instance.name]) / instance.gpus, 6), SPOT))
    return tuple(prices)


def chargeback_prices(pools: Sequence[Any]) -> tuple[PoolPrice, ...]:
    """The hybrid pools (anything with ``name`` and ``cost_per_gpu_hour_usd``) that set a chargeback rate."""
    return tuple(PoolPrice(p.name, float(p.cost_per_gpu_hour_usd)) for p in pools if p.cost_per_gpu_hour_usd is not None)


def read_bedrock_prices(path: Path = BEDROCK_PRICES_PATH) -> dict[str, dict[str, dict[str, float]]]:
    """``region -> Bedrock model id -> {"input", "output"}`` USD per million tokens."""
    return dict(json.loads(path.read_text())["usdPerMillionTokens"])


def bedrock_fallbacks(
    models: Sequence[tuple[str, str]], fallbacks: dict[str, list[str]], region: str | None,
    path: Path = BEDROCK_PRICES_PATH,
) -> tuple[BedrockFallback, ...]:
    """Each self-hosted model (name, kind) with the first Bedrock model of its kind the gateway falls
    back to (LiteLLM tries a route's fallbacks in order), priced in the gateway's Bedrock ``region``."""
    if region is None:
        return ()
    table = read_bedrock_prices(path).get(region, {})
    out = []
    for name, kind in models:
        chain = fallbacks.get(kind) or []
        if not chain:
            continue
        price = table.get(chain[0]) or {}
        out.append(BedrockFallback(name, chain[0], region, price.get("input"), price.get("output")))
    return tuple(out)


def _record(name: str, expr: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    rule: dict[str, object] = {"record": name, "expr": expr}
    if labels:
        rule["labels"] = labels
    return rule


def price_rules(prices: Sequence[GpuPrice], pool_prices: Sequence[PoolPrice] = ()) -> list[dict[str, object]]:
    """One constant series per instance type and capacity type (the catalog's figure) and per hybrid pool
    with a chargeback rate, as data."""
    return [
        *(_record(PRICE, f"vector({p.usd_per_gpu_hour:g})",
                  {"instance_type": p.instance_type, "capacity_type": p.capacity_type, "price_basis": p.basis})
          for p in prices),
        *(_record(POOL_PRICE, f"vector({p.usd_per_gpu_hour:g})", {"pool": p.pool, "price_basis": CHARGEBACK})
          for p in pool_prices),
    ]


def _node_instance_expr() -> str:
    instance = ksm_label(INSTANCE_TYPE_LABEL)
    karpenter = ksm_label(KARPENTER_CAPACITY_TYPE_LABEL)
    contract_capacity = ksm_label(contract.CAPACITY_TYPE_LABEL)
    labelled = (
        f'label_replace(label_replace(label_replace({KSM_NODE_LABELS}{{{instance}!=""}}, '
        f'"instance_type", "$1", "{instance}", "(.+)"), '
        f'"capacity_type", "$1", "{karpenter}", "(.+)"), '
        f'"capacity_type", "$1", "{contract_capacity}", "(.+)")'
    )
    return f"max by (node, instance_type, capacity_type) ({labelled})"


def _node_pool_expr() -> str:
    pool = ksm_label(contract.POOL_LABEL)
    return f'max by (node, pool) (label_replace({KSM_NODE_LABELS}{{{pool}!=""}}, "pool", "$1", "{pool}", "(.+)"))'


def _pod_model_expr() -> str:
    model, tier = ksm_label(MODEL_POD_LABEL), ksm_label(contract.TIER_LABEL)
    server = ksm_label(SERVER_POD_LABEL)
    serving = f'{KSM_POD_LABELS}{{{server}="{POD_LABELS[SERVER_POD_LABEL]}"}}'
    return (f'max by (namespace, pod, model, tier) (label_replace(label_replace({serving}, '
            f'"model", "$1", "{model}", "(.+)"), "tier", "$1", "{tier}", "(.+)"))')


def gpu_cost_rules(prices: Sequence[GpuPrice], pool_prices: Sequence[PoolPrice] = ()) -> list[dict[str, object]]:
    """Prices, what each node's GPUs cost, which pods hold GPUs for which model, and each model's GPU
    cost per hour."""
    phases = "|".join(GPU_HOLDING_PHASES)
    held = (f'sum by (namespace, pod, node) ({KSM_POD_RESOURCE_REQUESTS}{{resource="{KSM_GPU_RESOURCE}",node!=""}})'
            f' * on (namespace, pod) group_left () (max by (namespace, pod) ({KSM_POD_PHASE}{{phase=~"{phases}"}}) == 1)')
    return [
        *price_rules(prices, pool_prices),
        _record(NODE_INSTANCE, _node_instance_expr()),
        *([_record(NODE_POOL, _node_pool_expr())] if pool_prices else []),
        # A capacity type with its own figure is priced at it; any other (Spot without a Spot figure,
        # reserved, no label) at the type's on-demand figure, and price_basis says so. A node no catalog
        # price reaches (an on-prem server) at its pool's chargeback rate, when a pool has one.
        _record(NODE_PRICE,
                f"({NODE_INSTANCE} * on (instance_type, capacity_type) group_left (price_basis) {PRICE})"
                f' or on (node) ({NODE_INSTANCE} * on (instance_type) group_left (price_basis) {PRICE}{{capacity_type="{ON_DEMAND}"}})'
                + (f" or on (node) ({NODE_POOL} * on (pool) group_left (price_basis) {POOL_PRICE})" if pool_prices else "")),
        _record(POD_GPUS, f"{held} * on (namespace, pod) group_left (model, tier) {_pod_model_expr()}"),
        _record(MODEL_GPUS, f"sum by ({_MODEL}) ({POD_GPUS})"),
        _record(MODEL_COST, f"sum by ({_MODEL}) ({POD_GPUS} * on (node) group_left () {NODE_PRICE})"),
        _record(MODEL_UNPRICED_GPUS, f"sum by ({_MODEL}) ({POD_GPUS} unless on (node) {NODE_PRICE})"),
        # Every GPU the nodes offer, at its price; what no serving pod holds is idle (empty or partly used
        # nodes, non-serving work).
        _record(NODE_COST, f"{NODE_PRICE} * on (node) group_left () "
                           f'sum by (node) ({KSM_NODE_STATUS_ALLOCATABLE}{{resource="{KSM_GPU_RESOURCE}"}})'),
        _record(IDLE_COST, f"clamp_min(sum({NODE_COST}) - (sum({MODEL_COST}) or vector(0)), 0)"),
    ]


def _tokens(counter: str, window: str, fn: str) -> str:
    return f'sum by ({_MODEL}) (label_replace({fn}({counter}[{window}]), "model", "$1", "model_name", "(.+)"))'


def _per_million(cost: str, prompt: str, generation: str) -> tuple[str, str, str]:
    """Blended, per output token and per input token cost per million tokens (guarded: no tokens, no series)."""
    ratio = f"{OUTPUT_INPUT_COST_RATIO:g}"
    blended = f"{cost} * 1e6 / (({prompt} + {generation}) > 0)"
    output = f"{cost} * 1e6 / (({generation} + {prompt} / {ratio}) > 0)"
    return blended, output, f"{output} / {ratio}"


def token_rules() -> list[dict[str, object]]:
    """Tokens per hour and cost per million tokens, per model and per tier, blended and split."""
    model = _per_million(MODEL_COST_1H, MODEL_PROMPT_1H, MODEL_GENERATION_1H)
    tier = _per_million(TIER_COST_1H, TIER_PROMPT_1H, TIER_GENERATION_1H)
    return [
        _record(MODEL_PROMPT_TOKENS, f"{_tokens(VLLM_PROMPT_TOKENS, '5m', 'rate')} * 3600"),
        _record(MODEL_GENERATION_TOKENS, f"{_tokens(VLLM_GENERATION_TOKENS, '5m', 'rate')} * 3600"),
        # What the last hour cost: the hourly cost sampled every minute, summed, over the number of
        # samples the hour has (a minute at zero replicas has none and adds nothing). Counting the hour's
        # samples rather than dividing by 60 keeps the figure right whether the engine includes both
        # ends of the window (Prometheus 2) or not (Prometheus 3).
        _record(MODEL_COST_1H, f"sum_over_time({MODEL_COST}[1h:1m]) / scalar(count_over_time(vector(1)[1h:1m]))"),
        _record(MODEL_PROMPT_1H, _tokens(VLLM_PROMPT_TOKENS, "1h", "increase")),
        _record(MODEL_GENERATION_1H, _tokens(VLLM_GENERATION_TOKENS, "1h", "increase")),
        _record(MODEL_PER_MILLION, model[0]),
        _record(MODEL_PER_MILLION_OUTPUT, model[1]),
        _record(MODEL_PER_MILLION_INPUT, f"{MODEL_PER_MILLION_OUTPUT} / {OUTPUT_INPUT_COST_RATIO:g}"),
        _record(TIER_COST_1H, f"sum by (tier) ({MODEL_COST_1H})"),
        _record(TIER_PROMPT_1H, f"sum by (tier) ({MODEL_PROMPT_1H})"),
        _record(TIER_GENERATION_1H, f"sum by (tier) ({MODEL_GENERATION_1H})"),
        _record(TIER_PER_MILLION, tier[0]),
        _record(TIER_PER_MILLION_OUTPUT, tier[1]),
        _record(TIER_PER_MILLION_INPUT, f"{TIER_PER_MILLION_OUTPUT} / {OUTPUT_INPUT_COST_RATIO:g}"),
    ]


def bedrock_rules(fallbacks: Sequence[BedrockFallback]) -> list[dict[str, object]]:
    """The fallback's prices (generated from the table), what Bedrock would have charged for the same
    tokens, and the self-hosted-to-Bedrock ratio per model and per tier."""
    priced = [f for f in fallbacks if f.priced]
    if not priced:
        return []
    prices = [
        _record(name, f"vector({usd:g})", {"model": f.model, "bedrock_model": f.bedrock_model})
        for f in priced
        for name, usd in ((BEDROCK_INPUT, f.input_usd_per_million), (BEDROCK_OUTPUT, f.output_usd_per_million))
    ]
    bedrock_cost = (
        f"({MODEL_PROMPT_1H} * on (model) group_left (bedrock_model) {BEDROCK_INPUT}"
        f" + {MODEL_GENERATION_1H} * on (model) group_left (bedrock_model) {BEDROCK_OUTPUT})"
        " / 1e6"
    )
    with_fallback = f"sum by (tier) ({MODEL_COST_1H} and on ({_MODEL}) {MODEL_BEDROCK_1H})"
    return [
        *prices,
        _record(MODEL_BEDROCK_1H, bedrock_cost),
        _record(MODEL_RATIO, f"{MODEL_COST_1H} / on ({_MODEL}) group_left (bedrock_model) ({MODEL_BEDROCK_1H} > 0)"),
        _record(TIER_FALLBACK_COST_1H, with_fallback),
        _record(TIER_BEDROCK_1H, f"sum by (tier) ({MODEL_BEDROCK_1H})"),
        _record(TIER_RATIO, f"{TIER_FALLBACK_COST_1H} / ({TIER_BEDROCK_1H} > 0)"),
        # The day: the hour-long windows sampled every hour, scaled to 24 of them (the window holds 25
        # samples where the engine includes both ends).
        _record(TIER_FALLBACK_COST_1D, f"sum_over_time({TIER_FALLBACK_COST_1H}[1d:1h]) * 24 / {_HOURS_SAMPLED}"),
        _record(TIER_BEDROCK_1D, f"sum_over_time({TIER_BEDROCK_1H}[1d:1h]) * 24 / {_HOURS_SAMPLED}"),
    ]


def utilisation_rules() -> list[dict[str, object]]:
    return [
        _record(TIER_KV_1H, f"avg by (tier) (avg_over_time({VLLM_KV_CACHE_USAGE}[1h]))"),
        _record(TIER_KV_1D, f"avg_over_time({TIER_KV_1H}[1d:1h])"),
    ]


def cost_alert(tier: str | None, others: Sequence[str], kv_cache_target: float) -> dict[str, Any]:
    """Self-hosting a tier cost more than its Bedrock fallbacks would have over the last day, while
    the tier's KV cache stayed below half its scaling target: the GPUs mostly wait."""
    if tier is not None:
        sel, scope = f'{{tier="{tier}"}}', f"tier {tier}"
    else:
        sel = f'{{tier!~"{"|".join(others)}"}}' if others else ""
        scope = "tiers without their own settings"
    low = round(kv_cache_target * LOW_UTILISATION_SHARE, 4)
    return {
        "alert": "LlmTierCostAboveBedrock",
        "expr": (f"{TIER_FALLBACK_COST_1D}{sel} > on (tier) {TIER_BEDROCK_1D}"
                 f" and on (tier) {TIER_KV_1D}{sel} < {low:g}"),
        "for": "1h",
        "labels": {"severity": "warning", "team": "ml-platform"},
        "annotations": {
            "summary": "Tier {{ $labels.tier }} cost more on its own GPUs than Bedrock would have over the last day",
            "description": (
                f"Over the last 24 hours the GPUs of the {scope}'s models that have a Bedrock fallback cost more "
                "than that fallback would have charged for the same prompt and generated tokens, and the tier's "
                f"KV cache stayed below {low * 100:g}% on average (half its scaling target): the GPUs mostly wait. "
                "Scale down: lower replicas.min (0 outside production lets the model sleep when idle) or move the "
                "model to a smaller instance type; or let the tier fall through to Bedrock: remove the model from "
                "the tier, and the gateway serves its name from the fallback. Compare "
                "llm:model_cost_vs_bedrock:ratio_1h per model on the LLM platform / Token cost dashboard."
            ),
        },
    }


def token_cost_groups(
    prices: Sequence[GpuPrice], fallbacks: Sequence[BedrockFallback], tier_kv_targets: Sequence[tuple[str | None, float]],
    pool_prices: Sequence[PoolPrice] = (),
) -> list[dict[str, object]]:
    """The ``llm-token-cost`` recording rules and, where a tier has a priced fallback, the cost alert.

    ``tier_kv_targets``: each configured tier's KV-cache scaling target, and ``None`` with the default
    target for every other tier; ``pool_prices``: the hybrid pools' chargeback rates."""
    comparison = bedrock_rules(fallbacks)
    groups: list[dict[str, object]] = [
        {"name": "llm-token-cost", "rules": [*gpu_cost_rules(prices, pool_prices), *token_rules(), *comparison, *utilisation_rules()]},
    ]
    if comparison:
        named = tuple(t for t, _ in tier_kv_targets if t is not None)
        groups.append({"name": "llm-token-cost-alerts",
                       "rules": [cost_alert(tier, named, target) for tier, target in tier_kv_targets]})
    return groups
