"""Cost per token, judged by Prometheus's own tools on the rules the program generates.

``promtool test rules`` on hand-written kube-state-metrics and vLLM series: two models on two instance
types (one a Spot node priced at the catalog's Spot figure, one a Spot node of a type without one, priced
on demand), a model that scales to zero (its cost ends, nothing divides by zero), a pod restart that
resets a token counter, a pending pod and a finished pod that hold no GPU. Prices come from a catalog
file written here with figures that are exact in binary, so promtool's exact comparison (Prometheus
2.42 compares floats exactly) checks the arithmetic, not rounding. Then the shipped stacks' rules,
priced from the shipped catalog, are loaded by a real Prometheus on 127.0.0.1 that scrapes the same
kind of series and evaluates every rule without an error.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from components.observability.token_cost import BedrockFallback, gpu_prices, token_cost_groups
from tests.support.prometheus_tools import PrometheusServer, require_binary

RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
LLAMA = {"namespace": "serving-interactive", "tier": "interactive", "model": "llama-3-1-70b-instruct-awq"}
QWEN = {"namespace": "serving-batch", "tier": "batch", "model": "qwen2-5-32b-instruct"}
BGE = {"namespace": "serving-embedding", "tier": "embedding", "model": "bge-m3"}


def catalog_file(tmp_path: Path) -> Path:
    """Three GPU types and their prices: g5.12xlarge $5.5/h for 4 GPUs ($1.375 per GPU), g6e.xlarge $2/h
    on demand and $0.75/h on Spot, g5.2xlarge $1.25/h with no Spot figure."""
    def facts(gpus: int) -> dict:
        return {"category": "g", "family": "g5", "vcpu": 8, "memoryMiB": 32768, "gpus": gpus, "gpuName": "a10g",
                "gpuMemoryMiB": 22888, "maxPods": 58}

    catalog = {
        "hoursPerMonth": 730,
        "instances": {"g5.12xlarge": facts(4), "g6e.xlarge": facts(1), "g5.2xlarge": facts(1), "m7i.xlarge": facts(0)},
        "onDemandHourlyUsd": {"us-east-1": {"g5.12xlarge": 5.5, "g6e.xlarge": 2.0, "g5.2xlarge": 1.25, "m7i.xlarge": 0.2}},
        "spotHourlyUsd": {"us-east-1": {"g6e.xlarge": 0.75}},
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    return path


def labels(mapping: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in mapping.items()) + "}"


GPUS = {"g5.12xlarge": 4, "g6e.xlarge": 1, "g5.2xlarge": 1, "m7i.xlarge": 0}


def node(name: str, instance_type: str, **capacity: str) -> list[dict[str, str]]:
    """The node's labels and its allocatable GPUs (a CPU node has no GPU resource)."""
    out = [{"series": "kube_node_labels" + labels({"node": name, "label_node_kubernetes_io_instance_type": instance_type,
                                                   **capacity}), "values": "1x120"}]
    if GPUS[instance_type]:
        out.append({"series": "kube_node_status_allocatable" + labels({"node": name, "resource": "nvidia_com_gpu",
                                                                       "unit": "integer"}),
                    "values": f"{GPUS[instance_type]}x120"})
    return out


def pod(model: dict[str, str], name: str, node_name: str, gpus: int, phase: str = "Running", values: str = "1x120") -> list[dict]:
    where = {"namespace": model["namespace"], "pod": name}
    out = [
        {"series": "kube_pod_container_resource_requests" + labels({**where, "container": "vllm", "node": node_name,
                                                                    "resource": "nvidia_com_gpu", "unit": "integer"}),
         "values": values.replace("1x", f"{gpus}x")},
        {"series": "kube_pod_labels" + labels({**where, "label_app_kubernetes_io_name": "vllm",
                                               "label_app_kubernetes_io_instance": model["model"],
                                               "label_llm_platform_io_tier": model["tier"]}), "values": values},
    ]
    for each in ("Pending", "Running", "Succeeded"):
        out.append({"series": "kube_pod_status_phase" + labels({**where, "phase": each}),
                    "values": values if each == phase else values.replace("1x", "0x")})
    return out


