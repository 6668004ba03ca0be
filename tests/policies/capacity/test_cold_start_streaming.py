"""The cold-start model's streamed and pre-pulled cases (issue 32), as literal seconds per step.

Shared figures (docstring of test_cold_start.py): the vLLM image's pull on prod's g5.12xlarge with a
750 MiB/s root volume is 197.91 s; Karpenter's node 121 s; compile 90 s; readiness 10 s; Llama-3.1-70B
AWQ INT4 weighs 39,802,720,747.52 bytes.

Streamed (vLLM's Run:ai model streamer): no copy to disk; the load reads S3 at concurrency x 85 MB/s,
capped by the node's network (g5.12xlarge 40,000 Mbps = 5e9 B/s) and host-to-GPU (25e9 B/s):
- prod's 32 readers: 2,720,000,000 B/s -> 39,802,720,747.52 / 2.72e9 = 14.63 s;
- the streamer's default 8 readers: 680,000,000 B/s -> 58.53 s;
- on g5.2xlarge (5,000 Mbps = 625,000,000 B/s) 32 readers are network-bound: 63.68 s.
"""

from __future__ import annotations

import pytest

from policies.capacity import cold_start
from policies.capacity.cold_start import COLD, STREAM, WARM, WeightLoading, await_budget, start, weight_loading
from policies.capacity.instances import load_instances
from policies.capacity.llm import model_catalog
from policies.capacity.model import Pool, Taint

IMAGE = "vllm/vllm-openai:v0.33.0"
INSTANCES = load_instances().instances
PROBE = {"startup_probe_period_seconds": 10, "startup_probe_failures": 180}
AWQ_70B = model_catalog()["llama-3.1-70b-instruct-awq"].weight_bytes()


def streamed(case: str = COLD, *, concurrency: int = 32, instance: str = "g5.12xlarge", prepulled: bool = True) -> cold_start.Start:
    return start("llama-3-1-70b-instruct-awq", "gpu-interactive", weight_bytes=AWQ_70B, instance=INSTANCES[instance],
                 capacity_source="Karpenter", image=IMAGE, disk_throughput_mibps=750, case=case,
                 loading=WeightLoading(STREAM, concurrency), image_prepulled=prepulled, **PROBE)


def seconds(s: cold_start.Start) -> dict[str, float]:
    return {step.name: round(step.seconds, 2) for step in s.steps}


def test_prod_70b_streamed_cold():
    cold = streamed()
    assert seconds(cold) == {"node": 121.0, "image": 197.91, "weights": 0.0, "load": 14.63, "compile": 90.0, "readiness": 10.0}
    assert round(cold.seconds, 1) == 433.5
    assert cold.dominant.name == "image"
    assert "streamed from S3" in cold.step("load").detail and "32 connections" in cold.step("load").detail


def test_prod_70b_streamed_warm_is_cold_minus_node_and_image():
    warm = streamed(WARM)
    assert seconds(warm) == {"node": 0.0, "image": 0.0, "weights": 0.0, "load": 14.63, "compile": 90.0, "readiness": 10.0}
    assert round(warm.seconds, 1) == 114.6


def test_the_streamers_default_concurrency_and_a_network_bound_node():
    assert seconds(streamed(concurrency=8))["load"] == 58.53
    assert seconds(streamed(instance="g5.2xlarge"))["load"] == 63.68


def test_streaming_removes_the_copy_from_the_await_budget():
    """Node 600 + image 600 + weights 0 + the probe window 1800 = 3000 s (3380 s downloaded)."""
    budget = await_budget(streamed())
    assert (budget.node_ready, budget.image_pull, budget.weights, budget.load, budget.total) == (600, 600, 0, 1800, 3000)


def test_warm_without_a_prepulled_image_pulls_it():
    warm = streamed(WARM, prepulled=False)
    assert seconds(warm)["image"] == 197.91
    assert round(warm.seconds, 1) == 312.5


def test_a_prepull_does_not_shorten_a_cold_start():
    assert seconds(streamed(COLD, prepulled=True))["image"] == seconds(streamed(COLD, prepulled=False))["image"] == 197.91


def test_the_streamed_load_names_its_figures():
    figures = {f.name for f in streamed().step("load").figures}
    assert {"S3 throughput per connection", "Run:ai model streamer concurrency", "g5.12xlarge network bandwidth",
            "host-to-GPU copy rate", "startup probe window"} <= figures
    assert all(f.source for f in streamed().step("load").figures)


