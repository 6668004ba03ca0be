"""``test --from STACK``: an ephemeral integration run on a real cluster.

A uniquely named stack (``test-<owner>-<UTC stamp>-<random>``) from the template's config, ``up``
with the policy pack, post-deploy checks on the cluster, then -- in a ``finally`` that also runs on
failure and on Ctrl-C -- LoadBalancer Services deleted, ``destroy``, and ``stack rm``. The stack is
tagged to expire (3h) so that ``env reap`` removes it even if this process is killed outright.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pulumi.automation import ConfigValue, LocalWorkspace, Stack

from automation import exit_codes
from automation.commands._common import (
    add_endpoint_flag,
    add_output_flags,
    add_secrets_flag,
    duration_flag,
    executable_flag,
    owner_flag,
    positive_int,
    preflight,
    stack_flag,
    validate,
)
from automation.commands._engine import (
    OperationReport,
    Progress,
    clear_cluster,
    destroy_and_remove,
    render_report,
    render_teardown,
    run_operation,
)
from automation.console import err, progress_writer, stdout
from automation.driver import environments
from automation.driver.environments import (
    KIND_TEST,
    TEST_TTL,
    EnvMetadata,
    EnvRequestError,
    Override,
    apply_override,
    default_owner,
    ephemeral_environment,
    ephemeral_stack_name,
    format_time,
    merged_config,
    new_metadata,
    parse_override,
    tag_resources,
)
from automation.driver.postdeploy import (
    CheckPlan,
    CheckResult,
    GpuTarget,
    Kubectl,
    KubectlCli,
    Poller,
    kubeconfig_file,
    plan_checks,
    run_checks,
)
from automation.driver.preflight import PreflightNeeds, endpoint_check
from automation.driver.teardown import TeardownReport
from automation.driver.workspace import Project, isolated_workspace, pulumi_command, resolve_backend
from automation.errors import DriverError, error_lines, translate_errors
from automation.stacks import read_stack_config
from components import contract
from components.settings import Settings, config_strings

KubectlFactory = Callable[[Path], Kubectl]


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "test",
        help="ephemeral integration run: up, post-deploy GPU checks, destroy",
        description="Create a uniquely named stack from a template, `up` it, check the cluster (nodes Ready, "
        "the device plugin of the installed GPU software Ready on every GPU node, allocatable nvidia.com/gpu, "
        "nvidia-smi on each GPU pool with a Ready node, every warm model's health, one chat completion and one "
        "embedding through the gateway), then always delete Karpenter nodes, Ingresses and LoadBalancer "
        "Services, destroy and remove the stack, also on failure and on Ctrl-C. Preflight first checks kubectl, "
        "aws, credentials, the backend and the secrets provider. Needs kubectl, aws and AWS credentials.",
    )
    parser.add_argument("--from", dest="template", required=True, metavar="STACK", type=stack_flag, help="template stack, e.g. dev")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting (as in env create); repeatable")
    parser.add_argument("--gpu-nodes", type=positive_int, default=1,
                        help="GPU nodes to start in the first GPU pool (its desiredSize; default 1)")
    parser.add_argument("--timeout", default="30m", type=duration_flag("--timeout"),
                        help="time allowed for all post-deploy checks (default 30m)")
    parser.add_argument("--kubectl", default="kubectl", type=executable_flag,
                        help="kubectl binary (default: kubectl on PATH)")
    parser.add_argument("--owner", type=owner_flag, help="owner recorded on the stack (default: your login name)")
    add_endpoint_flag(parser)
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_test)
    _declare_verify(verbs)


def _declare_verify(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "verify",
        help="post-deploy checks of a deployed stack: GPU software, nvidia-smi per pool, models, gateway",
        description="Run the post-deploy checks of `test` against an existing stack (a repository stack or an "
        "env-NAME environment) through its kubeconfig output, without changing it. Prints a PASS/FAIL/SKIP "
        "table; exit 1 if any check fails.",
    )
    parser.add_argument("--stack", required=True, type=stack_flag, help="stack name, e.g. prod or env-alice")
    parser.add_argument("--timeout", default="10m", type=duration_flag("--timeout"),
                        help="time allowed for all checks (default 10m)")
    parser.add_argument("--kubectl", default="kubectl", type=executable_flag,
                        help="kubectl binary (default: kubectl on PATH)")
    add_endpoint_flag(parser)
    add_secrets_flag(parser)
    add_output_flags(parser)
    parser.set_defaults(run=_run_verify)


def _run_verify(args: argparse.Namespace) -> int:
    project = Project()
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    poller = Poller(timeout=args.timeout.total_seconds())
    with isolated_workspace(project, backend, command) as ws, translate_errors(args.stack, backend.url):
        stack = Stack.select(args.stack, ws)
        meta = EnvMetadata.from_tags(args.stack, stack.list_tags())
        if meta is not None and meta.template:
            config = merged_config(read_stack_config(meta.template, project.root),
                                   [parse_override(text) for text in meta.overrides], environment=meta.name)
        else:
            config = read_stack_config(args.stack, project.root)
        settings = validate(args.stack, config)
        kubeconfig = stack.outputs().get("kubeconfig")
        if kubeconfig is None or not kubeconfig.value:
            raise DriverError(f"stack {args.stack!r} exports no kubeconfig: is it deployed?", exit_codes.NOT_FOUND)
        preflight(PreflightNeeds(kubectl=args.kubectl, region=settings.region), backend, command,
                  [endpoint_check(settings, kubeconfig.value, args.endpoint_reachable, args.stack)])
        with kubeconfig_file(kubeconfig.value) as path:  # GPU pools checked: those with a Ready node now
            role = stack.outputs().get("gatewayRoleArn")
            plan = replace(plan_checks(settings), gateway_role_arn=role.value if role is not None else None)
            checks = run_checks(KubectlCli(path, binary=args.kubectl), plan, poller)
    if args.output == "json":
        print(json.dumps({"stack": args.stack, "result": "passed" if checks_passed(checks) else "failed",
                          "checks": [c.to_json() for c in checks]}, indent=2))
    else:
        render_checks(checks, stdout())
    return exit_codes.OK if checks_passed(checks) else exit_codes.FAILED


def gpu_target(settings: Settings, nodes: int) -> tuple[GpuTarget, int]:
    """The first GPU pool a plain ``nvidia.com/gpu`` request can use (not a DRA pool), and its index."""
    for index, pool in enumerate(settings.gpu_pools):
        if pool.purpose != contract.GPU_DRA_PURPOSE:
            return GpuTarget(pool=pool.name, purpose=pool.purpose, nodes=nodes), index
    raise EnvRequestError("the template has no GPU pool outside DRA; the smoke Job needs one")


def start_gpu_nodes(config: dict[str, Any], settings: Settings, index: int, nodes: int) -> None:
    """Raise the pool's desired (and if needed max) size so GPU nodes exist without an autoscaler."""
    if nodes < 1:
        raise EnvRequestError("--gpu-nodes must be at least 1: the GPU checks need a GPU node")
    scaling = settings.gpu_pools[index].scaling
    for key, value in (("maxSize", max(scaling.max_size, nodes)), ("desiredSize", max(scaling.desired_size, nodes))):
        text = f"gpuPools[{index}].scaling.{key}={value}"
        apply_override(config, Override(text=text, path=("gpuPools", index, "scaling", key), value=value))


