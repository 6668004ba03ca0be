"""``preview``, ``up``, ``destroy``, ``refresh`` of a repository stack (``Pulumi.<stack>.yaml``).

Preview and up attach the policy pack with ``policies/config/<stack>.json``; all four stream the
CLI's progress and end with a summary of changes and policy violations.
"""

from __future__ import annotations

import argparse
import json

from pulumi.automation import Stack
from pulumi.automation.errors import StackNotFoundError

from automation import exit_codes
from automation.commands._common import (
    add_endpoint_flag,
    add_output_flags,
    add_secrets_flag,
    preflight,
    stack_flag,
    validate,
)
from automation.commands._engine import clear_cluster, render_report, render_teardown, run_operation
from automation.commands.env import add_kubectl_flag, kubectl_factory
from automation.console import progress_writer, stdout
from automation.driver.preflight import (
    CAPACITY_BLOCK,
    PreflightNeeds,
    bedrock_targets,
    capacity_block_upgrades,
    endpoint_check,
    gateway_role_checks,
)
from automation.driver.workspace import Project, isolated_workspace, pulumi_command, resolve_backend
from automation.errors import translate_errors
from automation.stacks import read_stack_config

#: Operations that reach the cluster's API endpoint.
CHANGES = ("up", "destroy", "refresh")
OPERATIONS = {
    "preview": "show what `up` would change, with the policy pack enforced",
    "up": "create or update the stack's resources, with the policy pack enforced",
    "destroy": "delete every resource of the stack (the stack and its history stay)",
    "refresh": "reconcile the stack's state with what exists in the cloud",
}


def declare(verbs: argparse._SubParsersAction) -> None:
    for operation, summary in OPERATIONS.items():
        _declare_operation(verbs, operation, summary)


def _declare_operation(verbs: argparse._SubParsersAction, operation: str, summary: str) -> None:
    parser = verbs.add_parser(
        operation,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}. Reads Pulumi.STACK.yaml, validates its settings, "
        "then runs `pulumi " + operation + "` in an isolated workspace against the state backend "
        "(PULUMI_BACKEND_URL, default the project-local .pulumi-state). "
        "Exit codes: 0 done, 1 failed or mandatory policy violation, 2 bad command line or settings, 3 locked, "
        "4 no such stack, 5 preflight failed (nothing changed), 130/143 interrupted.",
    )
    parser.add_argument("--stack", required=True, type=stack_flag, help="stack name; reads Pulumi.STACK.yaml")
    if operation in CHANGES:
        add_endpoint_flag(parser)
    if operation == "destroy":
        add_kubectl_flag(parser)
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_operation, operation=operation)


def _run_operation(args: argparse.Namespace) -> int:
    project = Project()
    settings = validate(args.stack, read_stack_config(args.stack, project.root))
    policy = project.policy_args(args.stack) if args.operation in ("preview", "up") else None
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    json_mode = args.output == "json"
    kubectl = getattr(args, "kubectl", None)
    teardown = None
    with isolated_workspace(project, backend, command, stack_files={args.stack: project.stack_file(args.stack)}) as ws:
        with translate_errors(args.stack, backend.url):
            try:
                stack = Stack.select(args.stack, ws)
            except StackNotFoundError:
                if args.operation not in ("preview", "up"):
                    raise
                stack = None
            extra = []
            if args.operation in CHANGES:
                kubeconfig = _kubeconfig(stack)
                extra.append(endpoint_check(settings, kubeconfig, args.endpoint_reachable, args.stack))
            if args.operation == "up":
                extra.append(_capacity_block_check(stack, settings))
                extra.extend(_gateway_role_checks(stack, settings))
            # Before `up`, each Bedrock fallback is invoked once: a fresh account's first use of a
            # third-party model needs a one-time Marketplace subscription or use-case form.
            fallbacks = bedrock_targets(settings) if args.operation == "up" else ()
            preflight(PreflightNeeds(aws=True, kubectl=kubectl, region=settings.region, bedrock=fallbacks,
                                     bedrock_region=settings.serving.gateway.bedrock_region if fallbacks else None),
                      backend, command, extra)
            if stack is None:
                stack = Stack.create(args.stack, ws)
            if args.operation == "destroy":
                teardown = clear_cluster(stack, kubectl_factory(args.kubectl))
            report = run_operation(stack, args.operation, on_output=progress_writer(json_mode), policy=policy)
    if json_mode:
        print(json.dumps({**report.to_json(), **({"teardown": teardown.to_json()} if teardown else {})}, indent=2))
    else:
        if teardown is not None:
            render_teardown(teardown, stdout())
        render_report(report, stdout())
    return exit_codes.OK if report.ok else exit_codes.FAILED


def _capacity_block_check(stack: Stack | None, settings):
    """For a deployed stack with a Capacity Block pool: its groups' version change needs desired size 0."""
    if stack is None or not any(p.capacity_type == CAPACITY_BLOCK for p in settings.gpu_pools):
        return None
    cluster = stack.outputs().get("clusterName")
    if cluster is None or not isinstance(cluster.value, str):
        return None
    return capacity_block_upgrades(cluster.value, settings.region, settings.kubernetes_version)


def _gateway_role_checks(stack: Stack | None, settings) -> list:
    """For a deployed stack with Bedrock fallbacks: its gateway role, with the inline policy this ``up`` sets,
    may invoke each fallback (a first ``up`` has no role yet; ``verify`` checks it after)."""
    targets = bedrock_targets(settings)
    role = stack.outputs().get("gatewayRoleArn") if stack is not None and targets else None
    if role is None or not isinstance(role.value, str):
        return []
    from components.serving.gateway import bedrock_invoke_policy

    parts = role.value.split(":")
    region = settings.serving.gateway.bedrock_region
    policy = bedrock_invoke_policy(parts[1], region, parts[4], [m for _, m in targets]) if len(parts) > 4 else None
    return gateway_role_checks(role.value, targets, region, extra_policy=policy)


def _kubeconfig(stack: Stack | None):
    """The stack's ``kubeconfig`` output, or None for a stack without a cluster yet."""
    if stack is None:
        return None
    value = stack.outputs().get("kubeconfig")
    return value.value if value is not None else None