def tokens(model: dict[str, str], pod_name: str, prompt: str, generation: str) -> list[dict]:
    where = {"namespace": model["namespace"], "tier": model["tier"], "pod": pod_name, "model_name": model["model"]}
    return [{"series": "vllm:prompt_tokens_total" + labels(where), "values": prompt},
            {"series": "vllm:generation_tokens_total" + labels(where), "values": generation},
            {"series": "vllm:kv_cache_usage_perc" + labels(where), "values": "0.1x120"}]


def input_series() -> list[dict]:
    """Two hours at one sample a minute."""
    return [
        *node("gpu-a", "g5.12xlarge", label_karpenter_sh_capacity_type="on-demand"),
        *node("gpu-a2", "g5.12xlarge", label_karpenter_sh_capacity_type="on-demand"),
        *node("gpu-b", "g6e.xlarge", label_karpenter_sh_capacity_type="spot"),
        # A managed group's Spot node: the contract's label, and a type with no Spot figure. It stays
        # after bge-m3 scales to zero (until the autoscaler removes it): idle GPU cost.
        *node("gpu-c", "g5.2xlarge", label_llm_platform_io_capacity_type="spot"),
        *node("cpu-a", "m7i.xlarge", label_llm_platform_io_capacity_type="on-demand"),
        *pod(LLAMA, "llama-0", "gpu-a", 4),
        *pod(LLAMA, "llama-1", "gpu-a2", 4),
        # Not bound yet (no node) and finished: neither holds a GPU.
        *pod(LLAMA, "llama-2", "", 4, phase="Pending"),
        *pod(QWEN, "qwen-old", "gpu-b", 1, phase="Succeeded"),
        *pod(QWEN, "qwen-0", "gpu-b", 1),
        # Scales to zero after 40 minutes: kube-state-metrics stops exporting the pod.
        *pod(BGE, "bge-0", "gpu-c", 1, values="1x40 stale"),
        # llama-0 serves 3200 prompt and 800 generated tokens a minute; llama-1 is idle.
        *tokens(LLAMA, "llama-0", "0+3200x120", "0+800x120"),
        *tokens(LLAMA, "llama-1", "0x120", "0x120"),
        # qwen-0 restarts at minute 61: its counters start again (at 800 and 200 after that minute).
        *tokens(QWEN, "qwen-0", "0+800x60 800+800x59", "0+200x60 200+200x59"),
        *tokens(BGE, "bge-0", "0+2000x40 stale", "0x40 stale"),
    ]



def expect(expr: str, at: str, *samples: tuple[dict[str, str], float]) -> dict:
    return {"expr": expr, "eval_time": at, "exp_samples": [{"labels": labels(lbl), "value": value} for lbl, value in samples]}


def rule_file(tmp_path: Path, groups: list[dict]) -> Path:
    path = tmp_path / "token-cost.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def promtool_test(rules: Path, tests: list[dict], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    promtool = require_binary("promtool", "prometheus")
    path = tmp_path / "token-cost-test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m",
                                    "tests": [{"interval": "1m", "input_series": input_series(), "promql_expr_test": tests}]},
                                   sort_keys=False))
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=300)


FALLBACKS = (
    BedrockFallback(LLAMA["model"], "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us-east-1", 3.0, 15.0),
    BedrockFallback(QWEN["model"], "us.anthropic.claude-haiku-4-5-20251001-v1:0", "us-east-1", 1.0, 5.0),
    BedrockFallback(BGE["model"], "cohere.embed-multilingual-v3", "us-east-1", None, None),
)


@pytest.fixture
def rules(tmp_path) -> Path:
    prices = gpu_prices("us-east-1", catalog_file(tmp_path))
    return rule_file(tmp_path, token_cost_groups(prices, FALLBACKS, [("interactive", 0.75), ("batch", 0.9), (None, 0.8)]))


