"""Running one Pulumi operation and summarising it: changes, policy violations, errors.

The CLI's progress streams through ``on_output``; its structured engine events (summary, policy
violations, error diagnostics) are collected through ``on_event`` for the final summary.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi.automation import EngineEvent, LocalWorkspace, Stack
from pulumi.automation.errors import CommandError, ConcurrentUpdateError, StackNotFoundError
from rich.console import Console

from automation.console import err
from automation.driver import interrupts, locks
from automation.driver.environments import EnvMetadata
from automation.driver.progress import OperationProgress
from automation.driver.teardown import TeardownReport
from automation.errors import error_lines

Progress = Callable[[str], None]
#: How long cleanup waits for an interrupted update to release the stack lock.
LOCK_WAIT_SECONDS = 1800.0
LOCK_POLL_SECONDS = 15.0


@dataclass(frozen=True)
class PolicyViolation:
    pack: str
    policy: str
    level: str
    message: str
    urn: str

    def to_json(self) -> dict[str, str]:
        return {"pack": self.pack, "policy": self.policy, "level": self.level, "message": self.message, "urn": self.urn}


@dataclass
class OperationReport:
    stack: str
    operation: str
    succeeded: bool = True
    changes: dict[str, int] = field(default_factory=dict)
    violations: list[PolicyViolation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def mandatory(self) -> list[PolicyViolation]:
        return [v for v in self.violations if v.level == "mandatory"]

    @property
    def ok(self) -> bool:
        return self.succeeded and not self.mandatory

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "operation": self.operation,
            "result": "succeeded" if self.ok else "failed",
            "changes": self.changes,
            "policyViolations": [v.to_json() for v in self.violations],
            "errors": self.errors,
            "outputs": sorted(self.outputs),
            "durationSeconds": self.seconds,
        }


class EventCollector:
    """``on_event`` callback: keeps the summary, policy violations and error diagnostics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.changes: dict[str, int] = {}
        self.violations: list[PolicyViolation] = []
        self.errors: list[str] = []

    def __call__(self, event: EngineEvent) -> None:
        with self._lock:
            if event.summary_event:
                # Keyed by the engine's step names (plain strings on the wire; OpType is a str).
                self.changes = {op: count for op, count in (event.summary_event.resource_changes or {}).items()}
            if event.policy_event:
                p = event.policy_event
                violation = PolicyViolation(
                    p.policy_pack_name, p.policy_name, p.enforcement_level, p.message.strip(), p.resource_urn or ""
                )
                if violation not in self.violations:
                    self.violations.append(violation)
            if event.diagnostic_event and event.diagnostic_event.severity == "error":
                message = event.diagnostic_event.message.strip().removeprefix("error:").strip()
                if message and message not in self.errors:
                    self.errors.append(message)


def run_operation(
    stack: Stack,
    operation: str,
    *,
    on_output: Progress,
    policy: tuple[Path, Path] | None = None,
) -> OperationReport:
    """``preview``/``up`` (with the policy pack and its config), ``destroy`` or ``refresh``.

    A failed CLI run becomes a failed report; a held lock or a missing stack is raised so the
    caller can say which it was.
    """
    collector = EventCollector()
    progress = OperationProgress(operation, stack.name, _resource_count(stack) if operation in ("destroy", "refresh")
                                 else None, on_output, getattr(on_output, "stream", sys.stdout))

    def on_event(event: EngineEvent) -> None:
        collector(event)
        progress.event(event)

    kwargs: dict[str, Any] = {"on_output": progress.line, "on_error": progress.line, "on_event": on_event}
    if policy is not None and operation in ("preview", "up"):
        kwargs["policy_packs"] = [str(policy[0])]
        kwargs["policy_pack_configs"] = [str(policy[1])]
    report = OperationReport(stack=stack.name, operation=operation)
    signals_before = interrupts.mark()
    progress.start()
    try:
        result = getattr(stack, operation)(**kwargs)
    except interrupts.Interrupted as exc:
        report.succeeded = False
        report.changes, report.errors, report.violations = collector.changes, collector.errors, collector.violations
        exc.operation, exc.stack, exc.report = operation, stack.name, report
        raise
    except (ConcurrentUpdateError, StackNotFoundError):
        raise
    except CommandError as exc:
        report.succeeded = False
        report.errors = collector.errors or error_lines(exc)
        report.changes = collector.changes
    except RuntimeError as exc:  # the SDK's "summary event never found"
        report.succeeded = False
        report.errors = collector.errors or [str(exc)]
    else:
        summary = getattr(result, "summary", None)
        report.changes = dict(getattr(result, "change_summary", None) or getattr(summary, "resource_changes", None)
                              or collector.changes)
        report.outputs = {k: v.value for k, v in (getattr(result, "outputs", None) or {}).items()}
    finally:
        progress.stop()
        report.seconds = round(progress.clock() - progress.started, 1)
    report.violations = collector.violations
    interrupts.raise_if_interrupted(operation, stack.name, report, since=signals_before)
    return report


