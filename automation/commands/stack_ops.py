"""``preview``, ``up``, ``destroy``, ``refresh`` of a repository stack (``Pulumi.<stack>.yaml``).

Preview and up attach the policy pack with ``policies/config/<stack>.json``; all four stream the
CLI's progress and end with a summary of changes and policy violations.
"""

from __future__ import annotations

import argparse
import json

from pulumi.automation import Stack

from .. import exit_codes
from ..stacks import read_stack_config
from ..workspace import Project, isolated_workspace, pulumi_command, resolve_backend
from ._common import add_output_flags, add_secrets_flag, guarded, progress_writer, stdout, translate_errors, validate
from ._engine import render_report, run_operation

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
        "Exit codes: 0 done, 1 failed or mandatory policy violation, 2 bad command line or settings.",
    )
    parser.add_argument("--stack", required=True, help="stack name; reads Pulumi.STACK.yaml")
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_operation, operation=operation)


@guarded
def _run_operation(args: argparse.Namespace) -> int:
    project = Project()
    validate(args.stack, read_stack_config(args.stack, project.root))
    policy = project.policy_args(args.stack) if args.operation in ("preview", "up") else None
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    json_mode = args.output == "json"
    with isolated_workspace(project, backend, command, stack_files={args.stack: project.stack_file(args.stack)}) as ws:
        with translate_errors(args.stack, backend.url):
            if args.operation in ("preview", "up"):
                stack = Stack.create_or_select(args.stack, ws)
            else:
                stack = Stack.select(args.stack, ws)
            report = run_operation(stack, args.operation, on_output=progress_writer(json_mode), policy=policy)
    if json_mode:
        print(json.dumps(report.to_json(), indent=2))
    else:
        render_report(report, stdout())
    return exit_codes.OK if report.ok else exit_codes.FAILED
