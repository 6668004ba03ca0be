"""``env create|list|destroy|reap``: self-service environments with an owner and an expiry.

An environment NAME is the stack ``env-NAME``: the template stack's config with ``environment``
set to NAME, plus ``--set`` overrides, tagged with owner, creation time, expiry, purpose and
template. ``env reap`` destroys every expired one and is safe to run from cron.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pulumi.automation import ConfigValue, Stack
from pulumi.automation.errors import CommandError, ConcurrentUpdateError, StackNotFoundError
from rich.table import Table
from rich.text import Text

from components.settings import config_strings

from .. import environments, exit_codes, operator
from ..environments import (
    KIND_ENV,
    EnvMetadata,
    default_owner,
    env_stack_name,
    format_time,
    human,
    managed_stack_name,
    merged_config,
    new_metadata,
    parse_override,
    parse_ttl,
    select_expired,
    tag_resources,
)
from ..stacks import read_stack_config
from ..workspace import Project, isolated_workspace, pulumi_command, resolve_backend
from ._common import (
    DriverError,
    add_output_flags,
    add_secrets_flag,
    err,
    error_lines,
    guarded,
    progress_writer,
    stdout,
    translate_errors,
    validate,
)
from ._engine import destroy_and_remove, managed_stacks, render_report, run_operation


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "env",
        help="self-service environments: create, list, destroy, reap",
        description="Self-service environments: stacks env-NAME made from a template stack, tagged with "
        "owner, creation time, expiry and purpose, and destroyed when they expire.",
    )
    env_verbs = parser.add_subparsers(dest="env_verb", required=True, metavar="ENV_VERB")
    _declare_create(env_verbs)
    _declare_list(env_verbs)
    _declare_destroy(env_verbs)
    _declare_reap(env_verbs)


# --- env create ---------------------------------------------------------------------------------


def _declare_create(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "create",
        help="create env-NAME from a template stack and deploy it (or write an operator Stack)",
        description="Create stack env-NAME with the template's config, `environment` set to NAME and the "
        "--set overrides, validate it, tag it with owner/created/expiry/purpose, then run `up` with the "
        "template's policy config. With --via operator, write a Pulumi Kubernetes Operator Stack "
        "manifest instead and run nothing.",
    )
    parser.add_argument("name", help="environment name (1-20 of a-z, 0-9, -); the stack is env-NAME")
    parser.add_argument("--from", dest="template", required=True, metavar="STACK", help="template stack, e.g. dev")
    parser.add_argument("--ttl", default="8h", help="lifetime before `env reap` destroys it (default 8h, max 7d)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a setting, e.g. gpuPools[0].scaling.maxSize=1 (value read as YAML); repeatable",
    )
    parser.add_argument("--owner", help="owner recorded on the stack (default: your login name)")
    parser.add_argument("--purpose", default="", help="what the environment is for (shown by env list)")
    parser.add_argument("--via", choices=("local", "operator"), default="local",
                        help="local: run `up` here (default); operator: write a Pulumi Kubernetes Operator Stack")
    operator_flags = parser.add_argument_group("--via operator")
    operator_flags.add_argument("--out", type=Path, help="write the Stack manifest here (default: stdout)")
    operator_flags.add_argument("--namespace", default="default", help="namespace of the Stack object")
    operator_flags.add_argument("--service-account", default="pulumi", help="service account of the stack's workspace")
    operator_flags.add_argument("--passphrase-secret", default="pulumi-passphrase",
                                help="Secret holding key 'passphrase' (passphrase provider only)")
    operator_flags.add_argument("--repo", help="git URL of this project (default: remote origin)")
    operator_flags.add_argument("--commit", help="commit to deploy (default: HEAD; must be pushed)")
    operator_flags.add_argument("--branch", help="track a branch instead of pinning a commit")
    operator_flags.add_argument("--git-auth-secret", help="Secret with key 'accessToken' for a private repository")
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_create)


@guarded
def _run_create(args: argparse.Namespace) -> int:
    project = Project()
    stack_name = env_stack_name(args.name)
    meta = new_metadata(
        stack_name, kind=KIND_ENV, owner=default_owner(args.owner), ttl=parse_ttl(args.ttl),
        template=args.template, purpose=args.purpose,
    )
    overrides = [parse_override(text) for text in args.overrides]
    config = merged_config(read_stack_config(args.template, project.root), overrides, environment=args.name)
    tag_resources(config, meta)
    validate(stack_name, config)
    if args.via == "operator":
        return _write_operator_stack(args, project, meta, config)

    policy = project.policy_args(args.template)
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    json_mode = args.output == "json"
    with isolated_workspace(project, backend, command) as ws, translate_errors(stack_name, backend.url):
        stack = Stack.create(stack_name, ws)
        for key, value in meta.to_tags().items():
            stack.set_tag(key, value)
        stack.set_all_config({key: ConfigValue(value=value) for key, value in config_strings(config).items()})
        report = run_operation(stack, "up", on_output=progress_writer(json_mode), policy=policy)
    if json_mode:
        summary = {"environment": meta.to_json(environments.utcnow(), status="active"), "up": report.to_json()}
        print(json.dumps(summary, indent=2))
    else:
        render_report(report, stdout())
    if not report.ok:
        err.print(
            f"env {args.name}: up failed; the stack stays until it expires at {format_time(meta.expires_at)} "
            f"(`python -m automation env destroy {args.name}` removes it now)", markup=False,
        )
        return exit_codes.FAILED
    if not json_mode:
        stdout().print(f"env {args.name} is up: owner {meta.owner}, expires {format_time(meta.expires_at)}",
                       markup=False)
    return exit_codes.OK


def _write_operator_stack(args: argparse.Namespace, project: Project, meta: EnvMetadata, config: dict) -> int:
    backend = resolve_backend(project, secrets_provider=args.secrets_provider, needs_secrets=False)
    source = operator.git_source(project.root, repo=args.repo, branch=args.branch, commit=args.commit)
    manifest = operator.stack_manifest(
        meta, config, source=source, backend_url=backend.url, secrets_provider=backend.secrets_provider,
        namespace=args.namespace, service_account=args.service_account,
        passphrase_secret=args.passphrase_secret, git_auth_secret=args.git_auth_secret or "",
    )
    text = operator.to_yaml(manifest)
    if args.out is None:
        print(text, end="")
        return exit_codes.OK
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    if args.output == "json":
        print(json.dumps({"manifest": str(args.out), "stack": meta.stack}, indent=2))
    else:
        stdout().print(f"wrote {args.out}: `kubectl apply -f {args.out}` hands env {args.name} to the operator; "
                       f"`kubectl delete -f {args.out}` destroys it", markup=False)
    return exit_codes.OK


# --- env list -----------------------------------------------------------------------------------


def _declare_list(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "list",
        help="environments and test stacks with owner, age, expiry and status",
        description="List every stack tagged by this tool (environments and integration-test stacks).",
    )
    add_output_flags(parser)
    parser.set_defaults(run=_run_list)


@guarded
def _run_list(args: argparse.Namespace) -> int:
    project = Project()
    backend = resolve_backend(project, needs_secrets=False)
    with isolated_workspace(project, backend, pulumi_command()) as ws, translate_errors("(list)", backend.url):
        found = managed_stacks(ws)
    now = environments.utcnow()
    if args.output == "json":
        print(json.dumps([m.meta.to_json(now, status=m.status(now)) for m in found], indent=2))
        return exit_codes.OK
    console = stdout()
    if not found:
        console.print(f"no environments in {backend.url}", markup=False)
        return exit_codes.OK
    table = Table("NAME", "KIND", "OWNER", "AGE", "EXPIRES", "STATUS", "PURPOSE", box=None, pad_edge=False)
    for m in found:
        left = m.meta.expires_at - now
        expires = f"in {human(left)}" if left.total_seconds() > 0 else f"{human(left)} ago"
        table.add_row(*(Text(cell) for cell in (
            m.meta.name, m.meta.kind, m.meta.owner, human(now - m.meta.created_at), expires, m.status(now),
            m.meta.purpose,
        )))
    console.print(table)
    return exit_codes.OK


# --- env destroy --------------------------------------------------------------------------------


def _declare_destroy(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "destroy",
        help="destroy an environment's resources and remove its stack",
        description="Destroy env-NAME (or a test-* stack named as `env list` shows it) and remove the stack. "
        "Someone else's environment needs --force.",
    )
    parser.add_argument("name", help="environment name, or a full env-*/test-* stack name")
    parser.add_argument("--force", action="store_true", help="destroy even if you are not the owner")
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_destroy)


@guarded
def _run_destroy(args: argparse.Namespace) -> int:
    project = Project()
    stack_name = managed_stack_name(args.name)
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    json_mode = args.output == "json"
    with isolated_workspace(project, backend, pulumi_command()) as ws, translate_errors(stack_name, backend.url):
        stack = Stack.select(stack_name, ws)
        meta = EnvMetadata.from_tags(stack_name, stack.list_tags())
        if meta is None:
            raise DriverError(f"{stack_name} has no environment tags; it was not made by `env create`",
                              exit_codes.USAGE)
        if not args.force and meta.owner != default_owner(None):
            raise DriverError(f"{meta.name} belongs to {meta.owner}; pass --force to destroy it anyway",
                              exit_codes.USAGE)
        report = destroy_and_remove(stack, on_output=progress_writer(json_mode))
    if json_mode:
        print(json.dumps({"environment": meta.name, "destroy": report.to_json(), "removed": report.ok}, indent=2))
    else:
        render_report(report, stdout())
        if report.ok:
            stdout().print(f"env {meta.name}: destroyed and removed", markup=False)
    if not report.ok:
        err.print(f"env {meta.name}: destroy failed, the stack stays; fix the cause and run `env destroy` again "
                  f"(`env reap` retries it after {format_time(meta.expires_at)})", markup=False)
    return exit_codes.OK if report.ok else exit_codes.FAILED


# --- env reap -----------------------------------------------------------------------------------


def _declare_reap(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "reap",
        help="destroy every expired environment (safe to run from cron)",
        description="Destroy and remove every stack whose expiry tag is in the past. Non-interactive and "
        "idempotent, so safe to run from cron: a stack another run is updating is skipped, not waited for. "
        "Exit 1 if any destroy failed.",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be destroyed; change nothing")
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_reap)


@guarded
def _run_reap(args: argparse.Namespace) -> int:
    project = Project()
    backend = resolve_backend(project, secrets_provider=args.secrets_provider, needs_secrets=not args.dry_run)
    json_mode = args.output == "json"
    progress = progress_writer(json_mode)
    now = environments.utcnow()
    results: list[dict] = []
    with isolated_workspace(project, backend, pulumi_command()) as ws:
        with translate_errors("(list)", backend.url):
            expired = select_expired([m.meta for m in managed_stacks(ws)], now)
        for meta in expired:
            outcome, errors = "would destroy", []
            if not args.dry_run:
                outcome, errors = _reap_one(ws, meta, progress)
            results.append({**meta.to_json(now, status="expired"), "outcome": outcome, "errors": errors})
            if not json_mode:
                line = f"{meta.stack}: {outcome} (owner {meta.owner}, expired {human(now - meta.expires_at)} ago)"
                stdout().print(line + "".join(f"; {e}" for e in errors), markup=False)
    if json_mode:
        print(json.dumps({"now": format_time(now), "dryRun": args.dry_run, "reaped": results}, indent=2))
    elif not results:
        stdout().print("nothing expired", markup=False)
    return exit_codes.FAILED if any(r["outcome"] == "failed" for r in results) else exit_codes.OK


def _reap_one(ws, meta: EnvMetadata, progress) -> tuple[str, list[str]]:
    """One expired stack: destroyed, busy (locked by a running update), gone, or failed."""
    try:
        report = destroy_and_remove(Stack.select(meta.stack, ws), on_output=progress, lock_wait=0)
    except ConcurrentUpdateError:
        return "busy", ["locked by a running update; retried on the next reap"]
    except StackNotFoundError:
        return "gone", []
    except CommandError as exc:
        return "failed", error_lines(exc)
    if not report.ok:
        return "failed", report.errors
    return "destroyed", []