def test_weight_loading_is_read_from_the_emitted_pod():
    server = {"name": "vllm", "image": IMAGE, "args": ["s3://b/p/", "--load-format", "runai_streamer"],
              "env": [{"name": "RUNAI_STREAMER_CONCURRENCY", "value": "24"}]}
    assert weight_loading({"containers": [server]}) == WeightLoading("stream", 24)
    assert weight_loading({"containers": [{**server, "env": []}]}) == WeightLoading("stream", 8)
    assert weight_loading({"containers": [{**server, "args": ["s3://b/p/", "--load-format=runai_streamer"]}]}).mode == "stream"
    assert weight_loading({"containers": [{**server, "args": ["/models/m", "--download-dir", "/models"]}]}) == WeightLoading("download", 8)
    assert weight_loading({}) == WeightLoading("download", 8)


def test_an_unknown_weight_loading_is_refused():
    with pytest.raises(ValueError, match="weight loading must be one of download, stream"):
        WeightLoading("copy")
    with pytest.raises(ValueError, match="at least 1"):
        WeightLoading(STREAM, 0)


class _Resource:
    def __init__(self, type_: str, urn: str, props: dict, parent: str | None = None, *, inputs: bool = False):
        self.type, self.urn, self.parent = type_, urn, parent
        setattr(self, "inputs" if inputs else "props", props)


GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")


def _pool(name: str) -> Pool:
    return Pool(name=name, kind="karpenter NodePool", instances=[INSTANCES["g5.12xlarge"]],
                labels={"llm-platform.io/pool": name}, taints=[GPU_TAINT])


def _prepull(pools: list[str], tolerations: list[dict], image: str = IMAGE) -> _Resource:
    pod = {"tolerations": tolerations,
           "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
               {"matchExpressions": [{"key": "llm-platform.io/pool", "operator": "In", "values": pools}]}]}}},
           "initContainers": [{"name": "pull", "image": image}], "containers": [{"name": "hold", "image": "pause"}]}
    return _Resource("kubernetes:apps/v1:DaemonSet", "urn:ds", {"spec": {"template": {"spec": pod}}})


TOLERATES_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_a_prepull_daemonset_counts_only_on_the_pools_it_reaches():
    resources = [_prepull(["gpu-interactive"], TOLERATES_GPU)]
    assert cold_start.image_prepulled(resources, IMAGE, _pool("gpu-interactive")) is True
    assert cold_start.image_prepulled(resources, IMAGE, _pool("inference-l40s")) is False
    # Selected but not tolerated: the DaemonSet runs no pod there.
    assert cold_start.image_prepulled([_prepull(["gpu-interactive"], [])], IMAGE, _pool("gpu-interactive")) is False
    # Another image (or another version of it) does not count.
    assert cold_start.image_prepulled([_prepull(["gpu-interactive"], TOLERATES_GPU, "vllm/vllm-openai:v0.32.0")],
                                      IMAGE, _pool("gpu-interactive")) is False


def test_root_volume_is_read_alike_from_pack_and_plan_resources():
    """A NodePool's EC2NodeClass (root mapping first), a managed group's launch template under an ancestor."""
    for inputs in (False, True):
        pool = _Resource("kubernetes:karpenter.sh/v1:NodePool", "urn:np",
                         {"spec": {"template": {"spec": {"nodeClassRef": {"name": "gpu"}}}}}, inputs=inputs)
        node_class = _Resource("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "urn:nc", {"metadata": {"name": "gpu"}, "spec": {
            "blockDeviceMappings": [{"ebs": {"throughput": 125}}, {"rootVolume": True, "ebs": {"throughput": 750}}]}}, inputs=inputs)
        assert cold_start.root_volume_mibps([pool, node_class], "urn:np") == 750
        group = _Resource("eks:index:ManagedNodeGroup", "urn:mng", {}, "urn:component", inputs=inputs)
        component = _Resource("llm-platform:index:GpuPool", "urn:component", {}, "urn:platform", inputs=inputs)
        template = _Resource("aws:ec2/launchTemplate:LaunchTemplate", "urn:lt",
                             {"blockDeviceMappings": [{"ebs": {"throughput": 500}}]}, "urn:platform", inputs=inputs)
        assert cold_start.root_volume_mibps([group, component, template], "urn:mng") == 500
        assert cold_start.root_volume_mibps([group, component], "urn:mng") is None
        assert cold_start.root_volume_mibps([], "urn:absent") is None