def test_gpu_prices_are_the_catalogs_per_gpu_figures(tmp_path):
    prices = {(p.instance_type, p.capacity_type): (p.usd_per_gpu_hour, p.basis) for p in gpu_prices("us-east-1", catalog_file(tmp_path))}
    assert prices == {
        ("g5.12xlarge", "on-demand"): (1.375, "on-demand"),
        ("g5.2xlarge", "on-demand"): (1.25, "on-demand"),
        ("g6e.xlarge", "on-demand"): (2.0, "on-demand"),
        ("g6e.xlarge", "spot"): (0.75, "spot"),
    }
    assert gpu_prices("eu-west-1", catalog_file(tmp_path)) == (), "no prices in a region the catalog does not price"


def test_each_node_is_priced_at_its_type_and_capacity_type(rules, tmp_path):
    done = promtool_test(rules, [
        expect("llm:node_gpu_price_usd_per_hour", "30m",
               ({"__name__": "llm:node_gpu_price_usd_per_hour", "node": "gpu-a", "instance_type": "g5.12xlarge",
                 "capacity_type": "on-demand", "price_basis": "on-demand"}, 1.375),
               ({"__name__": "llm:node_gpu_price_usd_per_hour", "node": "gpu-a2", "instance_type": "g5.12xlarge",
                 "capacity_type": "on-demand", "price_basis": "on-demand"}, 1.375),
               # Spot at the catalog's Spot figure.
               ({"__name__": "llm:node_gpu_price_usd_per_hour", "node": "gpu-b", "instance_type": "g6e.xlarge",
                 "capacity_type": "spot", "price_basis": "spot"}, 0.75),
               # Spot without a Spot figure: the on-demand figure, and price_basis says so.
               ({"__name__": "llm:node_gpu_price_usd_per_hour", "node": "gpu-c", "instance_type": "g5.2xlarge",
                 "capacity_type": "spot", "price_basis": "on-demand"}, 1.25)),
    ], tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_cost_per_hour_counts_the_gpus_of_bound_live_pods_and_ends_at_zero_replicas(rules, tmp_path):
    cost = "llm:model_gpu_cost_usd_per_hour"
    done = promtool_test(rules, [
        # 2 pods x 4 GPUs x $1.375; 1 GPU x $0.75 (Spot); 1 GPU x $1.25 (Spot priced on demand).
        expect(cost, "30m", ({"__name__": cost, **LLAMA}, 11.0), ({"__name__": cost, **QWEN}, 0.75),
               ({"__name__": cost, **BGE}, 1.25)),
        expect("llm:model_gpus", "30m", ({"__name__": "llm:model_gpus", **LLAMA}, 8), ({"__name__": "llm:model_gpus", **QWEN}, 1),
               ({"__name__": "llm:model_gpus", **BGE}, 1)),
        # bge-m3 at zero replicas: no cost series at all, not its last value.
        expect(cost, "41m", ({"__name__": cost, **LLAMA}, 11.0), ({"__name__": cost, **QWEN}, 0.75)),
        expect("llm:model_unpriced_gpus", "30m"),
        # Every GPU is held at 30 minutes; after bge-m3 scales to zero its node's GPU ($1.25) is idle.
        expect("llm:idle_gpu_cost_usd_per_hour", "30m", ({"__name__": "llm:idle_gpu_cost_usd_per_hour"}, 0)),
        expect("llm:idle_gpu_cost_usd_per_hour", "41m", ({"__name__": "llm:idle_gpu_cost_usd_per_hour"}, 1.25)),
    ], tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_tokens_per_hour_and_cost_per_million_tokens_per_model_and_tier(rules, tmp_path):
    at = "120m"
    done = promtool_test(rules, [
        expect("llm:model_prompt_tokens_per_hour", at,
               ({"__name__": "llm:model_prompt_tokens_per_hour", **LLAMA}, 192000),
               ({"__name__": "llm:model_prompt_tokens_per_hour", **QWEN}, 48000)),
        expect("llm:model_generation_tokens_per_hour", at,
               ({"__name__": "llm:model_generation_tokens_per_hour", **LLAMA}, 48000),
               ({"__name__": "llm:model_generation_tokens_per_hour", **QWEN}, 12000)),
        # The restart at minute 61 loses no tokens: 48,000 prompt tokens in the hour, not 47,200.
        expect("llm:model_prompt_tokens:1h", at, ({"__name__": "llm:model_prompt_tokens:1h", **LLAMA}, 192000),
               ({"__name__": "llm:model_prompt_tokens:1h", **QWEN}, 48000)),
        # llama: $11 for 240,000 tokens; weighted 48,000 + 192,000 / 4 = 96,000 output tokens.
        # qwen: $0.75 for 60,000 tokens; weighted 12,000 + 48,000 / 4 = 24,000.
        expect("llm:model_cost_usd_per_million_tokens:1h", at,
               ({"__name__": "llm:model_cost_usd_per_million_tokens:1h", **LLAMA}, 45.833333333333336),
               ({"__name__": "llm:model_cost_usd_per_million_tokens:1h", **QWEN}, 12.5)),
        expect("llm:model_cost_usd_per_million_output_tokens:1h", at,
               ({"__name__": "llm:model_cost_usd_per_million_output_tokens:1h", **LLAMA}, 114.58333333333333),
               ({"__name__": "llm:model_cost_usd_per_million_output_tokens:1h", **QWEN}, 31.25)),
        expect("llm:model_cost_usd_per_million_input_tokens:1h", at,
               ({"__name__": "llm:model_cost_usd_per_million_input_tokens:1h", **LLAMA}, 28.645833333333332),
               ({"__name__": "llm:model_cost_usd_per_million_input_tokens:1h", **QWEN}, 7.8125)),
        # Per tier; the embedding tier scaled to zero an hour and more ago and reports nothing.
        expect("llm:tier_cost_usd_per_million_tokens:1h", at,
               ({"__name__": "llm:tier_cost_usd_per_million_tokens:1h", "tier": "interactive"}, 45.833333333333336),
               ({"__name__": "llm:tier_cost_usd_per_million_tokens:1h", "tier": "batch"}, 12.5)),
        expect("llm:tier_gpu_cost_usd:1h", at, ({"__name__": "llm:tier_gpu_cost_usd:1h", "tier": "interactive"}, 11),
               ({"__name__": "llm:tier_gpu_cost_usd:1h", "tier": "batch"}, 0.75)),
    ], tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_an_idle_model_costs_but_has_no_cost_per_token(tmp_path):
    """Pods that serve nothing: the cost per hour is there, the cost per token is absent (no division
    by zero, no +Inf)."""
    prices = gpu_prices("us-east-1", catalog_file(tmp_path))
    rules = rule_file(tmp_path, token_cost_groups(prices, (), [(None, 0.8)]))
    promtool = require_binary("promtool", "prometheus")
    series = [
        *node("gpu-a", "g5.12xlarge", label_karpenter_sh_capacity_type="on-demand"),
        *pod(LLAMA, "llama-0", "gpu-a", 4),
        *tokens(LLAMA, "llama-0", "5000x120", "700x120"),
    ]
    path = tmp_path / "idle.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "promql_expr_test": [
            expect("llm:model_gpu_cost_usd:1h", "120m", ({"__name__": "llm:model_gpu_cost_usd:1h", **LLAMA}, 5.5)),
            expect("llm:model_prompt_tokens:1h", "120m", ({"__name__": "llm:model_prompt_tokens:1h", **LLAMA}, 0)),
            expect("llm:model_cost_usd_per_million_tokens:1h", "120m"),
            expect("llm:model_cost_usd_per_million_output_tokens:1h", "120m"),
            expect("llm:tier_cost_usd_per_million_tokens:1h", "120m"),
        ]}]}, sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


