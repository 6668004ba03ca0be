"""A recording stand-in for ``kubectl`` against a small EKS cluster with one GPU node.

Appends each call (argv, the kubeconfig's server, stdin of ``apply``) to ``STANDIN_LOG`` with
``"tool": "kubectl"``, so tests can order kubectl calls against Pulumi CLI calls in one log.

``STANDIN_KUBECTL`` picks the cluster's condition:
  healthy (default)  nodes Ready, device plugin Ready, 1 allocatable GPU, nvidia-smi Job succeeds
  no-gpu             the GPU node advertises 0 nvidia.com/gpu (device plugin not registered)
  job-fails          the smoke Job fails
  unreachable        every call fails as if the API server were gone
  interrupt          Ctrl-C (SIGINT to the parent) on the first ``get nodes``
``STANDIN_SERVICES`` is a JSON list of ``[namespace, name, type]`` (default: one LoadBalancer, one ClusterIP).
``STANDIN_INGRESSES`` is a JSON list of ``[namespace, name]`` (default: one).
``STANDIN_NODEPOOLS`` is a JSON list of Karpenter NodePool names (default ``["inference"]``, each with one
NodeClaim); ``none`` makes the cluster have no Karpenter CRDs.
``STANDIN_GPU_SOFTWARE`` is what runs the device plugin: ``device-plugin`` (default; the chart's namespace
and labels) or ``gpu-operator`` (the operator's operand); asked in the wrong place, it has no DaemonSet.
``STANDIN_GPU_POOLS`` is a JSON list of GPU pools, one Ready GPU node each (default ``["inference"]``).
``STANDIN_UNHEALTHY`` names models whose ``/health`` answers 503 and which the gateway cannot serve.
``port-forward`` to ``svc/llm-gateway`` serves the gateway's OpenAI API on 127.0.0.1 (the master key is the
Secret's) and logs each request with ``"tool": "gateway"``; to any other Service it serves that model's
vLLM ``/health`` and logs each request with ``"tool": "model"``. Both stop by themselves after a minute.
``get --raw .../services/.../proxy/...`` fails as on EKS: the serving namespaces' NetworkPolicies drop
traffic from the control plane, so the API server's service proxy times out.
``STANDIN_STUCK`` names objects whose deletion times out (a load balancer that will not go).
``get deployment <model>`` and ``get pods -l app.kubernetes.io/instance=<model>`` answer as KEDA and the
kubelet would for a model at zero: no replica until the log holds a gateway request for the model, then
one replica whose state ``STANDIN_COLD`` (a JSON object, model -> state) picks: ``ready`` (default),
``asleep`` (KEDA never scales it up), ``node`` (Pending, unschedulable), ``image`` (ImagePullBackOff),
``weights`` (the fetch-weights init container running), ``load`` (the server running, not Ready).
Deletions persist in ``<STANDIN_LOG>.kube.json``, so later listings no longer show what was deleted.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import signal
import sys
import time

NVIDIA_SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.9     |
|-----------------------------------------+------------------------+----------------------+
|   0  NVIDIA A10G                    On  |   00000000:00:1E.0 Off |                    0 |
+-----------------------------------------+------------------------+----------------------+"""