def _run_test(args: argparse.Namespace) -> int:
    project = Project()
    owner = default_owner(args.owner)
    stack_name = ephemeral_stack_name(owner, environments.utcnow())
    meta = new_metadata(stack_name, kind=KIND_TEST, owner=owner, ttl=TEST_TTL, template=args.template,
                        purpose="integration test")
    overrides = [parse_override(text) for text in args.overrides]
    config = merged_config(read_stack_config(args.template, project.root), overrides,
                           environment=ephemeral_environment(stack_name))
    tag_resources(config, meta)
    target, index = gpu_target(validate(stack_name, config), args.gpu_nodes)
    start_gpu_nodes(config, validate(stack_name, config), index, args.gpu_nodes)
    settings = validate(stack_name, config)
    plan = plan_checks(settings, wait_for=target)  # then every GPU pool with a Ready node, as in verify
    poller = Poller(timeout=args.timeout.total_seconds())
    policy = project.policy_args(args.template)
    backend = resolve_backend(project, secrets_provider=args.secrets_provider)
    command = pulumi_command()
    preflight(PreflightNeeds(kubectl=args.kubectl, region=settings.region), backend, command,
              [endpoint_check(settings, None, args.endpoint_reachable, stack_name)])
    json_mode = args.output == "json"

    def kubectl_for(path: Path) -> Kubectl:
        return KubectlCli(path, binary=args.kubectl)

    with isolated_workspace(project, backend, command) as ws, translate_errors(stack_name, backend.url):
        run = IntegrationRun(ws, meta, config, policy, plan, kubectl_for, poller, progress_writer(json_mode))
        report = run.execute()
    if json_mode:
        print(json.dumps(report.to_json(), indent=2))
    else:
        report.render()
    return exit_codes.OK if report.passed else exit_codes.FAILED


@dataclass
class Cleanup:
    load_balancers: list[str] = field(default_factory=list)
    teardown: TeardownReport = field(default_factory=TeardownReport)
    destroy: OperationReport | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def removed(self) -> bool:
        return self.destroy is not None and self.destroy.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "loadBalancersDeleted": self.load_balancers,
            "teardown": self.teardown.to_json(),
            "destroy": self.destroy.to_json() if self.destroy else None,
            "removed": self.removed,
            "warnings": self.warnings,
        }


def checks_passed(checks: list[CheckResult]) -> bool:
    return all(c.ok for c in checks)


