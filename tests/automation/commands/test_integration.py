"""``test --from dev``: an ephemeral stack, post-deploy checks, and a clean-up that always runs."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import yaml

from automation import exit_codes
from automation.commands.integration import gpu_target
from automation.driver.environments import TAG_KIND, TAG_TEMPLATE, EnvRequestError, ephemeral_environment
from automation.driver.postdeploy import GpuTarget
from components import contract
from tests.automation.commands.test_env import config_pairs
from tests.automation.commands.test_stack_ops import flag_values
from tests.automation.conftest import Rig

STACK_RE = re.compile(r"^test-alice-\d{14}-[0-9a-f]{6}$")


def run_test(rig: Rig, *extra: str):
    return rig.run("test", "--from", "dev", "--kubectl", rig.kubectl, "--timeout", "0s", *extra)


def test_stack(rig: Rig) -> str:
    (init,) = [a for a in rig.calls.argvs() if a[:2] == ["stack", "init"]]
    return init[2]


test_stack.__test__ = False  # a helper, not a test


def has_row(out: str, status: str, check: str, detail: str = "") -> bool:
    """The pass/fail table has this row (its columns are padded to the widest cell)."""
    pattern = rf"^{status}\s+{re.escape(check)}\s+{re.escape(detail)}"
    return re.search(pattern, out, re.MULTILINE) is not None


def timeline(rig: Rig) -> list[str]:
    """Pulumi and kubectl calls in the order they happened, as short labels."""
    labels = []
    for entry in rig.calls.entries():
        if entry["tool"] not in ("pulumi", "kubectl") or entry["argv"][:1] == ["version"]:
            continue
        argv = [a for a in entry["argv"] if a != "--non-interactive"]
        if entry["tool"] == "kubectl":
            labels.append("kubectl " + argv[0])
        elif argv != ["version"]:
            labels.append(" ".join(a for a in argv[:2] if not a.startswith("-")))
    return labels


def assert_cleaned_up(rig: Rig, stack: str) -> None:
    argvs = rig.calls.argvs()
    (destroy,) = [a for a in argvs if a[0] == "destroy"]
    assert flag_values(destroy, "--stack") == [stack]
    assert argvs[-1] == ["stack", "rm", "--yes", stack]
    assert rig.stacks() == [], "nothing left in the backend"


def test_healthy_run_checks_the_cluster_then_destroys_it(rig: Rig):
    result = run_test(rig)

    assert result.code == exit_codes.OK, result.out + result.err
    stack = test_stack(rig)
    assert STACK_RE.match(stack), stack
    assert rig.calls.argvs()[0] == ["stack", "init", stack, "--secrets-provider", "passphrase"]
    tags = {a[3]: a[4] for a in rig.calls.argvs() if a[:3] == ["stack", "tag", "set"]}
    assert tags[TAG_KIND] == "test" and tags[TAG_TEMPLATE] == "dev"
    (set_all,) = [a for a in rig.calls.argvs() if a[:2] == ["config", "set-all"]]
    config = config_pairs(set_all)
    assert config["llm-platform:environment"] == ephemeral_environment(stack)
    pool = json.loads(config["llm-platform:gpuPools"])[0]
    assert pool["scaling"]["desiredSize"] == 1, "dev scales GPUs to zero; the test starts one node"
    (up,) = [a for a in rig.calls.argvs() if a[0] == "up"]
    assert flag_values(up, "--policy-pack-config") == [str(rig.project / "policies" / "config" / "dev.json")]

    kubectl = rig.calls.kubectl()
    cluster = f"https://llm-platform-{ephemeral_environment(stack)}.eks.example"
    assert {k["server"] for k in kubectl} == {cluster}, "kubectl talks to the stack's own kubeconfig output"
    (apply,) = [k for k in kubectl if k["argv"][0] == "apply"]
    namespace, job = yaml.safe_load_all(apply["stdin"])
    pod = job["spec"]["template"]["spec"]
    assert pod["tolerations"] == contract.workload_tolerations(pool.get("purpose", contract.GPU_INFERENCE_PURPOSE))
    assert contract.gpu_toleration() in pod["tolerations"]
    assert pod["nodeSelector"] == {contract.GPU_PRESENT_LABEL: "true", contract.POOL_LABEL: pool["name"]}
    assert pod["containers"][0]["command"] == ["nvidia-smi"]
    assert pod["containers"][0]["resources"]["limits"] == {contract.GPU_RESOURCE: 1}

    order = timeline(rig)
    assert order.index("up") < order.index("kubectl apply") < order.index("kubectl delete") < order.index("destroy")
    deletes = [k["argv"] for k in kubectl if k["argv"][0] == "delete"]
    assert deletes == [
        ["delete", "nodepool.karpenter.sh", "inference", "--wait=true", "--timeout=10m"],
        ["delete", "nodeclaim.karpenter.sh", "inference-x1", "--wait=true", "--timeout=10m"],
        ["delete", "ingress", "gateway", "--namespace", "llm-gateway", "--wait=true", "--timeout=10m"],
        ["delete", "service", "gateway", "--namespace", "serving", "--wait=true", "--timeout=10m"],
    ], "Karpenter's nodes first, then the objects that own AWS load balancers, each awaited"
    assert_cleaned_up(rig, stack)
    for check in ("nodes ready", "gpu nodes present", "device plugin ready on gpu nodes (device-plugin)",
                  "allocatable nvidia.com/gpu", "nvidia-smi on pool inference"):
        assert has_row(result.out, "PASS", check), result.out
    # Dev's models sit at zero after the update: one request through the gateway each, then Ready within the
    # cold-start bound (node 600 + image 600 + weights 0, streamed: no copy step + the startup probe's 1800 s).
    for model, bound in (("llama-3-1-8b-instruct", 3000), ("qwen2-5-7b-instruct", 3000)):
        assert has_row(result.out, "PASS", f"model {model} wake",
                       f"woken by one request through the gateway; Ready within its cold-start bound of {bound} s"), result.out
        entries = rig.calls.entries()
        asked = next(i for i, e in enumerate(entries) if e["tool"] == "gateway" and e["body"]["model"] == model)
        polled = next(i for i, e in enumerate(entries) if e["tool"] == "kubectl" and e["argv"][:3] == ["get", "deployment", model])
        assert asked < polled, "the request that wakes the model comes before the wait for it"
        assert entries[asked]["body"]["max_tokens"] == 1 and entries[asked]["authorized"]
    assert has_row(result.out, "PASS", "gateway chat", "llama-3-1-8b-instruct answered 'ready'"), result.out
    assert has_row(result.out, "SKIP", "gateway embedding", "no embedding model"), result.out
    assert "NVIDIA-SMI 570" in result.out
    assert f"test {stack}: PASSED" in result.out


def test_failed_up_still_destroys_and_removes(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_FAIL", "up")
    result = run_test(rig, "--output", "json")

    assert result.code == exit_codes.FAILED
    report = json.loads(result.out)
    assert report["result"] == "failed" and report["up"]["result"] == "failed"
    assert report["checks"] == []
    assert report["cleanup"]["removed"] is True
    assert rig.calls.kubectl() == [], "no kubeconfig output, no cluster to talk to"
    assert_cleaned_up(rig, test_stack(rig))


def test_failed_check_stops_the_checks_and_cleans_up(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_KUBECTL", "no-gpu")
    result = run_test(rig)

    assert result.code == exit_codes.FAILED
    assert has_row(result.out, "PASS", "device plugin ready on gpu nodes (device-plugin)"), result.out
    assert has_row(result.out, "FAIL", "allocatable nvidia.com/gpu",
                   "allocatable nvidia.com/gpu is 0 on: ip-10-40-1-9"), result.out
    assert not any(k["argv"][0] == "apply" for k in rig.calls.kubectl()), "no smoke Job without GPUs"
    assert_cleaned_up(rig, test_stack(rig))
    assert "FAILED" in result.out


def test_failed_smoke_job_fails_the_run(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_KUBECTL", "job-fails")
    result = run_test(rig)
    assert result.code == exit_codes.FAILED
    assert has_row(result.out, "FAIL", "nvidia-smi on pool inference", "failed"), result.out
    assert_cleaned_up(rig, test_stack(rig))


def test_ctrl_c_during_checks_still_cleans_up(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_KUBECTL", "interrupt")
    result = run_test(rig)

    assert result.code == exit_codes.INTERRUPTED
    assert "interrupted" in result.err
    order = timeline(rig)
    assert order.index("kubectl delete") < order.index("destroy"), "load balancers go before the VPC"
    assert_cleaned_up(rig, test_stack(rig))


def test_ctrl_c_during_up_still_destroys_what_was_created(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_INTERRUPT", "up")
    result = run_test(rig)

    assert result.code == exit_codes.INTERRUPTED
    assert "interrupted" in result.err
    stack = test_stack(rig)
    assert "Destroying (" in result.out and "4 delete" in result.out, (
        "the resources created before Ctrl-C, and the step in flight when it came")
    assert f"clean-up: stack {stack} destroyed and removed" in result.err
    assert_cleaned_up(rig, stack)


def test_unreachable_cluster_does_not_stop_the_destroy(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_KUBECTL", "unreachable")
    result = run_test(rig)

    assert result.code == exit_codes.FAILED
    assert has_row(result.out, "FAIL", "nodes ready"), result.out
    assert "could not delete LoadBalancer Services" in result.err
    assert_cleaned_up(rig, test_stack(rig))


def test_failed_destroy_leaves_the_stack_tagged_for_reap(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_FAIL", "destroy")
    result = run_test(rig)

    stack = test_stack(rig)
    assert result.code == exit_codes.FAILED
    assert f"stack {stack}: NOT removed; it expires at" in result.out
    assert rig.stacks() == [stack]
    assert rig.tags(stack)[TAG_KIND] == "test"
    assert not any(a[:2] == ["stack", "rm"] for a in rig.calls.argvs())


def test_zero_gpu_nodes_is_a_usage_error(rig: Rig):
    zero = run_test(rig, "--gpu-nodes", "0")
    assert zero.code == exit_codes.USAGE
    assert "argument --gpu-nodes: '0': must be at least 1" in zero.err
    assert rig.calls.entries() == []


def test_smoke_target_skips_dra_pools():
    def pool(name, purpose):
        return SimpleNamespace(name=name, purpose=purpose)

    settings = SimpleNamespace(gpu_pools=[pool("claims", contract.GPU_DRA_PURPOSE), pool("train", "gpu-training")])
    assert gpu_target(settings, 2) == (GpuTarget(pool="train", purpose="gpu-training", nodes=2), 1)
    with pytest.raises(EnvRequestError, match="no GPU pool outside DRA"):
        gpu_target(SimpleNamespace(gpu_pools=[pool("claims", contract.GPU_DRA_PURPOSE)]), 1)


def run_prod(rig: Rig, *extra: str):
    rig.monkeypatch.setenv("STANDIN_GPU_SOFTWARE", "gpu-operator")
    rig.monkeypatch.setenv("STANDIN_GPU_POOLS", json.dumps(["inference-a10g"]))
    return rig.run("test", "--from", "prod", "--kubectl", rig.kubectl, "--timeout", "0s", "--endpoint-reachable",
                   *extra)


def test_checks_follow_the_gpu_operator_and_call_every_model_through_the_gateway(rig: Rig):
    result = run_prod(rig)

    assert result.code == exit_codes.OK, result.out + result.err
    assert has_row(result.out, "PASS", "device plugin ready on gpu nodes (gpu-operator)",
                   "gpu-operator device plugin Ready on 1 GPU node(s)"), result.out
    kubectl = [k["argv"] for k in rig.calls.kubectl()]
    assert ["get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-device-plugin-daemonset", "-o", "json"] in kubectl
    assert not any("nvidia-device-plugin" in a for a in kubectl if a[:2] == ["get", "daemonsets"]), (
        "the standalone chart's namespace does not exist on a GPU Operator stack")
    for model, namespace in (("llama-3-1-70b-instruct-awq", "serving-interactive"), ("bge-m3", "serving-embedding"),
                             ("qwen2-5-32b-instruct", "serving-batch")):
        assert has_row(result.out, "PASS", f"model {model} health", f"{namespace}/{model} /health answered 200"), (
            result.out)
        assert ["port-forward", "-n", namespace, "--address", "127.0.0.1", f"svc/{model}", ":8000"] in kubectl
    assert not any(a[:2] == ["get", "--raw"] for a in kubectl), (
        "the API server's service proxy is dropped by the serving namespaces' NetworkPolicies")
    health = rig.calls.entries("model")
    assert sorted((c["namespace"], c["service"], c["path"]) for c in health) == [
        ("serving-batch", "qwen2-5-32b-instruct", "/health"), ("serving-embedding", "bge-m3", "/health"),
        ("serving-interactive", "llama-3-1-70b-instruct-awq", "/health")]
    calls = rig.calls.entries("gateway")
    assert [(c["path"], c["body"]["model"], c["authorized"]) for c in calls] == [
        ("/v1/chat/completions", "llama-3-1-70b-instruct-awq", True), ("/v1/embeddings", "bge-m3", True)]
    assert has_row(result.out, "PASS", "gateway embedding", "bge-m3: 1024 dimensions"), result.out
    for pool in ("inference-l40s", "gpu-inference", "gpu-interactive", "gpu-training"):
        assert has_row(result.out, "SKIP", f"gpu pool {pool}", "no Ready node"), result.out
    assert "14 of 14 passed" in result.out


def test_an_unhealthy_model_fails_the_run_clearly(rig: Rig):
    rig.monkeypatch.setenv("STANDIN_UNHEALTHY", "bge-m3")
    result = run_prod(rig, "--output", "json")

    assert result.code == exit_codes.FAILED
    report = json.loads(result.out)
    failed = {c["name"]: c["detail"] for c in report["checks"] if c["status"] == "FAIL"}
    assert set(failed) == {"model bge-m3 health", "gateway embedding"}
    assert "serving-embedding/bge-m3 /health: HTTP 503" in failed["model bge-m3 health"]
    assert "HTTP 503" in failed["gateway embedding"]
    assert report["cleanup"]["removed"] is True


def test_preflight_stops_before_anything_is_created(rig: Rig):
    """Missing kubectl, bad credentials, an unusable KMS key, or a private endpoint out of reach: exit 5,
    one line per problem, and not a single Pulumi call that changes anything."""
    cases = [
        ({"--kubectl": "/nonexistent/kubectl"}, {}, "kubectl: /nonexistent/kubectl not found"),
        ({}, {"STANDIN_AWS": "no-credentials"}, "aws credentials: Unable to locate credentials"),
        ({"--secrets-provider": "awskms://alias/llm-platform?region=us-east-1"}, {"STANDIN_AWS": "no-key"},
         "secrets provider: KMS key alias/llm-platform not usable"),
    ]
    for flags, env, message in cases:
        for key, value in env.items():
            rig.monkeypatch.setenv(key, value)
        argv = ["test", "--from", "dev", "--kubectl", flags.get("--kubectl", rig.kubectl), "--timeout", "0s"]
        if "--secrets-provider" in flags:
            argv += ["--secrets-provider", flags["--secrets-provider"]]
        result = rig.run(*argv)
        assert result.code == exit_codes.PREFLIGHT, result.err
        assert "preflight failed, nothing was changed" in result.err and message in result.err, result.err
        for key in env:
            rig.monkeypatch.delenv(key)
    assert [a for a in rig.calls.argvs()] == [], "no stack was created"

    private = rig.run("test", "--from", "prod", "--kubectl", rig.kubectl)
    assert private.code == exit_codes.PREFLIGHT
    assert "API endpoint is private and its cluster does not exist yet" in private.err
    assert "--endpoint-reachable" in private.err
    assert rig.calls.argvs() == []


def test_verify_checks_a_deployed_environment_from_its_stored_request(rig: Rig):
    assert rig.run("env", "create", "alice-exp", "--from", "dev",
                   "--set", "gpuPools[0].scaling.desiredSize=1", "--set", "gpuPools[0].scaling.maxSize=1",
                  "--set", "serving.tiers[0].models[0].replicas.max=1",
                  "--set", "serving.tiers[0].models[0].rollout=noSurge").code == 0
    result = rig.run("verify", "--stack", "env-alice-exp", "--kubectl", rig.kubectl, "--timeout", "0s")

    assert result.code == exit_codes.OK, result.out + result.err
    assert has_row(result.out, "PASS", "nvidia-smi on pool inference"), (
        "the stored desiredSize=1 says the pool has nodes")
    assert has_row(result.out, "PASS", "gateway chat"), result.out
    ups = [a for a in rig.calls.argvs() if a[0] in ("up", "destroy", "refresh")]
    assert len(ups) == 1, "verify changes nothing: only env create ran up"

    rig.monkeypatch.setenv("STANDIN_KUBECTL", "job-fails")
    failed = rig.run("verify", "--stack", "env-alice-exp", "--kubectl", rig.kubectl, "--timeout", "0s", "--json")
    assert failed.code == exit_codes.FAILED
    assert json.loads(failed.out)["result"] == "failed"
    assert rig.run("verify", "--stack", "ghost", "--kubectl", rig.kubectl).code == exit_codes.NOT_FOUND


def test_verify_prod_checks_the_gpu_pools_that_have_ready_nodes(rig: Rig):
    """prod keeps every managed group at desiredSize 0 and runs its GPUs through Karpenter: the pools
    checked are those with a Ready node now, by the pool label, managed and Karpenter alike."""
    assert rig.run("up", "--stack", "prod", "--endpoint-reachable").code == exit_codes.OK
    rig.monkeypatch.setenv("STANDIN_GPU_SOFTWARE", "gpu-operator")
    rig.monkeypatch.setenv("STANDIN_GPU_POOLS", json.dumps(["gpu-interactive", "inference-a10g", "gpu-interactive"]))
    result = rig.run("verify", "--stack", "prod", "--kubectl", rig.kubectl, "--timeout", "0s",
                     "--endpoint-reachable", "--json")

    assert result.code == exit_codes.OK, result.out + result.err
    checks = {c["name"]: c for c in json.loads(result.out)["checks"]}
    for pool in ("gpu-interactive", "inference-a10g"):
        assert checks[f"nvidia-smi on pool {pool}"]["status"] == "PASS"
    for pool in ("inference-l40s", "gpu-inference", "gpu-training"):
        assert checks[f"gpu pool {pool}"]["status"] == "SKIP", checks
        assert f"nvidia-smi on pool {pool}" not in checks
    assert "3 GPU node(s)" in checks["device plugin ready on gpu nodes (gpu-operator)"]["detail"]
    assert checks["allocatable nvidia.com/gpu"]["detail"] == "3 allocatable nvidia.com/gpu on 3 node(s)"
    applied = [yaml.safe_load_all(k["stdin"]) for k in rig.calls.kubectl() if k["argv"][0] == "apply"]
    selectors = sorted(list(docs)[1]["spec"]["template"]["spec"]["nodeSelector"][contract.POOL_LABEL]
                       for docs in applied)
    assert selectors == ["gpu-interactive", "inference-a10g"]

    rig.monkeypatch.setenv("STANDIN_GPU_POOLS", "[]")
    idle = rig.run("verify", "--stack", "prod", "--kubectl", rig.kubectl, "--timeout", "0s", "--endpoint-reachable")
    assert idle.code == exit_codes.OK, idle.out + idle.err
    assert has_row(idle.out, "SKIP", "gpu nodes present", "no GPU pool has a Ready node"), idle.out
    assert has_row(idle.out, "SKIP", "gpu pool gpu-interactive", "no Ready node"), idle.out


@pytest.mark.parametrize("state, detail", [
    ("asleep", "stuck at step wake: KEDA has not scaled it from zero (replicas 0)"),
    ("node", "stuck at step node: pod llama-3-1-8b-instruct-7d9c-x1 Pending: 0/3 nodes are available: 3 node(s) "
             "didn't match Pod's node affinity/selector."),
    ("image", "stuck at step image: container vllm: ImagePullBackOff"),
    ("weights", "stuck at step weights: init container fetch-weights: running (restarts 0)"),
    ("load", "stuck at step load: container vllm running, startup probe not passed yet (load, compile, readiness)"),
])
def test_a_model_that_does_not_wake_names_the_cold_start_step(rig: Rig, tmp_path, state, detail):
    """Against the kubectl stand-in: one gateway request, then polls on a clock that runs out at the bound."""
    from automation.driver.postdeploy import KubectlCli, ModelTarget, Poller, wake_model

    rig.monkeypatch.setenv("STANDIN_COLD", json.dumps({"llama-3-1-8b-instruct": state}))
    clock = SimpleNamespace(now=0.0)

    def sleep(seconds: float) -> None:
        clock.now += seconds

    kubectl = KubectlCli(tmp_path / "kubeconfig.json", binary=rig.kubectl)
    model = ModelTarget("llama-3-1-8b-instruct", "serving-interactive", "chat", False, wake_bound_seconds=30)
    result = wake_model(kubectl, model, Poller(timeout=600, interval=10, clock=lambda: clock.now, sleep=sleep))
    assert not result.ok
    assert result.detail == f"not Ready within its cold-start bound of 30 s; {detail}"
    assert clock.now == 30, "waited the model's bound, not the run's timeout"
    polls = [e for e in rig.calls.kubectl() if e["argv"][:2] == ["get", "deployment"]]
    assert len(polls) == 4, "at 0, 10, 20 and 30 s"
