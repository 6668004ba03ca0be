"""The cold-start model (policies/capacity/cold_start.py) as specifications: literal seconds per step.

Figures every case shares (each with its source in the module):
- vLLM image vllm/vllm-openai:v0.33.0: 12.64e9 bytes compressed, 28.6e9 unpacked (images.json);
- unpack 150 MiB/s = 157,286,400 B/s; S3 10 connections x 85 MB/s = 850,000,000 B/s;
- torch.compile 60 s + CUDA graphs 30 s; readiness one startup probe period, 10 s (the model server's
  probe: 10 s x 180 failures = an 1800 s window);
- Karpenter: batch idle 1 s + launch and join 90 s + GPUs advertised 30 s = 121 s;
- Cluster Autoscaler: scan 10 s + ASG scale-out 30 s + launch and join 90 s + GPUs advertised 30 s = 160 s.

Weights (policies/capacity/model_catalog.json, parameters x bits per weight, 16-bit embeddings when the
quantization leaves them unquantized):
- Llama-3.1-70B AWQ INT4: (70,562,938,880 - 2 x 128,256 x 8,192) x 4.16 / 8 + 2,101,346,304 x 2
  = 39,802,720,747.52 bytes;
- Llama-3.1-8B bf16: 8,030,261,248 x 2 = 16,060,522,496 bytes.
"""

from __future__ import annotations

import pytest

from policies.capacity import cold_start
from policies.capacity.cold_start import COLD, WARM, await_budget, start
from policies.capacity.instances import load_instances
from policies.capacity.llm import model_catalog
from tests.policies.conftest import stack_yaml_config

IMAGE = "vllm/vllm-openai:v0.33.0"
INSTANCES = load_instances().instances
PROBE = {"startup_probe_period_seconds": 10, "startup_probe_failures": 180}


def prod_interactive(case: str = COLD, cached: bool = False) -> cold_start.Start:
    """Prod's interactive model: 4 GPUs per replica on the Karpenter pool gpu-interactive (g5 family, on-demand),
    which plans on g5.12xlarge (4 x A10G, 40,000 Mbps); prod's GPU EC2NodeClass root volume runs at 750 MiB/s."""
    return start("llama-3-1-70b-instruct-awq", "gpu-interactive",
                 weight_bytes=model_catalog()["llama-3.1-70b-instruct-awq"].weight_bytes(),
                 instance=INSTANCES["g5.12xlarge"], capacity_source="Karpenter", image=IMAGE,
                 disk_throughput_mibps=750, case=case, weights_cached=cached, **PROBE)


def seconds(s: cold_start.Start) -> dict[str, float]:
    return {step.name: round(step.seconds, 2) for step in s.steps}


def test_the_figures_match_the_prod_stack():
    """The cases below read prod's settings as Pulumi.prod.yaml sets them."""
    config = stack_yaml_config("prod")
    model = config["llm-platform:serving"]["tiers"][0]["models"][0]
    assert (model["catalog"], model["pool"], model["gpusPerReplica"]) == ("llama-3.1-70b-instruct-awq", "gpu-interactive", 4)
    assert config["llm-platform:karpenter"]["nodeClasses"][0]["rootVolume"]["throughputMibps"] == 750
    assert (INSTANCES["g5.12xlarge"].gpus, INSTANCES["g5.12xlarge"].network_bandwidth_mbps) == (4, 40000)
    assert INSTANCES["g5.2xlarge"].network_bandwidth_mbps == 5000


def test_prod_interactive_70b_awq_cold_on_karpenter():
    """Disk 750 MiB/s = 786,432,000 B/s is the slowest path everywhere (network 5e9 B/s, S3 8.5e8 B/s):
    image 12.64e9 / 786,432,000 = 16.07 s + 28.6e9 / 157,286,400 = 181.83 s -> 197.91 s;
    weights and load 39,802,720,747.52 / 786,432,000 = 50.61 s each."""
    cold = prod_interactive()
    assert seconds(cold) == {"node": 121.0, "image": 197.91, "weights": 50.61, "load": 50.61, "compile": 90.0,
                             "readiness": 10.0}
    assert cold.seconds == pytest.approx(520.13, abs=0.01)
    assert cold.dominant.name == "image"
    assert cold.instance == "g5.12xlarge"