def test_the_pools_own_node_class_is_read_among_others():
    """A stack has several EC2NodeClasses; the NodePool's nodeClassRef names the one whose root volume counts."""
    pool = _Resource("kubernetes:karpenter.sh/v1:NodePool", "urn:np",
                     {"spec": {"template": {"spec": {"nodeClassRef": {"name": "gpu"}}}}})
    classes = [_Resource("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", f"urn:{name}", {"metadata": {"name": name}, "spec": {
        "blockDeviceMappings": [{"rootVolume": True, "ebs": {"throughput": mibps}}]}}) for name, mibps in
        (("system", 300), ("gpu", 750), ("training", 1000))]
    assert cold_start.root_volume_mibps([pool, *classes], "urn:np") == 750


def test_one_nodes_s3_draw_is_ten_connections_at_85_mb_per_second():
    """AWS CLI's max_concurrent_requests 10 x the S3 guideline of 85 MB/s per connection: 850,000,000 B/s."""
    assert cold_start.s3_bytes_per_second() == 850_000_000


# --- tensor-parallel ranks: each streams the whole checkpoint unless vLLM's distributed mode is on ----------
# vLLM's RunaiModelStreamerLoader (vllm/model_executor/model_loader/runai_streamer_loader.py) keeps
# _is_distributed False unless --model-loader-extra-config says {"distributed": true}: each of the 4 ranks then
# streams all 39.80 GB, 159.21 GB through the g5.12xlarge's 5e9 B/s (4 x 32 readers x 85 MB/s = 10.88e9 B/s is
# not the limit): 31.84 s. Distributed, the ranks split the files: 39.80 GB at 32 x 85 MB/s = 14.63 s. The
# textbook reading ("each rank reads its shard") gives the distributed figure for both.


def ranked(ranks: int, distributed: bool) -> cold_start.Start:
    return start("llama-3-1-70b-instruct-awq", "gpu-interactive", weight_bytes=AWQ_70B, instance=INSTANCES["g5.12xlarge"],
                 capacity_source="Karpenter", image=IMAGE, disk_throughput_mibps=750,
                 loading=WeightLoading(STREAM, 32, ranks=ranks, distributed=distributed), **PROBE)


def test_every_rank_streams_the_whole_checkpoint_without_distributed_mode():
    load = ranked(4, distributed=False).step("load")
    assert round(load.seconds, 2) == 31.84
    assert load.detail == "159.21 GB streamed from S3 to the GPUs at 4768 MiB/s (128 connections, 4 ranks each read it)"


def test_distributed_mode_pulls_the_checkpoint_once():
    load = ranked(4, distributed=True).step("load")
    assert round(load.seconds, 2) == 14.63
    assert load.detail == "39.80 GB streamed from S3 to the GPUs at 2594 MiB/s (32 connections, 4 ranks share it)"


def test_the_emitted_pod_says_ranks_and_distributed_mode():
    def pod(*args: str) -> dict:
        return {"containers": [{"name": "vllm", "image": IMAGE, "args": ["s3://b/m/", "--load-format", "runai_streamer", *args],
                                "env": [{"name": "RUNAI_STREAMER_CONCURRENCY", "value": "32"}]}]}

    assert weight_loading(pod("--tensor-parallel-size", "4")) == WeightLoading(STREAM, 32, ranks=4, distributed=False)
    assert weight_loading(pod("--tensor-parallel-size", "4", "--model-loader-extra-config", '{"distributed": true}')) == (
        WeightLoading(STREAM, 32, ranks=4, distributed=True))
    assert weight_loading(pod("--model-loader-extra-config", "not json")) == WeightLoading(STREAM, 32, ranks=1)


@pytest.mark.parametrize("extra, distributed", [
    ('{"distributed": true}', True),
    ('{"distributed": false}', False),
    ("[" * 100_000, False),  # nested past any parser: read as no config, never a RecursionError
    ("not json", False),
])
def test_the_loader_extra_config_is_read_with_a_nesting_bound(extra, distributed):
    pod = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.33.0", "args": [
        "s3://models/x/", "--load-format", "runai_streamer", "--tensor-parallel-size", "4",
        "--model-loader-extra-config", extra]}]}
    loading = weight_loading(pod)
    assert (loading.mode, loading.ranks, loading.distributed) == (STREAM, 4, distributed)