# --- The shipped rules on a real Prometheus -----------------------------------------------------------

SCRAPED = """\
# TYPE kube_node_labels gauge
kube_node_labels{node="gpu-a",label_node_kubernetes_io_instance_type="g5.12xlarge",label_karpenter_sh_capacity_type="on-demand"} 1
kube_node_labels{node="gpu-b",label_node_kubernetes_io_instance_type="g6e.xlarge",label_karpenter_sh_capacity_type="spot"} 1
# TYPE kube_pod_container_resource_requests gauge
kube_pod_container_resource_requests{namespace="serving-interactive",pod="llama-0",container="vllm",node="gpu-a",resource="nvidia_com_gpu",unit="integer"} 4
kube_pod_container_resource_requests{namespace="serving-batch",pod="qwen-0",container="vllm",node="gpu-b",resource="nvidia_com_gpu",unit="integer"} 1
# TYPE kube_pod_status_phase gauge
kube_pod_status_phase{namespace="serving-interactive",pod="llama-0",phase="Running"} 1
kube_pod_status_phase{namespace="serving-batch",pod="qwen-0",phase="Running"} 1
# TYPE kube_pod_labels gauge
kube_pod_labels{namespace="serving-interactive",pod="llama-0",label_app_kubernetes_io_name="vllm",label_app_kubernetes_io_instance="llama-3-1-70b-instruct-awq",label_llm_platform_io_tier="interactive"} 1
kube_pod_labels{namespace="serving-batch",pod="qwen-0",label_app_kubernetes_io_name="vllm",label_app_kubernetes_io_instance="qwen2-5-32b-instruct",label_llm_platform_io_tier="batch"} 1
"""


