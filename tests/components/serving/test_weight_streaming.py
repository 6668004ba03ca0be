"""Weights streamed from S3 (issue 32): prod's 70B model as the program emits it, and the proof that a
replacement pod on a node that served the model before copies nothing to the node again: it streams.

Prod (Pulumi.prod.yaml): llama-3-1-70b-instruct-awq, weights: stream, streaming {concurrency: 32,
memoryLimitGib: 8}, 4 GPUs per replica, source s3://llm-platform-models-prod/meta-llama/Llama-3.1-70B-Instruct-AWQ/,
region us-east-1. Its cold start on a new g5.12xlarge of gpu-interactive: node 121 s + image 197.91 s +
weights 0 + load 39,802,720,747.52 B / (32 x 85 MB/s) = 14.63 s + compile 90 s + readiness 10 s = 433.5 s;
warm 114.6 s. The await budget: 600 + 600 + 0 + 1800 = 3000 s.
"""

from __future__ import annotations

import fnmatch
import json

from components.settings.serving import ServedModel
from components.specs import serving
from policies.capacity.cold_start import COLD, WARM, start, weight_loading
from policies.capacity.instances import load_instances

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
STREAMED = "llama-3-1-70b-instruct-awq"
SOURCE = "s3://llm-platform-models-prod/meta-llama/Llama-3.1-70B-Instruct-AWQ/"
BUCKET, PREFIX = "llm-platform-models-prod", "meta-llama/Llama-3.1-70B-Instruct-AWQ/"


def deployment(plan, name: str) -> dict:
    (found,) = [r.inputs for r in plan.of_type(DEPLOYMENT) if r.inputs["metadata"]["name"] == name]
    return found


