"""``unlock --stack NAME``: clear the lock a dead update left on a stack.

File backend: the driver reads the lock files itself and deletes only those whose holder is gone;
a holder still running on this host is refused (exit 3), one on another host needs ``--force``.
Other backends (S3, GCS, Azure Blob, Pulumi Cloud): the lock cannot be inspected from here, so
``--force`` is required and the CLI's own ``pulumi cancel`` does the clearing (on DIY backends it
deletes every lock of the stack; on Pulumi Cloud it cancels the update on the service).
"""

from __future__ import annotations

import argparse
import json

from automation import exit_codes
from automation.commands._common import add_output_flags, stack_flag
from automation.console import err, stdout
from automation.driver import locks
from automation.errors import DriverError, translate_errors


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "unlock",
        help="clear a stale stack lock left by an update that died",
        description="Show who holds the stack's lock and clear it if its holder is gone. Refuses while the "
        "holder still runs on this host. Exit codes: 0 cleared or not locked, 2 bad command line, 3 still held, "
        "4 no such stack.",
    )
    parser.add_argument("--stack", required=True, type=stack_flag, help="stack name, e.g. dev, env-alice or a test-* stack")
    parser.add_argument("--force", action="store_true",
                        help="clear a lock whose holder cannot be checked from here (another host, or a non-file "
                        "backend); make sure that run is gone first")
    add_output_flags(parser)
    parser.set_defaults(run=_run_unlock)


def _run_unlock(args: argparse.Namespace) -> int:
    from pulumi.automation import Stack

    from automation.driver.workspace import Project, isolated_workspace, pulumi_command, resolve_backend

    project = Project()
    backend = resolve_backend(project, needs_secrets=False)
    with isolated_workspace(project, backend, pulumi_command()) as ws, translate_errors(args.stack, backend.url):
        stack = Stack.select(args.stack, ws)
        if locks.file_backend_root(backend.url) is None:
            return _unlock_remote(args, stack, backend.url)
        held = locks.read_locks(backend.url, project.name, args.stack)
        result = _unlock_files(args, held)
    if args.output == "json":
        print(json.dumps(result, indent=2))
    return exit_codes.OK


def _unlock_files(args: argparse.Namespace, held: list[locks.LockInfo]) -> dict:
    if not held:
        stdout().print(f"stack {args.stack} is not locked")
        return {"stack": args.stack, "locks": [], "removed": []}
    for lock in held:
        alive = lock.holder_alive()
        if alive:
            raise DriverError(
                f"stack {args.stack!r} is {lock.describe()}; not clearing a live lock: wait for it, or stop it "
                f"with `kill -INT {lock.pid}` (the CLI then cancels cleanly and releases the lock)", exit_codes.LOCKED)
        if alive is None and not args.force:
            raise DriverError(
                f"stack {args.stack!r} is {lock.describe()}; check that run is gone, then pass --force",
                exit_codes.LOCKED)
    for lock in held:
        locks.remove(lock)
        err.print(f"removed {lock.where} ({lock.describe()})")
    stdout().print(f"stack {args.stack} unlocked; reconcile its state with the cloud before the next change: "
                   f"python -m automation refresh --stack {args.stack}")
    return {"stack": args.stack, "locks": [lock.to_json() for lock in held], "removed": [lock.where for lock in held]}


def _unlock_remote(args: argparse.Namespace, stack, url: str) -> int:
    if not args.force:
        raise DriverError(
            f"locks of {url} cannot be inspected from here; check that no update of {args.stack!r} is running "
            "(the CLI's 'currently locked' error names its user, host and pid), then pass --force", exit_codes.USAGE)
    stack.cancel()
    if args.output == "json":
        print(json.dumps({"stack": args.stack, "removed": ["all (pulumi cancel)"]}, indent=2))
    else:
        stdout().print(f"stack {args.stack} unlocked with `pulumi cancel`; then: "
                       f"python -m automation refresh --stack {args.stack}")
    return exit_codes.OK
