"""Preflight: what a run needs from this machine, checked before anything is created or changed.

An ``up`` that creates an EKS cluster and then fails on a missing ``kubectl``, expired credentials
or an unreachable private API endpoint leaves a half-built, billed stack behind. These checks cost
seconds: the tools on PATH, the AWS identity in the stack's region, the state backend, the secrets
provider's key, and, for a stack whose API endpoint is private, whether this machine can reach it
(every Helm release and Kubernetes object of the program goes through that endpoint).

The gateway's Bedrock fallbacks are checked by invoking each once (one token; one vector): the first
invocation of a third-party model in an account starts its AWS Marketplace subscription, and
Anthropic's models also need a one-time use-case form; until then every call is AccessDeniedException
and the safety net fails exactly when a self-hosted model does. An operator's invocation that may
subscribe does the subscription for the whole account; a failure names the model and the step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from automation.driver.results import CheckResult

TIMEOUT = 30.0


@dataclass(frozen=True)
class PreflightNeeds:
    """What the verb about to run will use. ``bedrock`` is the gateway's fallbacks as (kind, model id)
    pairs, invoked in ``bedrock_region`` (see :func:`bedrock_targets`)."""

    aws: bool = True
    kubectl: str | None = None
    region: str | None = None
    bedrock: tuple[tuple[str, str], ...] = ()
    bedrock_region: str | None = None


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
            "object goes through that endpoint, so run this from inside the VPC (or a network routed to it; see "
            "docs/deploy.md, 'Running prod') and pass --endpoint-reachable"))
    try:
        server = urlparse(_server(kubeconfig))
        with socket.create_connection((server.hostname, server.port or 443), timeout=5):
            pass
    except (OSError, ValueError, KeyError, IndexError) as exc:
        return CheckResult(name, False, f"cannot reach {stack}'s private API endpoint from here ({exc}); run from "
                                        "inside the VPC (docs/deploy.md, 'Running prod')")
    return CheckResult(name, True, f"{server.hostname} reachable")


#: A managed group's capacity type for a Capacity Block (EKS API ``capacityType``).
CAPACITY_BLOCK = "CAPACITY_BLOCK"


def _eks_json(command: Sequence[str]) -> tuple[dict[str, Any] | None, str]:
    ok, out = _run(command)
    if not ok:
        return None, out
    try:
        answer = json.loads(out)
    except ValueError:
        return None, f"{' '.join(command[:3])} answered something that is not JSON"
    return (answer, "") if isinstance(answer, dict) else (None, f"{' '.join(command[:3])} answered no object")


def capacity_block_upgrades(cluster: str, region: str | None, version: str) -> CheckResult:
    """Before ``up``: no Capacity Block managed group would get a Kubernetes version change while its desired
    size is above 0.

    EKS user guide, "Create a managed node group with Capacity Blocks for ML": "When upgrading managed node
    groups with Capacity Blocks, make sure that the desired size of the node group is set to 0." The program
    sets every group's ``version`` to the cluster's, so an ``up`` that moves ``kubernetesVersion`` updates
    each group. EKS's condition is the group's desired size, not its running nodes: a group whose block has
    not started yet has launch errors and no node, yet a desired size of 1 (its create request "will honor
    that" and launch when the block starts), and it is refused all the same. Read from EKS
    (``list-nodegroups``, ``describe-nodegroup``), which reports the desired size Cluster Autoscaler set."""
    name = "capacity block upgrades"
    where = ["--region", region] if region else []
    listed, error = _eks_json(["aws", "eks", "list-nodegroups", "--cluster-name", cluster, "--output", "json", *where])
    if listed is None:
        return CheckResult(name, False, f"cannot list {cluster}'s node groups: {error}"[:300])
    refused, blocks = [], 0
    for group in [g for g in listed.get("nodegroups") or [] if isinstance(g, str)]:
        described, error = _eks_json(["aws", "eks", "describe-nodegroup", "--cluster-name", cluster,
                                      "--nodegroup-name", group, "--output", "json", *where])
        if described is None:
            return CheckResult(name, False, f"cannot describe node group {group[:80]}: {error}"[:300])
        found = described.get("nodegroup")
        nodegroup: dict[str, Any] = found if isinstance(found, dict) else {}
        if nodegroup.get("capacityType") != CAPACITY_BLOCK:
            continue
        blocks += 1
        scaling = nodegroup.get("scalingConfig")
        current, desired = nodegroup.get("version"), scaling.get("desiredSize") if isinstance(scaling, dict) else None
        if current != version and not (isinstance(desired, int) and desired == 0):
            refused.append(f"{group[:80]} runs {str(current)[:10]} at desiredSize {str(desired)[:10]}")
    if refused:
        return CheckResult(name, False, (
            f"kubernetesVersion {version} would update Capacity Block node group(s) {'; '.join(refused)}; EKS updates "
            "a Capacity Block group's version only at desired size 0: scale the models on it to 0, let Cluster "
            "Autoscaler empty the group (or aws eks update-nodegroup-config --scaling-config desiredSize=0), then "
            "run up again"))
    return CheckResult(name, True, f"{blocks} Capacity Block group(s); none changes version with nodes wanted")


def bedrock_targets(settings: Any) -> tuple[tuple[str, str], ...]:
    """The gateway's Bedrock fallbacks as (kind, model id), or none when the stack runs no gateway."""
    serving = getattr(settings, "serving", None)
    if serving is None or not serving.enabled or not serving.gateway.enabled:
        return ()
    return tuple((kind, model_id) for kind, ids in serving.gateway.fallbacks().items() for model_id in ids)


#: The smallest request that proves a chat model answers this account: one output token.
_CHAT_PROBE = json.dumps([{"role": "user", "content": [{"text": "ready"}]}])
#: Embedding request bodies by provider (InvokeModel takes each model's native body).
_EMBEDDING_PROBES = {
    "amazon": {"inputText": "ready"},
    "cohere": {"texts": ["ready"], "input_type": "search_query"},
}


def bedrock_probe_command(kind: str, model_id: str, region: str | None) -> list[str] | None:
    """The ``aws`` call that invokes ``model_id`` once; None when no probe body is known."""
    from components.serving.gateway import foundation_model_id

    where = ["--region", region] if region else []
    if kind == "chat":
        return ["aws", "bedrock-runtime", "converse", "--model-id", model_id, "--messages", _CHAT_PROBE,
                "--inference-config", json.dumps({"maxTokens": 1}), "--output", "json", *where]
    body = _EMBEDDING_PROBES.get(foundation_model_id(model_id).split(".", 1)[0])
    if body is None:
        return None
    return ["aws", "bedrock-runtime", "invoke-model", "--model-id", model_id, "--body", json.dumps(body),
            "--cli-binary-format", "raw-in-base64-out", "--content-type", "application/json", "--accept",
            "application/json", *where, os.devnull]


def bedrock_enablement_step(model_id: str, error: str) -> str:
    """One line: the model, and the one-time step that makes it invocable in this account."""
    from components.serving.gateway import MARKETPLACE_ACTIONS, foundation_model_id, is_marketplace_model

    prefix = f"{model_id} is not invocable in this account: "
    anthropic = foundation_model_id(model_id).startswith("anthropic.")
    if "use case" in error.lower():
        return prefix + ("submit Anthropic's one-time use-case form (Bedrock console, Model catalog, the "
                         "model's page), then run this again (allow up to 15 minutes)")
    if "AccessDenied" in error and "bedrock:Invoke" in error:
        return prefix + "this principal may not call bedrock:InvokeModel on it (an IAM policy, not the model)"
    if "AccessDenied" in error and is_marketplace_model(model_id):
        form = "; Anthropic also needs its one-time use-case form" if anthropic else ""
        return prefix + (f"its one-time AWS Marketplace subscription is missing: run this again as a principal "
                         f"allowed {', '.join(MARKETPLACE_ACTIONS)} (the first invocation subscribes the account; "
                         f"allow up to 15 minutes){form}")
    if "AccessDenied" in error:
        return prefix + "request access to it once for the account (Bedrock console, Model access)"
    return prefix + error


def bedrock_model_invocable(kind: str, model_id: str, region: str | None) -> CheckResult:
    name = f"bedrock {model_id}"
    command = bedrock_probe_command(kind, model_id, region)
    if command is None:
        return CheckResult(name, True, f"no probe request known for this {kind} model's provider", skipped=True)
    ok, out = _run(command, timeout=60)
    if ok:
        return CheckResult(name, True, f"invocable in {region or 'the default region'}")
    if "ThrottlingException" in out:
        return CheckResult(name, True, "throttled, so access is granted")
    return CheckResult(name, False, bedrock_enablement_step(model_id, out))


def bedrock_checks(targets: Sequence[tuple[str, str]], region: str | None) -> list[CheckResult]:
    """Each of the gateway's Bedrock fallbacks invoked once (see the module's docstring)."""
    return [bedrock_model_invocable(kind, model_id, region) for kind, model_id in targets]


_ROLE_ARN = re.compile(r"^arn:(aws[a-z-]*):iam::(\d{12}):role/[\w+=,.@/-]{1,512}$")


def gateway_role_checks(role_arn: str, targets: Sequence[tuple[str, str]], region: str | None,
                        extra_policy: str | None = None) -> list[CheckResult]:
    """Whether the gateway's Pod Identity role may invoke each fallback, by IAM's own evaluation.

    The probe above invokes each model as the operator; the gateway's pods call Bedrock as their role.
    ``aws iam simulate-principal-policy`` evaluates the role's identity policies, its permissions
    boundary and, in an Organization, the SCPs (IAM user guide, "Testing IAM policies with the IAM policy
    simulator") for ``bedrock:InvokeModel`` on every resource Bedrock authorizes the call against
    (``components.serving.gateway.bedrock_invocation_arns``: an inference profile needs the profile *and*
    its foundation model). ``extra_policy``: a policy document to include, the inline policy an ``up`` is
    about to set (``--policy-input-list``), so preflight judges the role as it will be."""
    from components.serving.gateway import INVOKE_ACTION, bedrock_invocation_arns

    match = _ROLE_ARN.match(role_arn)
    if match is None or not region:
        return [CheckResult("bedrock gateway role", False, f"gatewayRoleArn {role_arn[:120]!r} is not an IAM role ARN")]
    partition, account = match.groups()
    role = role_arn.rsplit("/", 1)[-1]
    out: list[CheckResult] = []
    for _, model_id in targets:
        name = f"bedrock gateway role {model_id}"
        arns = bedrock_invocation_arns(partition, region, account, model_id)
        command = ["aws", "iam", "simulate-principal-policy", "--policy-source-arn", role_arn, "--action-names",
                   INVOKE_ACTION, "--resource-arns", *arns, "--output", "json"]
        if extra_policy is not None:
            command += ["--policy-input-list", extra_policy]
        ok, answer = _run(command)
        if not ok:
            out.append(CheckResult(name, False, f"cannot simulate {role}'s policies: {answer}"[:300]))
            continue
        try:
            results = json.loads(answer).get("EvaluationResults")
            decisions = {r["EvalResourceName"]: r["EvalDecision"] for r in results}
        except (ValueError, AttributeError, TypeError, KeyError):
            out.append(CheckResult(name, False, "iam simulate-principal-policy answered no EvaluationResults"))
            continue
        denied = [(arn, str(decisions.get(arn, "not evaluated"))[:40]) for arn in arns if decisions.get(arn) != "allowed"]
        if denied:
            out.append(CheckResult(name, False, (
                f"the gateway's role {role} may not {INVOKE_ACTION} " + "; ".join(f"{a} ({d})" for a, d in denied)
                + ": its fallback to this model fails with AccessDeniedException (check the role's inline policy, "
                "its permissions boundary and the account's SCPs)")))
        else:
            out.append(CheckResult(name, True, f"{role} may invoke it ({len(arns)} resource(s) allowed)"))
    return out


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
            if results[-1].ok:
                results.extend(bedrock_checks(needs.bedrock, needs.bedrock_region))
    results.append(backend_reachable(backend_url))
    results.append(secrets_usable(secrets_provider))
    results.extend(extra)
    return results