def test_the_streamed_deployment_as_emitted(prod_plan):
    emitted = deployment(prod_plan, STREAMED)
    pod = emitted["spec"]["template"]["spec"]
    (vllm,) = pod["containers"]
    assert vllm["args"] == [
        SOURCE, "--served-model-name", STREAMED, "--tensor-parallel-size", "4", "--gpu-memory-utilization", "0.92",
        "--max-model-len", "8192", "--load-format", "runai_streamer",
        "--model-loader-extra-config", '{"distributed": true}', "--port", "8000"]
    env = {e["name"]: e.get("value") for e in vllm["env"]}
    assert env["RUNAI_STREAMER_CONCURRENCY"] == "32"
    assert env["RUNAI_STREAMER_MEMORY_LIMIT"] == str(8 * 1024**3) == "8589934592"
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
    assert pod["initContainers"] == []
    assert {v["name"] for v in pod["volumes"]} == {"dshm", "home", "tmp"}
    assert "/models" not in {m["mountPath"] for m in vllm["volumeMounts"]}
    # The probe windows are the model server's: 10 s x 180 to start, then readiness and liveness.
    assert vllm["startupProbe"]["periodSeconds"] == 10 and vllm["startupProbe"]["failureThreshold"] == 180
    assert vllm["readinessProbe"]["periodSeconds"] == 10 and vllm["livenessProbe"]["periodSeconds"] == 30
    assert emitted["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == "3000"
    assert emitted["spec"]["progressDeadlineSeconds"] == 3000


def test_every_s3_safetensors_model_streams_by_default(prod_plan, dev_plan):
    """No stack sets weights on these: an s3 source in safetensors streams (one rank each, so no distributed
    flag), with the streamer's default 16 readers and the stack's region for S3."""
    for plan, name, source, region in (
            (prod_plan, "qwen2-5-32b-instruct", "s3://llm-platform-models-prod/Qwen/Qwen2.5-32B-Instruct-AWQ/", "us-east-1"),
            (dev_plan, "llama-3-1-8b-instruct", "s3://llm-platform-models-dev/meta-llama/Llama-3.1-8B-Instruct/",
             "us-east-1"),
            (dev_plan, "qwen2-5-7b-instruct", "s3://llm-platform-models-dev/Qwen/Qwen2.5-7B-Instruct/", "us-east-1")):
        pod = deployment(plan, name)["spec"]["template"]["spec"]
        assert pod["initContainers"] == [], name
        assert "model-cache" not in {v["name"] for v in pod["volumes"]}, name
        (vllm,) = pod["containers"]
        assert vllm["args"][0] == source, name
        assert vllm["args"][vllm["args"].index("--load-format") + 1] == "runai_streamer", name
        assert "--model-loader-extra-config" not in vllm["args"], name
        env = {e["name"]: e.get("value") for e in vllm["env"]}
        assert (env["RUNAI_STREAMER_CONCURRENCY"], env["AWS_REGION"]) == ("16", region), name


def test_a_checkpoint_the_streamer_cannot_read_keeps_its_init_container_and_cache(prod_plan):
    """Prod's bge-m3 is declared source.format pytorch (BAAI publishes pytorch_model.bin): downloaded."""
    pod = deployment(prod_plan, "bge-m3")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["fetch-weights"]
    assert "model-cache" in {v["name"] for v in pod["volumes"]}
    (vllm,) = pod["containers"]
    assert vllm["args"][0] == "/models/bge-m3" and "--load-format" not in vllm["args"]
    assert not {"RUNAI_STREAMER_CONCURRENCY", "AWS_REGION"} & {e["name"] for e in vllm["env"]}


def test_a_replacement_pod_copies_nothing_to_the_node_it_streams(prod_plan):
    """Behaviour on the emitted objects: everything a replacement pod of the streamed model could write
    the weights to is pod-scoped and too small to hold them, nothing runs before the server, and the server
    reads the S3 prefix itself; the cold-start model, reading the same emitted pod, counts no copy step cold
    or warm, only the streamed load."""
    pod = deployment(prod_plan, STREAMED)["spec"]["template"]["spec"]
    assert not pod["initContainers"]
    weights_gib = 39_802_720_747.52 / 1024**3  # 37.07 GiB
    for volume in pod["volumes"]:
        assert set(volume) == {"name", "emptyDir"}, volume  # no hostPath, no PVC: nothing outlives the pod
        assert float(volume["emptyDir"]["sizeLimit"].removesuffix("Gi")) < weights_gib, volume
    (vllm,) = pod["containers"]
    assert vllm["args"][0].startswith("s3://") and weight_loading(pod).mode == "stream"
    facts = dict(weight_bytes=39_802_720_747.52, instance=load_instances().instances["g5.12xlarge"], capacity_source="Karpenter",
                 image=vllm["image"], disk_throughput_mibps=750, startup_probe_period_seconds=10, startup_probe_failures=180,
                 loading=weight_loading(pod))
    cold, warm = start(STREAMED, "gpu-interactive", case=COLD, **facts), start(STREAMED, "gpu-interactive", case=WARM, **facts)
    assert (cold.step("weights").seconds, warm.step("weights").seconds) == (0.0, 0.0)
    assert round(warm.step("load").seconds, 2) == 14.63 and "streamed from S3" in warm.step("load").detail
    assert (round(cold.seconds, 1), round(warm.seconds, 1)) == (433.5, 114.6)


def test_the_models_role_allows_what_the_streamer_asks_s3(prod_plan):
    """The streamer lists the prefix (ListObjectsV2, action s3:ListBucket with s3:prefix = the prefix) and
    reads each safetensors file and config file under it (GetObject); nothing else. StringLike matches
    ``*`` across ``/`` (IAM policy reference, condition operators)."""
    (policy,) = [json.loads(r.inputs["policy"]) for r in prod_plan.of_type("aws:iam/rolePolicy:RolePolicy")
                 if BUCKET in r.inputs["policy"] and PREFIX in r.inputs["policy"]]
    statements = {s["Sid"]: s for s in policy["Statement"]}
    listing = statements["ListModelPrefix"]
    assert listing["Action"] == "s3:ListBucket" and listing["Resource"].endswith(f":s3:::{BUCKET}")
    assert any(fnmatch.fnmatchcase(PREFIX, p) for p in listing["Condition"]["StringLike"]["s3:prefix"])
    reading = statements["ReadModelObjects"]
    assert reading["Action"] == "s3:GetObject"
    for key in ("model-00001-of-00009.safetensors", "config.json", "tokenizer.json"):
        assert fnmatch.fnmatchcase(f"arn:aws:s3:::{BUCKET}/{PREFIX}{key}", reading["Resource"]), key
    assert not fnmatch.fnmatchcase(f"arn:aws:s3:::{BUCKET}/other-model/config.json", reading["Resource"])


def test_the_await_budget_of_a_streamed_model_without_a_pool():
    """No pool known: node 600 + image 600 + no copy + the probe window 1800 = 3000 s."""
    model = ServedModel.model_validate({"name": "streamed", "source": {"s3": "s3://models-bucket/m/"}, "pool": "gpu",
                                        "catalog": "llama-3.1-8b-instruct", "replicas": {"min": 0, "max": 1}, "weights": "stream"})
    bound = serving.cold_start_bound(model, None)
    assert (bound.weights, bound.total) == (0, 3000)
