"""Preflight: what a run needs from this machine, checked before anything is created or changed.

An ``up`` that creates an EKS cluster and then fails on a missing ``kubectl``, expired credentials
or an unreachable private API endpoint leaves a half-built, billed stack behind. These checks cost
seconds: the tools on PATH, the AWS identity in the stack's region, the state backend, the secrets
provider's key, and, for a stack whose API endpoint is private, whether this machine can reach it
(every Helm release and Kubernetes object of the program goes through that endpoint).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from automation.driver.postdeploy import CheckResult

TIMEOUT = 30.0


@dataclass(frozen=True)
class PreflightNeeds:
    """What the verb about to run will use."""

    aws: bool = True
    kubectl: str | None = None
    region: str | None = None


def _run(command: Sequence[str], timeout: float = TIMEOUT) -> tuple[bool, str]:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return False, f"{command[0]} not found"
    except OSError as exc:
        return False, f"{command[0]}: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return False, f"{' '.join(command[:3])} timed out after {timeout:.0f}s"
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        return False, message[-1] if message else f"exit {done.returncode}"
    return True, done.stdout


def tool(name: str, binary: str, version_args: Sequence[str], install: str) -> CheckResult:
    path = binary if os.sep in binary else shutil.which(binary)
    if not path or not os.access(path, os.X_OK):
        return CheckResult(name, False, f"{binary} not found on PATH; {install}")
    ok, out = _run([path, *version_args])
    first = out.strip().splitlines()[0] if ok and out.strip() else out
    return CheckResult(name, ok, f"{path}: {first}"[:160])


def aws_identity(region: str | None) -> CheckResult:
    command = ["aws", "sts", "get-caller-identity", "--output", "json"] + (["--region", region] if region else [])
    ok, out = _run(command)
    if not ok:
        return CheckResult("aws credentials", False, f"{out} (set AWS_PROFILE or credentials for the stack's account)")
    try:
        arn = json.loads(out).get("Arn", "?")
    except ValueError:
        arn = "?"
    return CheckResult("aws credentials", True, f"{arn} in {region or 'the default region'}")


def backend_reachable(url: str) -> CheckResult:
    name = "state backend"
    if url.startswith("file://"):
        path = urlparse(url).path
        ok = os.path.isdir(path) and os.access(path, os.W_OK)
        return CheckResult(name, ok, f"{url} {'is writable' if ok else 'is not a writable directory'}")
    if url.startswith("s3://"):
        parsed = urlparse(url)
        region = parse_qs(parsed.query).get("region", [None])[0]
        command = ["aws", "s3api", "head-bucket", "--bucket", parsed.netloc] + (["--region", region] if region else [])
        ok, out = _run(command)
        return CheckResult(name, ok, f"s3://{parsed.netloc} " + ("reachable" if ok else f"not reachable: {out}"))
    return CheckResult(name, True, f"{url}: checked by the Pulumi CLI on first use", skipped=True)


def secrets_usable(provider: str, environ: Mapping[str, str] = os.environ) -> CheckResult:
    name = "secrets provider"
    if provider == "passphrase":
        source = "PULUMI_CONFIG_PASSPHRASE"
        if "PULUMI_CONFIG_PASSPHRASE_FILE" in environ:
            source = "PULUMI_CONFIG_PASSPHRASE_FILE"
        if source == "PULUMI_CONFIG_PASSPHRASE_FILE" and not os.path.isfile(environ[source]):
            return CheckResult(name, False, f"{source} names {environ[source]!r}, which is not a file")
        return CheckResult(name, source in environ, f"passphrase from {source}")
    if provider.startswith("awskms://"):
        parsed = urlparse(provider)
        key = (parsed.netloc + parsed.path).lstrip("/") if parsed.netloc != "" else parsed.path.lstrip("/")
        region = parse_qs(parsed.query).get("region", [None])[0]
        command = ["aws", "kms", "describe-key", "--key-id", key, "--output", "json"]
        ok, out = _run(command + (["--region", region] if region else []))
        return CheckResult(name, ok, f"KMS key {key} " + ("usable" if ok else f"not usable: {out}"))
    return CheckResult(name, True, f"{provider.split('://')[0]}: checked by the Pulumi CLI", skipped=True)


def _server(kubeconfig: Any) -> str:
    config = json.loads(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
    return config["clusters"][0]["cluster"]["server"]


def endpoint_check(settings: Any, kubeconfig: Any, asserted: bool, stack: str) -> CheckResult | None:
    """For a stack whose API endpoint is private only: can this machine reach it?"""
    endpoint = getattr(settings, "endpoint", None)
    if endpoint is None or endpoint.public_access:
        return None
    name = "private API endpoint"
    if asserted:
        return CheckResult(name, True, "--endpoint-reachable: this machine is routed to the cluster's VPC")
    if not kubeconfig:
        return CheckResult(name, False, (
            f"{stack}'s API endpoint is private and its cluster does not exist yet: every Helm release and Kubernetes "
            "object goes through that endpoint, so run this from inside the VPC (or a network routed to it; see the "
            "README, 'Running prod') and pass --endpoint-reachable"))
    try:
        server = urlparse(_server(kubeconfig))
        with socket.create_connection((server.hostname, server.port or 443), timeout=5):
            pass
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return CheckResult(name, False, f"cannot reach {stack}'s private API endpoint from here ({exc}); run from "
                                        "inside the VPC (README, 'Running prod')")
    return CheckResult(name, True, f"{server.hostname} reachable")


def run_preflight(
    needs: PreflightNeeds, backend_url: str, secrets_provider: str, cli_version: str, extra: Sequence[CheckResult] = ()
) -> list[CheckResult]:
    results = [CheckResult("pulumi cli", True, f"v{cli_version}")]
    if needs.kubectl:
        results.append(tool("kubectl", needs.kubectl, ["version", "--client"],
                            "install kubectl or pass --kubectl PATH"))
    if needs.aws:
        results.append(tool("aws cli", "aws", ["--version"],
                            "install AWS CLI v2 (the kubeconfig authenticates with aws eks get-token)"))
        if results[-1].ok:
            results.append(aws_identity(needs.region))
    results.append(backend_reachable(backend_url))
    results.append(secrets_usable(secrets_provider))
    results.extend(extra)
    return results
