"""The pinned LiteLLM proxy, run for real on 127.0.0.1 with the config the program emits.

The proxy comes from ``.venv-gateway`` (``make gateway-venv``, pinned in requirements-gateway.txt to
the release of ``versions.LITELLM_IMAGE``). The only changes made to the emitted config are the
addresses a laptop cannot reach: each self-hosted route's ``api_base`` (an in-cluster Service name)
becomes a local stand-in, and each Bedrock route gets ``aws_bedrock_runtime_endpoint`` pointing at a
local Bedrock stand-in (a documented LiteLLM parameter), so fallbacks really leave the proxy.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from automation.offline.plan import ROOT
from automation.offline.wire import SECRET_SIG, SIG_KEY
from tests.support.needs import missing
from tests.support.prometheus_tools import free_port, stop_process, wait_until_ready

GATEWAY_VENV = ROOT / ".venv-gateway"
LITELLM = GATEWAY_VENV / "bin" / "litellm"


def require_litellm() -> Path:
    if not LITELLM.exists():
        missing(f"{LITELLM} missing: run `make gateway-venv` (make test does it)")
    return LITELLM


def unwrap(value: Any) -> Any:
    """A secret's plain value from the plan (in memory only; plan files keep it redacted)."""
    if isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG:
        return value["value"]
    return value


def emitted(plan) -> dict[str, Any]:
    """What the program gives the gateway: config, master key, the ServiceMonitor's endpoint and the
    token it references."""
    def named(type_: str, name: str) -> dict[str, Any]:
        (found,) = [r.inputs for r in plan.of_type(type_) if r.inputs["metadata"]["name"] == name]
        return found

    config = yaml.safe_load(named("kubernetes:core/v1:ConfigMap", "llm-gateway")["data"]["config.yaml"])
    secret = named("kubernetes:core/v1:Secret", "llm-gateway")
    master_key = unwrap(secret["stringData"])["LITELLM_MASTER_KEY"] if SIG_KEY in secret["stringData"] else unwrap(secret["stringData"]["LITELLM_MASTER_KEY"])
    (endpoint,) = named("kubernetes:monitoring.coreos.com/v1:ServiceMonitor", "llm-gateway")["spec"]["endpoints"]
    credentials = endpoint["authorization"]["credentials"]
    token_secret = named("kubernetes:core/v1:Secret", credentials["name"])["stringData"]
    token = unwrap(token_secret)[credentials["key"]] if SIG_KEY in token_secret else unwrap(token_secret[credentials["key"]])
    data = unwrap(secret["stringData"]) if SIG_KEY in secret["stringData"] else secret["stringData"]
    env = {key: unwrap(value) for key, value in data.items() if key != "LITELLM_MASTER_KEY"}
    return {"config": config, "master_key": master_key, "endpoint": endpoint, "scrape_token": token, "env": env}


def model_api_keys(plan) -> dict[str, str]:
    """Each self-hosted model's API key as its server receives it: the ``api-key`` of the Secret that
    the model's Deployment reads ``VLLM_API_KEY`` from, in the model's namespace."""
    secrets = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["stringData"]
        for r in plan.of_type("kubernetes:core/v1:Secret")
    }
    keys = {}
    for deployment in plan.of_type("kubernetes:apps/v1:Deployment"):
        meta = deployment.inputs["metadata"]
        if meta["labels"].get("app.kubernetes.io/name") != "vllm":
            continue
        (vllm,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
        (ref,) = [e["valueFrom"]["secretKeyRef"] for e in vllm["env"] if e["name"] == "VLLM_API_KEY"]
        data = secrets[(meta["namespace"], ref["name"])]
        data = unwrap(data) if SIG_KEY in data else data
        keys[meta["name"]] = unwrap(data[ref["key"]])
    return keys


def localized(config: dict[str, Any], api_bases: dict[str, str], bedrock_url: str) -> dict[str, Any]:
    """The emitted config with only unreachable addresses replaced (see module docstring)."""
    local = copy.deepcopy(config)
    for route in local["model_list"]:
        params = route["litellm_params"]
        if params["model"].startswith("hosted_vllm/"):
            params["api_base"] = api_bases[route["model_name"]]
        elif params["model"].startswith("bedrock/"):
            params["aws_bedrock_runtime_endpoint"] = bedrock_url
    return local


class Proxy:
    def __init__(self, workdir: Path, config: dict[str, Any], master_key: str, env: dict[str, str] | None = None):
        self.binary = require_litellm()
        self.workdir = workdir
        self.port = free_port()
        self.master_key = master_key
        self.extra_env = dict(env or {})
        self.config_path = workdir / "litellm.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Proxy:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.workdir),
            "LITELLM_MASTER_KEY": self.master_key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "AWS_ACCESS_KEY_ID": "AKIASTANDIN000000000",
            "AWS_SECRET_ACCESS_KEY": "stand-in",
            "AWS_REGION": "us-east-1",
            **self.extra_env,
        }
        log = open(self.workdir / "litellm.log", "wb")
        self.process = subprocess.Popen(
            [str(self.binary), "--config", str(self.config_path), "--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until_ready(self.process, f"{self.url}/health/liveliness", name="litellm", log=self.workdir / "litellm.log",
                         seconds=180, pause=0.3)
        return self

    def stop(self) -> None:
        stop_process(self.process)

    def call(self, path: str, body: dict[str, Any] | None = None, token: str | None = None) -> tuple[int, str]:
        headers = {"content-type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=90) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