def record(argv: list[str], kubeconfig: str, stdin: str | None) -> None:
    server = ""
    try:
        with open(kubeconfig) as handle:
            server = json.load(handle)["clusters"][0]["cluster"]["server"]
    except (OSError, ValueError, KeyError, IndexError):
        server = "<unreadable kubeconfig>"
    entry = {"tool": "kubectl", "argv": argv, "server": server, "stdin": stdin, "time": time.time()}
    with open(os.environ["STANDIN_LOG"], "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps(entry) + "\n")


def node(name: str, *, gpu: bool, allocatable: int = 1, pool: str = "inference") -> dict:
    labels = {"kubernetes.io/hostname": name}
    status = {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4"}}
    if gpu:
        labels.update({"nvidia.com/gpu.present": "true", "llm-platform.io/pool": pool})
        status["allocatable"]["nvidia.com/gpu"] = str(allocatable)
    return {"metadata": {"name": name, "labels": labels}, "status": status}


def _deleted_path() -> str:
    return os.environ["STANDIN_LOG"] + ".kube.json"


def deleted() -> set[str]:
    try:
        with open(_deleted_path()) as handle:
            return set(json.load(handle))
    except OSError:
        return set()


def mark_deleted(key: str) -> None:
    gone = deleted() | {key}
    with open(_deleted_path(), "w") as handle:
        json.dump(sorted(gone), handle)


def listing(kind: str) -> list[dict]:
    """The cluster's objects of ``kind`` that were not deleted."""
    if kind == "services":
        rows = json.loads(os.environ.get("STANDIN_SERVICES", '[["serving", "gateway", "LoadBalancer"], '
                                         '["default", "kubernetes", "ClusterIP"]]'))
        objects = [("service", ns, name, {"spec": {"type": t}}) for ns, name, t in rows]
    elif kind == "ingresses":
        rows = json.loads(os.environ.get("STANDIN_INGRESSES", '[["llm-gateway", "gateway"]]'))
        objects = [("ingress", ns, name, {}) for ns, name in rows]
    elif kind in ("nodepools.karpenter.sh", "nodeclaims.karpenter.sh"):
        pools = json.loads(os.environ.get("STANDIN_NODEPOOLS", '["inference"]'))
        if kind.startswith("nodepools"):
            objects = [("nodepool.karpenter.sh", "", p, {}) for p in pools]
        else:
            objects = [("nodeclaim.karpenter.sh", "", f"{p}-x1", {}) for p in pools]
    else:
        return []
    gone = deleted()
    items = []
    for kind_, ns, name, extra in objects:
        if f"{kind_}/{ns}/{name}" in gone:
            continue
        meta = {"name": name, **({"namespace": ns} if ns else {})}
        items.append({"metadata": meta, **extra})
    return items


MASTER_KEY = "sk-standin-master-key"
SOFTWARE = {
    "device-plugin": ("nvidia-device-plugin", "app.kubernetes.io/name=nvidia-device-plugin"),
    "gpu-operator": ("gpu-operator", "app=nvidia-device-plugin-daemonset"),
}


def gpu_node_names() -> list[tuple[str, str]]:
    pools = json.loads(os.environ.get("STANDIN_GPU_POOLS", '["inference"]'))
    return [(f"ip-10-40-1-{9 + i}.ec2.internal", pool) for i, pool in enumerate(pools)]


def plugin_where_asked(args: list[str]) -> bool:
    namespace = args[args.index("-n") + 1] if "-n" in args else ""
    selector = args[args.index("-l") + 1] if "-l" in args else ""
    return (namespace, selector) == SOFTWARE[os.environ.get("STANDIN_GPU_SOFTWARE", "device-plugin")]


def log_entry(entry: dict) -> None:
    with open(os.environ["STANDIN_LOG"], "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps({**entry, "time": time.time()}) + "\n")


def serve_model_health(namespace: str, service: str, target_port: str) -> None:
    """What ``kubectl port-forward svc/<model>`` reaches: vLLM's ``/health`` (200, or 503 when unhealthy)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    unhealthy = service in os.environ.get("STANDIN_UNHEALTHY", "").split(",")

    class Model(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            log_entry({"tool": "model", "namespace": namespace, "service": service, "path": self.path})
            code = 404 if self.path != "/health" else 503 if unhealthy else 200
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = HTTPServer(("127.0.0.1", 0), Model)
    threading.Timer(60, server.shutdown).start()  # stops by itself
    print(f"Forwarding from 127.0.0.1:{server.server_address[1]} -> {target_port}", flush=True)
    server.serve_forever()


def serve_gateway(target_port: str) -> None:
    """What ``kubectl port-forward svc/llm-gateway`` reaches: the gateway's OpenAI API."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    unhealthy = os.environ.get("STANDIN_UNHEALTHY", "").split(",")

    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            log_entry({"tool": "gateway", "path": self.path, "body": body,
                       "authorized": self.headers.get("Authorization") == f"Bearer {MASTER_KEY}"})
            if self.headers.get("Authorization") != f"Bearer {MASTER_KEY}":
                return self.answer(401, {"error": {"message": "Authentication Error, invalid proxy key"}})
            if body.get("model") in unhealthy:
                return self.answer(503, {"error": {"message": f"{body.get('model')}: no healthy deployment"}})
            if self.path == "/v1/chat/completions":
                return self.answer(200, {"choices": [{"message": {"role": "assistant", "content": "ready"}}]})
            if self.path == "/v1/embeddings":
                return self.answer(200, {"data": [{"embedding": [0.01] * 1024, "index": 0}]})
            return self.answer(404, {"error": {"message": "not found"}})

        def answer(self, code: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Timer(60, server.shutdown).start()  # stops by itself
    print(f"Forwarding from 127.0.0.1:{server.server_address[1]} -> {target_port}", flush=True)
    server.serve_forever()


def requested(model: str) -> bool:
    """Whether the gateway has served a request for ``model`` (a gateway entry in the log)."""
    with open(os.environ["STANDIN_LOG"]) as log:
        entries = [json.loads(line) for line in log if line.strip()]
    return any(e.get("tool") == "gateway" and (e.get("body") or {}).get("model") == model for e in entries)


def cold_state(model: str) -> str:
    return json.loads(os.environ.get("STANDIN_COLD", "{}")).get(model, "ready")


def model_deployment(model: str) -> dict:
    state = cold_state(model)
    replicas = 1 if requested(model) and state != "asleep" else 0
    ready = 1 if replicas and state == "ready" else 0
    return {"metadata": {"name": model}, "spec": {"replicas": replicas},
            "status": {"replicas": replicas, **({"readyReplicas": ready} if ready else {})}}


def model_pods(model: str) -> list[dict]:
    if not model_deployment(model)["spec"]["replicas"]:
        return []
    state = cold_state(model)
    scheduled = {"type": "PodScheduled", "status": "True"}
    init = {"name": "fetch-weights", "ready": True, "state": {"terminated": {"exitCode": 0}}}
    server = {"name": "vllm", "ready": state == "ready", "restartCount": 0, "state": {"running": {}}}
    if state == "node":
        scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}
    elif state == "image":
        server = {"name": "vllm", "ready": False, "restartCount": 0,
                  "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    elif state == "weights":
        init = {"name": "fetch-weights", "ready": False, "restartCount": 0, "state": {"running": {}}}
        server = {"name": "vllm", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
    status = {"phase": "Running" if state in ("ready", "load") else "Pending", "conditions": [scheduled]}
    if state != "node":
        status.update(initContainerStatuses=[init], containerStatuses=[server])
    return [{"metadata": {"name": f"{model}-7d9c-x1"}, "status": status}]


def respond(args: list[str], mode: str) -> str:
    if mode == "unreachable" and args[:1] != ["version"]:
        raise SystemExit("The connection to the server llm-platform.eks.example was refused")
    verb = args[0]
    if verb == "version":
        return "Client Version: v1.34.2\nKustomize Version: v5.7.1\n"
    if verb == "get" and args[1] == "nodes":
        if mode == "interrupt":
            os.kill(os.getppid(), signal.SIGINT)
            time.sleep(0.5)
        gpus = [node(name, gpu=True, pool=pool, allocatable=0 if mode == "no-gpu" else 1)
                for name, pool in gpu_node_names()]
        return json.dumps({"items": [node("ip-10-40-0-4.ec2.internal", gpu=False),
                                     node("ip-10-40-0-5.ec2.internal", gpu=False), *gpus]})
    if verb == "get" and args[1] == "daemonsets":
        count = len(gpu_node_names())
        items = [{"metadata": {"name": "nvidia-device-plugin"},
                  "status": {"desiredNumberScheduled": count, "numberReady": count}}]
        return json.dumps({"items": items if plugin_where_asked(args) else []})
    if verb == "get" and args[1] == "deployment":
        return json.dumps(model_deployment(args[2]))
    if verb == "get" and args[1] == "pods" and "-l" in args and args[args.index("-l") + 1].startswith(
            "app.kubernetes.io/instance="):
        return json.dumps({"items": model_pods(args[args.index("-l") + 1].split("=", 1)[1])})
    if verb == "get" and args[1] == "pods":
        pods = [{"metadata": {"name": f"nvidia-device-plugin-{i}"}, "spec": {"nodeName": name},
                 "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
                for i, (name, _) in enumerate(gpu_node_names())]
        return json.dumps({"items": pods if plugin_where_asked(args) else []})
    if verb == "get" and args[1] == "--raw" and "/proxy/" in args[2]:
        raise SystemExit("Error from server (ServiceUnavailable): error trying to reach service: dial tcp "
                         "10.40.1.23:8000: i/o timeout")
    if verb == "get" and args[1] == "secret":
        key = base64.b64encode(MASTER_KEY.encode()).decode()
        return json.dumps({"metadata": {"name": args[2]}, "data": {"LITELLM_MASTER_KEY": key}})
    if verb == "port-forward":
        namespace, target = args[args.index("-n") + 1], args[-2]
        if target == "svc/llm-gateway":
            serve_gateway(args[-1].lstrip(":"))
        else:
            serve_model_health(namespace, target.split("/", 1)[-1], args[-1].lstrip(":"))
        return ""
    if verb == "get" and args[1] == "job":
        done = {"failed": 1} if mode == "job-fails" else {"succeeded": 1}
        return json.dumps({"metadata": {"name": args[2]}, "status": done})
    if verb == "get" and args[1] in ("services", "ingresses", "nodepools.karpenter.sh", "nodeclaims.karpenter.sh"):
        if args[1].endswith("karpenter.sh") and os.environ.get("STANDIN_NODEPOOLS") == "none":
            raise SystemExit(f"error: the server doesn't have a resource type {args[1]!r}")
        return json.dumps({"items": listing(args[1])})
    if verb == "apply":
        return "namespace/llm-platform-smoke created\njob.batch/gpu-smoke created\n"
    if verb == "logs":
        return "nvidia-smi: no devices found\n" if mode == "job-fails" else NVIDIA_SMI + "\n"
    if verb == "delete":
        kind, name = args[1], args[2]
        namespace = args[args.index("--namespace") + 1] if "--namespace" in args else ""
        if name in os.environ.get("STANDIN_STUCK", "").split(","):
            raise SystemExit(f"error: timed out waiting for the condition on {kind}s/{name}")
        mark_deleted(f"{kind}/{namespace}/{name}")
        return f'{kind} "{name}" deleted\n'
    raise SystemExit(f"error: the kubectl stand-in does not answer {' '.join(args)}")


def main(argv: list[str]) -> int:
    kubeconfig = ""
    if argv[:1] == ["--kubeconfig"]:
        kubeconfig, argv = argv[1], argv[2:]
    stdin = sys.stdin.read() if argv[:1] == ["apply"] else None
    record(argv, kubeconfig, stdin)
    sys.stdout.write(respond(argv, os.environ.get("STANDIN_KUBECTL", "healthy")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