def test_dev_8b_cold_on_g5_2xlarge_via_cluster_autoscaler():
    """Dev's managed GPU group (g5.2xlarge first, so Cluster Autoscaler sizes from it) has the GPU root volume
    at 500 MiB/s = 524,288,000 B/s, below the node's 5,000 Mbps = 625,000,000 B/s and S3's 850,000,000 B/s:
    image 12.64e9 / 524,288,000 = 24.11 s + 181.83 s = 205.94 s; weights and load 16,060,522,496 / 524,288,000
    = 30.63 s each."""
    cold = start("llama-3-1-8b-instruct", "inference", weight_bytes=model_catalog()["llama-3.1-8b-instruct"].weight_bytes(),
                 instance=INSTANCES["g5.2xlarge"], capacity_source="Cluster Autoscaler", image=IMAGE,
                 disk_throughput_mibps=500, **PROBE)
    assert seconds(cold) == {"node": 160.0, "image": 205.94, "weights": 30.63, "load": 30.63, "compile": 90.0,
                             "readiness": 10.0}
    assert cold.seconds == pytest.approx(527.21, abs=0.01)
    assert cold.dominant.name == "image"


def test_warm_with_cached_weights_pays_only_load_compile_and_readiness():
    warm = prod_interactive(WARM, cached=True)
    assert seconds(warm) == {"node": 0.0, "image": 0.0, "weights": 0.0, "load": 50.61, "compile": 90.0, "readiness": 10.0}
    assert warm.seconds == pytest.approx(150.61, abs=0.01)
    assert warm.dominant.name == "compile"


def test_warm_without_a_cache_fetches_the_weights_again():
    """Today's emptyDir dies with the pod: a rescheduled pod copies the 39.8 GB again."""
    warm = prod_interactive(WARM)
    assert seconds(warm)["weights"] == 50.61
    assert warm.seconds == pytest.approx(201.22, abs=0.01)


def test_a_cold_node_never_has_the_weights_cached():
    assert seconds(prod_interactive(COLD, cached=True))["weights"] == 50.61


def test_s3_limits_the_fetch_once_the_disk_is_faster():
    """Root volume at 1000 MiB/s = 1,048,576,000 B/s: S3's 850,000,000 B/s is the lesser;
    39,802,720,747.52 / 850,000,000 = 46.83 s; the load reads at the disk's rate, 37.96 s."""
    cold = start("m", "p", weight_bytes=model_catalog()["llama-3.1-70b-instruct-awq"].weight_bytes(),
                 instance=INSTANCES["g5.12xlarge"], capacity_source="Karpenter", image=IMAGE,
                 disk_throughput_mibps=1000, **PROBE)
    assert seconds(cold)["weights"] == 46.83
    assert seconds(cold)["load"] == 37.96


@pytest.mark.parametrize("source, seconds_", [("Karpenter", 121.0), ("Cluster Autoscaler", 160.0),
                                               ("EKS Auto Mode", 121.0), ("fixed nodes", 0.0)])
def test_node_provisioning_per_capacity_source(source, seconds_):
    assert cold_start.node_provisioning(source).seconds == seconds_


def test_a_pool_without_a_capacity_source_is_refused():
    with pytest.raises(ValueError, match="no capacity source None"):
        cold_start.node_provisioning(None)


def test_an_image_without_a_size_is_named():
    with pytest.raises(KeyError, match="image vllm/vllm-openai:v9.9.9 has no size in policies/capacity/images.json"):
        cold_start.image_size("vllm/vllm-openai:v9.9.9@sha256:" + "a" * 64)


def test_the_await_budget_is_the_model_servers_bound():
    """The bound components/serving/model_server.py gives the Deployment today: node 600 + image 600 + weights
    ceil(39,802,720,747.52 / 104,857,600) = 380 + startup probe window 1800 = 3380 s."""
    budget = await_budget(prod_interactive())
    assert (budget.node_ready, budget.image_pull, budget.weights, budget.load, budget.total) == (600, 600, 380, 1800, 3380)


def test_every_figure_names_its_source():
    starts = [prod_interactive(), prod_interactive(WARM, cached=True)]
    starts += [start("m", "p", weight_bytes=1e9, instance=INSTANCES["g5.2xlarge"], capacity_source=source, image=IMAGE,
                     disk_throughput_mibps=500, **PROBE) for source in cold_start.CAPACITY_SOURCES]
    figures = [figure for s in starts for step in s.steps for figure in step.figures]
    assert len(figures) > 20
    for figure in figures:
        assert len(figure.source) > 20, figure
        assert figure.unit
    estimates = {f.name for f in figures if f.source.startswith("estimate")}
    assert "EC2 launch, boot and node join" in estimates and "torch.compile" in estimates
    # every non-zero step of a cold start rests on at least one figure
    for step in prod_interactive().steps:
        assert step.figures, step.name