def render_report(report: OperationReport, console: Console) -> None:
    verdict = "succeeded" if report.ok else "failed"
    if report.succeeded and report.mandatory:
        verdict = f"failed ({len(report.mandatory)} mandatory policy violation(s))"
    console.print(f"\n{report.operation} {report.stack}: {verdict}")
    changes = ", ".join(f"{n} {op}" for op, n in sorted(report.changes.items()) if n) or "none"
    console.print(f"  changes: {changes}")
    console.print(f"  duration: {report.seconds:.0f}s")
    if not report.violations:
        if report.operation in ("preview", "up"):
            console.print("  policy violations: none")
    else:
        levels = sorted({v.level for v in report.violations})
        counts = ", ".join(f"{sum(v.level == lv for v in report.violations)} {lv}" for lv in levels)
        console.print(f"  policy violations: {counts}")
        for v in sorted(report.violations, key=lambda v: (v.level != "mandatory", v.policy, v.urn)):
            console.print(f"    {v.level:<9} {v.pack}/{v.policy}  {v.urn}")
            for line in v.message.splitlines():
                console.print(f"              {line}")
    for line in report.errors:
        console.print(f"  error: {line}")
    render_summary_table([report], console)


def render_summary_table(reports: list[OperationReport], console: Console) -> None:
    """The closing table: one row per operation with its result, changes, violations and duration."""
    from rich.table import Table
    from rich.text import Text

    table = Table("RESULT", "OPERATION", "STACK", "CHANGES", "VIOLATIONS", "DURATION", box=None, pad_edge=False)
    for report in reports:
        changes = ", ".join(f"{n} {op}" for op, n in sorted(report.changes.items()) if n) or "none"
        violations = f"{len(report.mandatory)} mandatory, {len(report.violations) - len(report.mandatory)} other"
        table.add_row(*(Text(cell) for cell in (
            "ok" if report.ok else "FAILED", report.operation, report.stack, changes, violations,
            f"{report.seconds:.0f}s")))
    console.print(table)


def destroy_and_remove(
    stack: Stack,
    *,
    on_output: Progress,
    lock_wait: float = LOCK_WAIT_SECONDS,
    poll: float = LOCK_POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> OperationReport:
    """``pulumi destroy`` then ``pulumi stack rm``; waits out a lock held by an interrupted update.

    The stack is removed only when destroy succeeded, so a failure leaves it (and its expiry tag)
    for ``env reap`` to retry.
    """
    waited = 0.0
    while True:
        try:
            report = run_operation(stack, "destroy", on_output=on_output)
            break
        except ConcurrentUpdateError as exc:
            held = locks.from_error(str(exc))
            if waited >= lock_wait or (held and all(lock.stale for lock in held)):
                raise  # a dead holder never releases its lock: waiting would not help
            err.print(f"stack {stack.name} is locked (an interrupted update is still exiting); retrying in {poll:.0f}s")
            sleep(poll)
            waited += poll
    if report.succeeded:
        stack.workspace.remove_stack(stack.name)
    return report


def clear_cluster(stack: Stack, kubectl_for: Callable[[Path], Any] | None) -> TeardownReport:
    """Karpenter nodes and load balancers removed through the stack's ``kubeconfig`` output, before
    ``destroy``; problems become warnings, because the destroy must still be attempted."""
    from automation.driver.postdeploy import KubectlError, kubeconfig_file
    from automation.driver.teardown import TeardownReport, prepare_destroy

    report = TeardownReport()
    if kubectl_for is None:
        return report
    try:
        kubeconfig = stack.outputs().get("kubeconfig")
    except Exception as exc:  # noqa: BLE001 - any failure here must not stop the destroy
        report.warnings.append(f"could not read outputs: {'; '.join(error_lines(exc))}")
        return report
    if kubeconfig is None or not kubeconfig.value:
        return report  # no cluster (yet): nothing inside it to remove
    try:
        with kubeconfig_file(kubeconfig.value) as path:
            report = prepare_destroy(kubectl_for(path))
    except (KubectlError, ValueError) as exc:
        report.warnings.append(f"could not delete LoadBalancer Services, Ingresses and Karpenter nodes ({exc}); "
                               "destroying anyway")
    for warning in report.warnings:
        err.print(f"warning: {warning}")
    for leftover in report.leftovers:
        err.print(f"warning: still in the cluster before destroy: {leftover} (its AWS resources may block the "
                  "VPC's deletion)")
    return report


def render_teardown(report: TeardownReport, console: Console) -> None:
    if report.deleted:
        console.print(f"\nremoved before destroy: {', '.join(report.deleted)}")
    if report.leftovers:
        console.print(f"could not remove: {', '.join(report.leftovers)}")


def _resource_count(stack: Stack) -> int | None:
    """Resources in the stack's state (the total a destroy or refresh works through), if known."""
    try:
        for summary in stack.workspace.list_stacks():
            if summary.name.rsplit("/", 1)[-1] == stack.name:
                return summary.resource_count or None
    except CommandError:
        return None
    return None


@dataclass(frozen=True)
class ManagedStack:
    meta: EnvMetadata
    updating: bool
    resources: int | None

    def status(self, now) -> str:
        if self.updating:
            return "updating"
        return "expired" if self.meta.expired(now) else "active"


def managed_stacks(workspace: LocalWorkspace) -> list[ManagedStack]:
    """Every stack in the backend that carries this driver's env/test tags, by name."""
    found: list[ManagedStack] = []
    for summary in workspace.list_stacks():
        name = summary.name.rsplit("/", 1)[-1]
        try:
            tags = workspace.list_tags(name)
        except CommandError as exc:
            err.print(f"warning: skipping stack {name}: cannot read its tags ({'; '.join(error_lines(exc))})")
            continue
        meta = EnvMetadata.from_tags(name, tags)
        if meta is not None:
            found.append(ManagedStack(meta, bool(summary.update_in_progress), summary.resource_count))
    return sorted(found, key=lambda m: m.meta.stack)