def render_checks(checks: list[CheckResult], console) -> None:
    """The pass/fail table: one row per check."""
    from rich.table import Table
    from rich.text import Text

    console.print("\npost-deploy checks:")
    table = Table("RESULT", "CHECK", "DETAIL", box=None, pad_edge=False)
    for check in checks:
        table.add_row(Text(check.status), Text(check.name), Text(check.detail))
    console.print(table)
    failed = [c.name for c in checks if not c.ok]
    console.print(f"{len(checks) - len(failed)} of {len(checks)} passed" + (f"; failed: {', '.join(failed)}"
                                                                              if failed else ""))


@dataclass
class IntegrationReport:
    stack: str
    expires_at: str
    up: OperationReport | None = None
    checks: list[CheckResult] = field(default_factory=list)
    cleanup: Cleanup | None = None

    @property
    def passed(self) -> bool:
        return (
            self.up is not None and self.up.ok and bool(self.checks) and checks_passed(self.checks)
            and self.cleanup is not None and self.cleanup.removed
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "result": "passed" if self.passed else "failed",
            "up": self.up.to_json() if self.up else None,
            "checks": [c.to_json() for c in self.checks],
            "cleanup": self.cleanup.to_json() if self.cleanup else None,
        }

    def render(self) -> None:
        console = stdout()
        if self.up:
            render_report(self.up, console)
        if self.checks:
            render_checks(self.checks, console)
        if self.cleanup:
            render_teardown(self.cleanup.teardown, console)
            if self.cleanup.destroy:
                render_report(self.cleanup.destroy, console)
            console.print(f"stack {self.stack}: " + ("destroyed and removed" if self.cleanup.removed else
                          f"NOT removed; it expires at {self.expires_at} and `env reap` will retry"))
        console.print(f"\ntest {self.stack}: {'PASSED' if self.passed else 'FAILED'}")


class IntegrationRun:
    """One run: ``execute`` creates the stack and guarantees the clean-up in ``finally``."""

    def __init__(
        self,
        ws: LocalWorkspace,
        meta: EnvMetadata,
        config: dict[str, Any],
        policy: tuple[Path, Path],
        plan: CheckPlan,
        kubectl_for: KubectlFactory,
        poller: Poller,
        progress: Progress,
    ):
        self.ws, self.meta, self.config, self.policy = ws, meta, config, policy
        self.plan, self.kubectl_for, self.poller, self.progress = plan, kubectl_for, poller, progress
        self.report = IntegrationReport(stack=meta.stack, expires_at=format_time(meta.expires_at))

    def execute(self) -> IntegrationReport:
        stack = Stack.create(self.meta.stack, self.ws)
        try:
            for key, value in self.meta.to_tags().items():
                stack.set_tag(key, value)
            stack.set_all_config({k: ConfigValue(value=v) for k, v in config_strings(self.config).items()})
            self.report.up = run_operation(stack, "up", on_output=self.progress, policy=self.policy)
            if self.report.up.ok:
                kubeconfig = self.report.up.outputs.get("kubeconfig")
                if not kubeconfig:
                    self.report.checks = [CheckResult("kubeconfig output", False, "the stack exported no kubeconfig")]
                else:
                    with kubeconfig_file(kubeconfig) as path:
                        self.report.checks = run_checks(self.kubectl_for(path), self.plan, self.poller)
        finally:
            self.report.cleanup = self._cleanup_shielded(stack)
            if sys.exc_info()[0] is not None:  # interrupted or crashed: the summary will not be rendered
                err.print(f"clean-up: stack {self.meta.stack} " + (
                    "destroyed and removed" if self.report.cleanup.removed else
                    f"NOT removed; it expires at {format_time(self.meta.expires_at)} and `env reap` will retry"))
        return self.report

    def _cleanup_shielded(self, stack: Stack) -> Cleanup:
        """Clean-up runs after a first Ctrl-C too (that one cancelled ``up``); a second one stops it at once."""
        try:
            return self._cleanup(stack)
        except KeyboardInterrupt:
            err.print(f"clean-up abandoned: stack {self.meta.stack} remains until it expires at "
                      f"{format_time(self.meta.expires_at)}; `python -m automation env destroy {self.meta.stack}` "
                      "removes it now (after `python -m automation unlock --stack "
                      f"{self.meta.stack}` if it is reported locked)")
            raise

    def _cleanup(self, stack: Stack) -> Cleanup:
        cleanup = Cleanup()
        teardown = clear_cluster(stack, self.kubectl_for)
        cleanup.load_balancers = [name.split("/", 1)[1] for name in teardown.deleted if name.startswith("service/")]
        cleanup.teardown = teardown
        cleanup.warnings.extend(teardown.warnings)
        try:
            cleanup.destroy = destroy_and_remove(stack, on_output=self.progress)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - report, keep the original outcome
            reason = "; ".join(error_lines(exc))
            cleanup.warnings.append(f"destroy failed: {reason}")
            err.print(f"error: destroy of {stack.name} failed: {reason}")
        return cleanup