SCRAPED += """\
# TYPE kube_node_status_allocatable gauge
kube_node_status_allocatable{node="gpu-a",resource="nvidia_com_gpu",unit="integer"} 4
kube_node_status_allocatable{node="gpu-b",resource="nvidia_com_gpu",unit="integer"} 1
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{namespace="serving-interactive",tier="interactive",pod="llama-0",model_name="llama-3-1-70b-instruct-awq"} 0.5
vllm:kv_cache_usage_perc{namespace="serving-batch",tier="batch",pod="qwen-0",model_name="qwen2-5-32b-instruct"} 0.5
"""
#: vLLM's token counters, growing by this much at every scrape.
TOKENS_PER_SCRAPE = 1000


class Exporter(ThreadingHTTPServer):
    """kube-state-metrics' series for two serving pods and their vLLM counters, on 127.0.0.1."""

    def __init__(self) -> None:
        scrapes = [0]

        def counters() -> str:
            scrapes[0] += 1
            lines = []
            for name in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"):
                lines.append(f"# TYPE {name.removesuffix('_total')} counter")
                for ns, tier, pod_name, model in (("serving-interactive", "interactive", "llama-0", LLAMA["model"]),
                                                  ("serving-batch", "batch", "qwen-0", QWEN["model"])):
                    lines.append(f'{name}{{namespace="{ns}",tier="{tier}",pod="{pod_name}",model_name="{model}"}} '
                                 f"{scrapes[0] * TOKENS_PER_SCRAPE}")
            return "\n".join(lines) + "\n"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = (SCRAPED + counters()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_the_prod_rules_run_on_a_real_prometheus_and_price_from_the_shipped_catalog(prod_plan, tmp_path):
    """Every group of prod's PrometheusRule loads and evaluates without an error (a many-to-many join
    only fails at evaluation), the cost per hour is the shipped catalog's us-east-1 price (a g5.12xlarge
    is $5.672 an hour for 4 GPUs; a g6e.xlarge on Spot, without a Spot figure, $1.861), and every panel
    of the token-cost dashboard answers."""
    (rule,) = [r.inputs for r in prod_plan.of_type(RULE)]
    exporter = Exporter()
    prometheus = PrometheusServer(tmp_path, {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "kube-state-metrics", "honor_labels": True,
                            "static_configs": [{"targets": [f"127.0.0.1:{exporter.server_address[1]}"]}]}],
    }, rule_files={"rules.yaml": {"groups": rule["spec"]["groups"]}})
    prometheus.start()
    try:
        cost: dict[str, float] = {}
        deadline = time.monotonic() + 60
        while len(cost) < 2 and time.monotonic() < deadline:
            cost = {s.labels["model"]: s.value for s in prometheus.query("llm:model_gpu_cost_usd_per_hour")}
            time.sleep(0.5)
        assert cost == pytest.approx({"llama-3-1-70b-instruct-awq": 5.672, "qwen2-5-32b-instruct": 1.861})
        basis = {s.labels["node"]: s.labels["price_basis"] for s in prometheus.query("llm:node_gpu_price_usd_per_hour")}
        assert basis == {"gpu-a": "on-demand", "gpu-b": "on-demand"}
        time.sleep(2)
        with urllib.request.urlopen(f"{prometheus.url}/api/v1/rules", timeout=10) as response:
            groups = json.load(response)["data"]["groups"]
        assert {g["name"] for g in groups} >= {"llm-token-cost", "llm-token-cost-alerts", "gpu", "vllm", "gpu-cost"}
        broken = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] != "ok"]
        assert broken == []
        (board,) = [json.loads(next(iter(r.inputs["data"].values()))) for r in prod_plan.of_type("kubernetes:core/v1:ConfigMap")
                    if r.inputs["metadata"]["name"] == "dashboard-llm-token-cost"]
        silent: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            silent = [p["title"] for p in board["panels"] for t in p["targets"] if not prometheus.query(t["expr"])]
            if not silent:
                break
            time.sleep(1)
        assert silent == []
        ratio = {s.labels["model"]: s.labels["bedrock_model"] for s in prometheus.query("llm:model_cost_vs_bedrock:ratio_1h")}
        assert ratio == {LLAMA["model"]: "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                         QWEN["model"]: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    finally:
        prometheus.stop()
        exporter.shutdown()


# --- on-prem GPUs: hybrid pools at their chargeback rate ----------------------------------------------

ONPREM = {"namespace": "serving-interactive", "tier": "interactive", "model": "llama-3-1-8b-instruct"}


def hybrid_node(name: str, pool: str, gpus: int) -> list[dict[str, str]]:
    """A hybrid node as kube-state-metrics exports it: the pool label, no EC2 instance type."""
    return [{"series": "kube_node_labels" + labels({"node": name, "label_llm_platform_io_pool": pool}), "values": "1x120"},
            {"series": "kube_node_status_allocatable" + labels({"node": name, "resource": "nvidia_com_gpu", "unit": "integer"}),
             "values": f"{gpus}x120"}]


def test_on_prem_gpus_cost_their_pools_chargeback_rate_and_unrated_pools_stay_unpriced(tmp_path):
    """Two hybrid pools: 'onprem-l40s' charges $0.5 per GPU-hour, 'onprem-lab' sets no rate. A model
    with 2 GPUs on each: 2 x $0.5 = $1.0 an hour, and 2 GPUs unpriced (never $0). A cloud node that
    also carries a pool label keeps its catalog price."""
    from components.observability.token_cost import PoolPrice

    prices = gpu_prices("us-east-1", catalog_file(tmp_path))
    rules = rule_file(tmp_path, token_cost_groups(prices, (), [(None, 0.8)], (PoolPrice("onprem-l40s", 0.5),)))
    series = [
        *hybrid_node("dc1-gpu-01", "onprem-l40s", 2),
        *hybrid_node("lab-gpu-01", "onprem-lab", 2),
        {"series": "kube_node_labels" + labels({"node": "gpu-b", "label_node_kubernetes_io_instance_type": "g6e.xlarge",
                                                "label_karpenter_sh_capacity_type": "spot",
                                                "label_llm_platform_io_pool": "onprem-l40s"}), "values": "1x120"},
        *pod(ONPREM, "onprem-0", "dc1-gpu-01", 2),
        *pod(ONPREM, "onprem-1", "lab-gpu-01", 2),
    ]
    path = tmp_path / "chargeback-test.yaml"
    node_price = "llm:node_gpu_price_usd_per_hour"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "promql_expr_test": [
            expect(node_price, "30m",
                   ({"__name__": node_price, "node": "dc1-gpu-01", "pool": "onprem-l40s", "price_basis": "chargeback"}, 0.5),
                   ({"__name__": node_price, "node": "gpu-b", "instance_type": "g6e.xlarge", "capacity_type": "spot",
                     "price_basis": "spot"}, 0.75)),
            expect("llm:model_gpu_cost_usd_per_hour", "30m", ({"__name__": "llm:model_gpu_cost_usd_per_hour", **ONPREM}, 1.0)),
            expect("llm:model_unpriced_gpus", "30m", ({"__name__": "llm:model_unpriced_gpus", **ONPREM}, 2)),
        ]}]}, sort_keys=False))
    promtool = require_binary("promtool", "prometheus")
    done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
