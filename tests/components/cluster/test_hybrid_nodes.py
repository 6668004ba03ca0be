"""EKS Hybrid Nodes: a dev copy with one on-prem pool and a tier on it plans and passes the offline check,
the AWS side is what EKS Hybrid Nodes needs, the pool is fixed capacity without a cloud price, and the
settings refuse what cannot work, each at its key."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from automation.stacks import read_stack_config
from components.capacity_check import CheckedStack, parse_settings
from components.settings import SettingsError
from policies.capacity.table import stack_worst_case
from tests.conftest import plan_with

ROOT = Path(__file__).resolve().parents[3]
TGW = "tgw-0123456789abcdef0"
POOL = {"name": "onprem-l40s", "purpose": "gpu-inference", "nodes": 2, "gpusPerNode": 4,
        "accelerator": "nvidia-l40s", "gpuMemoryGib": 48}
HYBRID = {"enabled": True, "remoteNodeNetworks": ["192.168.0.0/20"], "remotePodNetworks": ["192.168.64.0/18"],
          "connectivity": {"transitGatewayId": TGW}, "pools": [POOL]}
ONPREM_MODEL = {"name": "llama-onprem", "source": {"s3": "s3://llm-platform-models-dev/meta-llama/Llama-3.1-8B-Instruct/"},
                "pool": "onprem-l40s", "gpusPerReplica": 1, "catalog": "llama-3.1-8b-instruct", "maxModelLen": 8192,
                "replicas": {"min": 1, "max": 4}, "fallbacks": ["llama-3-1-8b-instruct"]}
ONPREM_TIER = {"name": "onprem", "priority": 50000, "quota": {"gpus": 8, "cpu": "64", "memory": "512Gi"},
               "models": [ONPREM_MODEL]}


def hybrid_config(hybrid: dict[str, Any] | None = None, model: dict[str, Any] | None = None,
                  **overrides: Any) -> dict[str, Any]:
    """dev with hybrid nodes and a tier on the on-prem pool (``model`` replaces its one model)."""
    config = copy.deepcopy(read_stack_config("dev"))
    config["llm-platform:hybridNodes"] = copy.deepcopy(hybrid or HYBRID)
    config["llm-platform:serving"]["tiers"].append({**copy.deepcopy(ONPREM_TIER),
                                                    "models": [copy.deepcopy(model or ONPREM_MODEL)]})
    config.update({f"llm-platform:{k}": v for k, v in overrides.items()})
    return config


def problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        parse_settings(config)
    return [str(p) for p in caught.value.problems]


@pytest.fixture(scope="module")
def plan():
    config = hybrid_config()
    return plan_with("dev", **{k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")})


# --- the AWS side ---------------------------------------------------------------------------------


def test_private_route_tables_reach_both_remote_networks_through_the_transit_gateway(plan):
    private = [t for t in plan.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in t.name]
    assert len(private) == 3
    for table in private:
        remote = [r for r in table.inputs["routes"] if r["cidrBlock"] != "0.0.0.0/0"]
        assert remote == [{"cidrBlock": "192.168.0.0/20", "transitGatewayId": TGW},
                          {"cidrBlock": "192.168.64.0/18", "transitGatewayId": TGW}]


def test_a_virtual_private_gateway_is_the_routes_gateway_id():
    hybrid = {**HYBRID, "connectivity": {"virtualPrivateGatewayId": "vgw-0123456789abcdef0"}}
    config = hybrid_config(hybrid)
    found = plan_with("dev", **{k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("llm-platform:")})
    table = next(t for t in found.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in t.name)
    assert [r for r in table.inputs["routes"] if r["cidrBlock"] != "0.0.0.0/0"] == [
        {"cidrBlock": "192.168.0.0/20", "gatewayId": "vgw-0123456789abcdef0"},
        {"cidrBlock": "192.168.64.0/18", "gatewayId": "vgw-0123456789abcdef0"}]


def test_cluster_security_group_lets_the_remote_networks_reach_the_api_server_and_coredns(plan):
    ingress = {(r.inputs["cidrIpv4"], r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
               for r in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")}
    egress = {(r.inputs["cidrIpv4"], r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
              for r in plan.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")}
    assert ingress == {("192.168.0.0/20", "tcp", 443, 443), ("192.168.64.0/18", "tcp", 443, 443),
                       ("192.168.64.0/18", "udp", 53, 53), ("192.168.64.0/18", "tcp", 53, 53)}
    assert egress == {("192.168.0.0/20", "tcp", 10250, 10250), ("192.168.64.0/18", "tcp", 0, 65535)}


def test_hybrid_role_joins_through_ssm_and_a_hybrid_linux_access_entry(plan):
    entries = [e for e in plan.of_type("aws:eks/accessEntry:AccessEntry") if e.inputs["type"] == "HYBRID_LINUX"]
    assert [e.name for e in entries] == ["hybrid-nodes-access"]
    (role,) = [r for r in plan.of_type("aws:iam/role:Role") if r.name == "hybrid-nodes-role"]
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ssm.amazonaws.com"}
    (activation,) = plan.of_type("aws:ssm/activation:Activation")
    assert activation.inputs["registrationLimit"] == 4  # 2 servers, each may register twice


def test_the_join_configuration_registers_the_contracts_labels_and_gpu_taint(plan):
    (pool,) = plan.of_type("llm-platform:index:HybridNodePool")
    outputs = plan.outputs[pool.urn]
    secret = outputs["nodeConfig"]
    assert secret["4dabf18193072939515e22adb298388d"] == "1b47061264138c4ac30d75fd1eb44270"  # a secret
    config = yaml.safe_load(secret["value"])
    assert config["apiVersion"] == "node.eks.aws/v1alpha1" and config["kind"] == "NodeConfig"
    assert config["spec"]["cluster"] == {"name": "llm-platform-dev", "region": "us-east-1"}
    assert set(config["spec"]["hybrid"]["ssm"]) == {"activationCode", "activationId"}
    assert config["spec"]["kubelet"]["flags"] == [
        "--node-labels=llm-platform.io/accelerator=nvidia-l40s,llm-platform.io/gpu-memory-mib=49152,"
        "llm-platform.io/pool=onprem-l40s,node.kubernetes.io/purpose=gpu-inference,nvidia.com/gpu.present=true",
        "--register-with-taints=nvidia.com/gpu=true:NoSchedule",
    ]
    assert config["spec"]["kubelet"]["config"] == {"maxPods": 110}


def test_the_pool_description_is_what_the_pack_reads(plan):
    (pool,) = plan.of_type("llm-platform:index:HybridNodePool")
    assert pool.inputs["nodes"] == 2
    assert pool.inputs["labels"]["eks.amazonaws.com/compute-type"] == "hybrid"
    assert pool.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert pool.inputs["server"] == {"cpu": 32, "memoryGib": 256, "gpus": 4, "gpuMemoryMib": 49152,
                                     "accelerator": "nvidia-l40s", "maxPods": 110, "networkMbps": 10000}
    described = {k: v for k, v in plan.outputs[pool.urn].items() if k != "nodeConfig"}
    assert described == pool.inputs  # a real preview's pack reads the outputs


def test_the_platform_outputs_carry_the_join_configuration_as_a_secret(plan):
    """``__main__`` exports these as ``hybridNodeConfigs`` and ``hybridActivationId``."""
    (outputs,) = [o for urn, o in plan.outputs.items() if urn.endswith("llm-platform:index:Platform::llm-platform")]
    configs = outputs["hybrid_node_configs"]
    assert configs["4dabf18193072939515e22adb298388d"] == "1b47061264138c4ac30d75fd1eb44270"
    assert list(configs["value"]) == ["onprem-l40s"]
    assert outputs["hybrid_activation_id"]


def test_cilium_is_installed_for_the_hybrid_nodes_without_waiting_for_them(plan):
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "cilium"]
    assert release.inputs["version"] == "1.18.12" and release.inputs["namespace"] == "kube-system"
    assert release.inputs["skipAwait"] is True and release.inputs["atomic"] is False


def test_the_pools_chargeback_rate_prices_its_gpus_in_the_token_cost_rules():
    """``costPerGpuHourUsd`` reaches Prometheus as the pool's price (``price_basis="chargeback"``); a pool
    without one gets no price series (its GPUs show as unpriced, not as free)."""
    rated = {**POOL, "costPerGpuHourUsd": 0.85}
    found = plan_with("dev", hybridNodes={**HYBRID, "pools": [rated]},
                      serving=hybrid_config()["llm-platform:serving"])
    (rule,) = [r for r in found.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
               if r.inputs["metadata"]["name"] == "llm-platform-gpu-serving"]
    prices = [r for g in rule.inputs["spec"]["groups"] for r in g["rules"]
              if r.get("record") == "llm:pool_gpu_price_usd_per_hour"]
    assert prices == [{"record": "llm:pool_gpu_price_usd_per_hour", "expr": "vector(0.85)",
                       "labels": {"pool": "onprem-l40s", "price_basis": "chargeback"}}]


def test_a_pool_without_a_rate_gets_no_price(plan):
    (rule,) = [r for r in plan.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
               if r.inputs["metadata"]["name"] == "llm-platform-gpu-serving"]
    assert not [r for g in rule.inputs["spec"]["groups"] for r in g["rules"]
                if r.get("record") == "llm:pool_gpu_price_usd_per_hour"]


# --- capacity -------------------------------------------------------------------------------------


def test_the_hybrid_pool_is_fixed_capacity_without_a_cloud_price():
    checked = CheckedStack.of(parse_settings(hybrid_config()))
    cluster = checked.cluster
    (pool,) = [p for p in cluster.pools if p.name == "onprem-l40s"]
    assert (pool.kind, pool.capacity_source, pool.min_nodes, pool.max_nodes) == ("hybrid node pool", "fixed nodes", 2, 2)
    assert pool.key == "hybridNodes.pools[0]"
    # dev's cloud worst case alone is 16 GPUs and $29.98/h (4 x g5.4xlarge $1.624 + gpu-inference 8 GPUs at
    # g5.4xlarge's $1.624/GPU-h + gpu-training 4 GPUs at g6e.12xlarge's $2.623/GPU-h): the 8 on-prem GPUs add neither.
    worst = stack_worst_case(cluster.pools)
    assert (worst.gpus, round(worst.hourly_usd, 2)) == (16, 29.98)
    plan_ = next(p for p in checked.simulation.plans if p.pool.name == "onprem-l40s")
    assert [w.name for w in plan_.workloads] == ["Deployment serving-onprem/llama-onprem"]


def test_more_replicas_than_the_servers_hold_is_refused():
    found = problems(hybrid_config(model={**ONPREM_MODEL, "gpusPerReplica": 4, "replicas": {"min": 1, "max": 3}}))
    assert any(p.startswith("llm-platform:serving.tiers[onprem].models[llama-onprem].replicas.max: got 3:")
               for p in found), found


# --- settings refuse what cannot work ---------------------------------------------------------------


def test_hybrid_without_connectivity_is_refused():
    hybrid = {k: v for k, v in HYBRID.items() if k != "connectivity"}
    assert problems(hybrid_config(hybrid)) == [
        "llm-platform:hybridNodes.connectivity: got (missing): required when hybridNodes.enabled is true: the VPC "
        "reaches the on-prem networks through a transitGatewayId (tgw-...) or a virtualPrivateGatewayId (vgw-...)"]


def test_both_gateways_are_refused():
    hybrid = {**HYBRID, "connectivity": {"transitGatewayId": TGW, "virtualPrivateGatewayId": "vgw-0123456789abcdef0"}}
    [problem] = problems(hybrid_config(hybrid))
    assert problem.startswith("llm-platform:hybridNodes.connectivity: ")
    assert problem.endswith("set exactly one of transitGatewayId or virtualPrivateGatewayId")


def test_remote_networks_overlapping_the_vpc_are_refused():
    found = problems(hybrid_config({**HYBRID, "remoteNodeNetworks": ["10.40.16.0/20"]}))
    assert found == ['llm-platform:hybridNodes.remoteNodeNetworks[0]: got "10.40.16.0/20": overlaps network.vpcCidr '
                     '10.40.0.0/16; remote networks must be outside the VPC']


def test_remote_networks_overlapping_each_other_are_refused():
    [problem] = problems(hybrid_config({**HYBRID, "remotePodNetworks": ["192.168.8.0/21"]}))
    assert problem.startswith("llm-platform:hybridNodes: ")
    assert problem.endswith("remote networks 192.168.0.0/20 and 192.168.8.0/21 overlap; node and pod networks must "
                            "be disjoint")


def test_a_model_wider_than_the_servers_is_refused():
    # 96Gi: the eight streamer buffers of 4 GiB (its s3 safetensors stream by default) fit in half of it.
    found = problems(hybrid_config(model={**ONPREM_MODEL, "gpusPerReplica": 8, "catalog": "llama-3.1-70b-instruct",
                                          "memory": "96Gi"}))
    assert "llm-platform:serving.tiers[onprem].models[llama-onprem].gpusPerReplica: got 8: 'onprem-l40s' nodes have " \
           "at most 4 GPUs; tensor parallelism stays within one node" in found


def test_a_model_whose_weights_do_not_fit_the_pools_gpus_is_refused():
    """Llama 3.1 70B in bf16 is about 131 GiB of weights: split over 2 GPUs of 48 GiB, vLLM's 0.9 share
    (2 x 43.2 GiB) cannot hold them (the pack's and the settings' one memory model)."""
    found = problems(hybrid_config(model={**ONPREM_MODEL, "gpusPerReplica": 2, "catalog": "llama-3.1-70b-instruct"}))
    assert any(p.startswith("llm-platform:serving.tiers[onprem].models[llama-onprem].catalog:") for p in found), found


def test_a_fallback_that_is_not_a_served_model_is_refused():
    [problem] = problems(hybrid_config(model={**ONPREM_MODEL, "fallbacks": ["gpt-4o"]}))
    assert problem == ("llm-platform:serving.tiers[2].models[0].fallbacks[0]: got \"gpt-4o\": 'gpt-4o' is not a served "
                       "model; allowed: llama-3-1-8b-instruct, qwen2-5-7b-instruct")


def test_a_fallback_of_another_kind_is_refused():
    config = hybrid_config()
    batch = config["llm-platform:serving"]["tiers"][1]
    batch["models"].append({"name": "bge-m3", "kind": "embedding", "source": {"s3": "s3://llm-platform-models-dev/BAAI/bge-m3/"},
                            "pool": "gpu-inference", "catalog": "bge-m3", "replicas": {"min": 0, "max": 1},
                            "cpu": "2", "memory": "8Gi"})
    config["llm-platform:serving"]["tiers"][2]["models"][0]["fallbacks"] = ["bge-m3"]
    found = problems(config)
    assert ("llm-platform:serving.tiers[2].models[0].fallbacks[0]: got \"bge-m3\": 'bge-m3' is an embedding model and "
            "'llama-onprem' a chat model; a fallback serves the same kind of request") in found


def test_a_fallback_cycle_is_refused():
    config = hybrid_config()
    config["llm-platform:serving"]["tiers"][0]["models"][0]["fallbacks"] = ["llama-onprem"]
    [problem] = problems(config)
    assert problem == ("llm-platform:serving.tiers[0].models[0].fallbacks: got [\"llama-onprem\"]: fallbacks form a "
                       "cycle llama-3-1-8b-instruct -> llama-onprem -> llama-3-1-8b-instruct; the gateway would send a "
                       "failed request back to a model it already tried: remove one link")


# --- the offline check, as a user runs it -----------------------------------------------------------


def test_the_dev_copy_with_an_on_prem_tier_passes_the_offline_check(tmp_path):
    stack = {"config": hybrid_config()}
    stack_file = tmp_path / "Pulumi.dev-hybrid.yaml"
    stack_file.write_text(yaml.safe_dump(stack, sort_keys=False))
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file", str(stack_file),
         "--out", str(tmp_path / "out"), "--output", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["policies"]["violations"] == [], summary["policies"]
