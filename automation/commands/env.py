"""``env create|list|destroy|reap``: self-service environments with an owner and an expiry.

An environment NAME is the stack ``env-NAME``: the template stack's config with ``environment``
set to NAME, plus ``--set`` overrides, tagged with owner, creation time, expiry, purpose and
template. ``env reap`` destroys every expired one and is safe to run from cron.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import MutableMapping

from pulumi.automation import ConfigValue, Stack
from pulumi.automation.errors import (
    CommandError,
    ConcurrentUpdateError,
    StackAlreadyExistsError,
    StackNotFoundError,
)
from rich.table import Table
from rich.text import Text

from automation import exit_codes
from automation.commands._common import (
    add_endpoint_flag,
    add_output_flags,
    add_secrets_flag,
    executable_flag,
    namespace_flag,
    object_name_flag,
    output_file,
    owner_flag,
    preflight,
    stack_flag,
    ttl_flag,
    validate,
)
from automation.commands._engine import (
    clear_cluster,
    destroy_and_remove,
    managed_stacks,
    render_report,
    render_teardown,
    run_operation,
)
from automation.console import err, progress_writer, stdout
from automation.driver import environments, locks, operator
from automation.driver.environments import (
    KIND_ENV,
    EnvMetadata,
    combine_overrides,
    default_owner,
    env_stack_name,
    format_time,
    human,
    managed_stack_name,
    merged_config,
    new_metadata,
    parse_override,
    select_expired,
    tag_resources,
)
from automation.driver.preflight import PreflightNeeds, endpoint_check
from automation.driver.workspace import Project, isolated_workspace, pulumi_command, resolve_backend
from automation.errors import DriverError, error_lines, lock_advice, translate_errors
from automation.stacks import read_stack_config
from components.settings import config_strings


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "env",
        help="self-service environments: create, update, extend, list, destroy, reap",
        description="Self-service environments: stacks env-NAME made from a template stack, tagged with "
        "owner, creation time, expiry and purpose, and destroyed when they expire.",
    )
    env_verbs = parser.add_subparsers(dest="env_verb", required=True, metavar="ENV_VERB")
    _declare_create(env_verbs)
    _declare_update(env_verbs)
    _declare_extend(env_verbs)
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
    parser.add_argument("--from", dest="template", required=True, metavar="STACK", type=stack_flag, help="template stack, e.g. dev")
    parser.add_argument("--ttl", default="8h", type=ttl_flag,
                        help="lifetime before `env reap` destroys it (default 8h, between 15m and 7d)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a setting, e.g. gpuPools[0].scaling.maxSize=1 (value read as YAML); repeatable",
    )
    parser.add_argument("--owner", type=owner_flag, help="owner recorded on the stack (default: your login name)")
    parser.add_argument("--purpose", default="", help="what the environment is for (shown by env list)")
    add_endpoint_flag(parser)
    parser.add_argument("--via", choices=("local", "operator"), default="local",
                        help="local: run `up` here (default); operator: write a Pulumi Kubernetes Operator Stack")
    operator_flags = parser.add_argument_group("--via operator")
    operator_flags.add_argument("--out", type=output_file, help="write the Stack manifest here (default: stdout)")
    operator_flags.add_argument("--namespace", default="default", type=namespace_flag, help="namespace of the Stack object")
    operator_flags.add_argument("--service-account", default="pulumi", type=object_name_flag, help="service account of the stack's workspace")
    operator_flags.add_argument("--passphrase-secret", default="pulumi-passphrase", type=object_name_flag,
                                help="Secret holding key 'passphrase' (passphrase provider only)")
    operator_flags.add_argument("--repo", help="git URL of this project (default: remote origin)")
    operator_flags.add_argument("--commit", help="commit to deploy (default: HEAD; must be pushed)")
    operator_flags.add_argument("--branch", help="track a branch instead of pinning a commit")
    operator_flags.add_argument("--git-auth-secret", type=object_name_flag, help="Secret with key 'accessToken' for a private repository")
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_create)


def _run_create(args: argparse.Namespace) -> int:
    project = Project()
    stack_name = env_stack_name(args.name)
    overrides = [parse_override(text) for text in args.overrides]
    meta = new_metadata(
        stack_name, kind=KIND_ENV, owner=default_owner(args.owner), ttl=args.ttl,
        template=args.template, purpose=args.purpose, overrides=[o.text for o in overrides],
    )
    config = merged_config(read_stack_config(args.template, project.root), overrides, environment=args.name)
    tag_resources(config, meta)
    settings = validate(stack_name, config)
    if args.via == "operator":
        return _write_operator_stack(args, project, meta, config)

    policy = project.policy_args(args.template)
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    preflight(PreflightNeeds(region=settings.region), backend, command,
              [endpoint_check(settings, None, args.endpoint_reachable, stack_name)])
    with isolated_workspace(project, backend, command) as ws, translate_errors(stack_name, backend.url):
        try:
            stack = Stack.create(stack_name, ws)
        except StackAlreadyExistsError:
            raise DriverError(
                f"env {args.name} already exists; `python -m automation env update {args.name}` retries its "
                "deployment from the request stored with it (add --set to change it)", exit_codes.USAGE) from None
        for key, value in meta.to_tags().items():
            stack.set_tag(key, value)
        return _deploy(args, stack, meta, config, policy, verb="create")


def _deploy(args: argparse.Namespace, stack: Stack, meta: EnvMetadata, config: dict, policy, *, verb: str) -> int:
    """Config from the request, then ``up``; the summary and what to do if it failed."""
    json_mode = args.output == "json"
    stack.set_all_config({key: ConfigValue(value=value) for key, value in config_strings(config).items()})
    args.resume = f"python -m automation env update {meta.name}"
    report = run_operation(stack, "up", on_output=progress_writer(json_mode), policy=policy)
    if json_mode:
        summary = {"environment": meta.to_json(environments.utcnow(), status="active"), "up": report.to_json()}
        print(json.dumps(summary, indent=2))
    else:
        render_report(report, stdout())
    if not report.ok:
        err.print(
            f"env {meta.name}: {verb} failed; the stack stays until it expires at {format_time(meta.expires_at)}. "
            f"Retry with `python -m automation env update {meta.name}` (from any machine with this backend), or "
            f"remove it with `python -m automation env destroy {meta.name}`",
        )
        return exit_codes.FAILED
    if not json_mode:
        stdout().print(f"env {meta.name} is up: owner {meta.owner}, expires {format_time(meta.expires_at)}")
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
                       f"`kubectl delete -f {args.out}` destroys it")
    return exit_codes.OK


# --- env update / env extend ----------------------------------------------------------------------


def _declare_update(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "update",
        help="re-deploy an environment from its stored request (retry a failed create), optionally changed",
        description="Read env-NAME's request (template and --set overrides) from its stack tags in the backend, "
        "apply new --set/--unset, rebuild the config from the template in this checkout, validate it and run `up`. "
        "Works from any machine with the same backend; without flags it retries a failed or interrupted create.",
    )
    parser.add_argument("name", help="environment name")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="add or replace an override (as in env create); repeatable")
    parser.add_argument("--unset", action="append", default=[], metavar="KEY",
                        help="drop a stored override, back to the template's value; repeatable")
    parser.add_argument("--force", action="store_true", help="update even if you are not the owner")
    add_endpoint_flag(parser)
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_update)


def _select_env(ws, stack_name: str, owner_check: bool, force: bool) -> tuple[Stack, EnvMetadata, MutableMapping[str, str]]:
    stack = Stack.select(stack_name, ws)
    tags = stack.list_tags()
    meta = EnvMetadata.from_tags(stack_name, tags)
    if meta is None:
        raise DriverError(f"{stack_name} has no environment tags; it was not made by `env create`", exit_codes.USAGE)
    if owner_check and not force and meta.owner != default_owner(None):
        raise DriverError(f"{meta.name} belongs to {meta.owner}; pass --force to change it anyway", exit_codes.USAGE)
    return stack, meta, tags


def _run_update(args: argparse.Namespace) -> int:
    project = Project()
    stack_name = env_stack_name(args.name)
    for text in args.overrides:
        parse_override(text)
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    with isolated_workspace(project, backend, command) as ws, translate_errors(stack_name, backend.url):
        stack, meta, tags = _select_env(ws, stack_name, True, args.force)
        try:
            combined = combine_overrides(meta.overrides, args.overrides, args.unset)
        except environments.EnvRequestError as exc:
            raise environments.EnvRequestError(f"stored request of {meta.name}: {exc}") from None
        meta = dataclasses.replace(meta, overrides=tuple(combined))
        config = merged_config(read_stack_config(meta.template, project.root),
                               [parse_override(text) for text in combined], environment=meta.name)
        tag_resources(config, meta)
        settings = validate(stack_name, config)
        policy = project.policy_args(meta.template)
        kubeconfig = stack.outputs().get("kubeconfig")
        preflight(PreflightNeeds(region=settings.region), backend, command,
                  [endpoint_check(settings, kubeconfig.value if kubeconfig else None, args.endpoint_reachable,
                                  stack_name)])
        new_tags = meta.to_tags()
        for key, value in new_tags.items():
            if tags.get(key) != value:
                stack.set_tag(key, value)
        for key in environments.stale_request_tags(tags, new_tags):
            stack.remove_tag(key)
        return _deploy(args, stack, meta, config, policy, verb="update")


def _declare_extend(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "extend",
        help="give an environment more time: its expiry becomes now + --ttl",
        description="Set env-NAME's expiry to now + --ttl (between 15m and 7d). Changes only the expiry tag.",
    )
    parser.add_argument("name", help="environment name")
    parser.add_argument("--ttl", required=True, type=ttl_flag, help="new lifetime from now, e.g. 8h or 2d")
    parser.add_argument("--force", action="store_true", help="extend even if you are not the owner")
    add_output_flags(parser)
    parser.set_defaults(run=_run_extend)


def _run_extend(args: argparse.Namespace) -> int:
    project = Project()
    stack_name = env_stack_name(args.name)
    backend = resolve_backend(project, needs_secrets=False)
    now = environments.utcnow()
    with isolated_workspace(project, backend, pulumi_command()) as ws, translate_errors(stack_name, backend.url):
        stack, meta, _ = _select_env(ws, stack_name, True, args.force)
        meta = dataclasses.replace(meta, expires_at=now + args.ttl)
        stack.set_tag(environments.TAG_EXPIRES, format_time(meta.expires_at))
    if args.output == "json":
        print(json.dumps(meta.to_json(now, status="active"), indent=2))
    else:
        stdout().print(f"env {meta.name} now expires {format_time(meta.expires_at)} (in {human(args.ttl)})")
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


def _run_list(args: argparse.Namespace) -> int:
    project = Project()
    backend = resolve_backend(project, needs_secrets=False)
    with isolated_workspace(project, backend, pulumi_command()) as ws, translate_errors("(list)", backend.url):
        found = managed_stacks(ws)
    now = environments.utcnow()
    held = {m.meta.stack: locks.read_locks(backend.url, project.name, m.meta.stack) for m in found if m.updating}

    def status(m) -> str:
        if held.get(m.meta.stack) and all(lock.stale for lock in held[m.meta.stack]):
            return "stale lock"
        return m.status(now)

    if args.output == "json":
        print(json.dumps([{**m.meta.to_json(now, status=status(m)),
                           "locks": [lock.to_json() for lock in held.get(m.meta.stack, [])]} for m in found], indent=2))
        return exit_codes.OK
    console = stdout()
    if not found:
        console.print(f"no environments in {backend.url}")
        return exit_codes.OK
    table = Table("NAME", "KIND", "OWNER", "AGE", "EXPIRES", "STATUS", "PURPOSE", box=None, pad_edge=False)
    for m in found:
        left = m.meta.expires_at - now
        expires = f"in {human(left)}" if left.total_seconds() > 0 else f"{human(left)} ago"
        table.add_row(*(Text(cell) for cell in (
            m.meta.name, m.meta.kind, m.meta.owner, human(now - m.meta.created_at), expires, status(m),
            m.meta.purpose,
        )))
    console.print(table)
    for stack, stack_locks in held.items():
        if stack_locks:
            console.print(lock_advice(stack, stack_locks))
    return exit_codes.OK


# --- env destroy --------------------------------------------------------------------------------


def add_kubectl_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubectl", default="kubectl", type=executable_flag,
                        help="kubectl used to delete Karpenter nodes, Ingresses and LoadBalancer Services before "
                        "destroy (default: kubectl on PATH)")


def kubectl_factory(binary: str):
    from automation.driver.postdeploy import KubectlCli

    return lambda path: KubectlCli(path, binary=binary)


def _declare_destroy(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "destroy",
        help="destroy an environment's resources and remove its stack",
        description="Delete the cluster's Karpenter NodePools, Ingresses and LoadBalancer Services (waiting for "
        "their AWS load balancers), then destroy env-NAME (or a test-* stack named as `env list` shows it) and "
        "remove the stack. Someone else's environment needs --force.",
    )
    parser.add_argument("name", help="environment name, or a full env-*/test-* stack name")
    parser.add_argument("--force", action="store_true", help="destroy even if you are not the owner")
    add_kubectl_flag(parser)
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_destroy)


def _run_destroy(args: argparse.Namespace) -> int:
    project = Project()
    stack_name = managed_stack_name(args.name)
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    json_mode = args.output == "json"
    command = pulumi_command()
    with isolated_workspace(project, backend, command) as ws, translate_errors(stack_name, backend.url):
        stack, meta, _ = _select_env(ws, stack_name, True, args.force)
        preflight(PreflightNeeds(kubectl=args.kubectl), backend, command)
        args.resume = f"python -m automation env destroy {meta.name}"
        teardown = clear_cluster(stack, kubectl_factory(args.kubectl))
        report = destroy_and_remove(stack, on_output=progress_writer(json_mode))
    if json_mode:
        print(json.dumps({"environment": meta.name, "teardown": teardown.to_json(), "destroy": report.to_json(),
                          "removed": report.ok}, indent=2))
    else:
        console = stdout()
        render_teardown(teardown, console)
        render_report(report, console)
        if report.ok:
            console.print(f"env {meta.name}: destroyed and removed")
    if not report.ok:
        err.print(f"env {meta.name}: destroy failed, the stack stays; fix the cause and run `env destroy` again "
                  f"(`env reap` retries it after {format_time(meta.expires_at)})")
    return exit_codes.OK if report.ok else exit_codes.FAILED


# --- env reap -----------------------------------------------------------------------------------


def _declare_reap(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "reap",
        help="destroy every expired environment (safe to run from cron)",
        description="Destroy and remove every stack whose expiry tag is in the past, oldest expiry first, after "
        "removing its Karpenter nodes and load balancers. Non-interactive and idempotent, so safe to run from cron. "
        "A stack locked by a running update is retried with exponential backoff; one whose lock holder is gone is "
        "reported (clear it with `unlock`). Exit 1 if any destroy failed, else 3 if a stack stayed locked.",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be destroyed; change nothing")
    parser.add_argument("--busy-retries", type=non_negative_int, default=3,
                        help="how many more times a locked stack is tried in this run (default 3)")
    parser.add_argument("--backoff", type=seconds_flag, default=60.0,
                        help="seconds before the first retry of a locked stack; doubles each time (default 60)")
    parser.add_argument("--clear-stale-locks", action="store_true",
                        help="file backend: delete locks whose holder process is gone from this host, then destroy")
    add_kubectl_flag(parser)
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_reap)


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 20:
        raise argparse.ArgumentTypeError(f"{text!r}: use 0 to 20")
    return value


def seconds_flag(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: use more than 0 and at most 3600 seconds")
    return value


@dataclasses.dataclass
class ReapResult:
    meta: EnvMetadata
    outcome: str = "would destroy"
    attempts: int = 0
    details: list[str] = dataclasses.field(default_factory=list)
    teardown: dict | None = None

    def to_json(self, now) -> dict:
        return {**self.meta.to_json(now, status="expired"), "outcome": self.outcome, "attempts": self.attempts,
                "errors": self.details, "teardown": self.teardown}


def _run_reap(args: argparse.Namespace) -> int:
    project = Project()
    backend = resolve_backend(project, secrets_provider=args.secrets_provider, needs_secrets=not args.dry_run)
    json_mode = args.output == "json"
    progress = progress_writer(json_mode)
    now = environments.utcnow()
    command = pulumi_command()
    with isolated_workspace(project, backend, command) as ws:
        with translate_errors("(list)", backend.url):
            expired = select_expired([m.meta for m in managed_stacks(ws)], now)
        if expired and not args.dry_run:
            preflight(PreflightNeeds(kubectl=args.kubectl), backend, command)
        results = [ReapResult(meta) for meta in expired]
        pending = [] if args.dry_run else list(results)
        delay = args.backoff
        for round_ in range(args.busy_retries + 1):
            for result in pending:
                _reap_one(ws, result, progress, kubectl_factory(args.kubectl),
                          (backend.url, project.name) if args.clear_stale_locks else None)
            pending = [r for r in pending if r.outcome == "busy"]
            if not pending or round_ == args.busy_retries:
                break
            err.print(f"{len(pending)} stack(s) locked by a running update; retrying in {delay:g}s")
            time.sleep(delay)
            delay *= 2
    if json_mode:
        print(json.dumps({"now": format_time(now), "dryRun": args.dry_run,
                          "reaped": [r.to_json(now) for r in results]}, indent=2))
    else:
        _render_reap(results, now)
    if any(r.outcome == "failed" for r in results):
        return exit_codes.FAILED
    return exit_codes.LOCKED if any(r.outcome in ("busy", "stale-lock") for r in results) else exit_codes.OK


def _render_reap(results: list[ReapResult], now) -> None:
    console = stdout()
    if not results:
        console.print("nothing expired")
        return
    table = Table("STACK", "OWNER", "EXPIRED", "OUTCOME", "TRIES", "DETAIL", box=None, pad_edge=False)
    for r in results:
        table.add_row(*(Text(cell) for cell in (
            r.meta.stack, r.meta.owner, f"{human(now - r.meta.expires_at)} ago", r.outcome, str(r.attempts),
            "; ".join(r.details),
        )))
    console.print(table)


def _reap_one(ws, result: ReapResult, progress, kubectl_for, clear_stale: tuple[str, str] | None = None) -> None:
    """One expired stack: destroyed, busy (locked by a live update), stale-lock, gone, or failed.

    ``clear_stale`` (backend URL, project) lets it delete file-backend locks whose holder is gone
    from this host and try once more."""
    result.attempts += 1
    meta = result.meta
    try:
        stack = Stack.select(meta.stack, ws)
        if result.teardown is None:
            result.teardown = clear_cluster(stack, kubectl_for).to_json()
        report = destroy_and_remove(stack, on_output=progress, lock_wait=0)
    except ConcurrentUpdateError as exc:
        held = locks.from_error(str(exc))
        if held and all(lock.stale for lock in held):
            files = locks.read_locks(*clear_stale, meta.stack) if clear_stale else []
            if files and all(lock.stale for lock in files):
                for lock in files:
                    locks.remove(lock)
                err.print(f"{meta.stack}: cleared {len(files)} stale lock(s) ({files[0].describe()})")
                _reap_one(ws, result, progress, kubectl_for)
                result.details.insert(0, f"cleared {len(files)} stale lock(s)")
                return
            result.outcome, result.details = "stale-lock", [lock_advice(meta.stack, held)]
        else:
            result.outcome, result.details = "busy", [lock_advice(meta.stack, held)]
        return
    except StackNotFoundError:
        result.outcome, result.details = "gone", []
        return
    except CommandError as exc:
        result.outcome, result.details = "failed", error_lines(exc)
        return
    if not report.ok:
        result.outcome, result.details = "failed", report.errors
        return
    result.outcome, result.details = "destroyed", []
