"""Command line of ``python -m automation``: one small declare/run pair per verb."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from automation import errors, exit_codes
from automation.commands import (
    catalog,
    env,
    images,
    integration,
    pack_config,
    settings_doc,
    stack_ops,
    unlock,
    versions,
)
from automation.console import err, stdout
from automation.errors import UsageError


def _declare_check(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "check",
        help="offline check of a stack: settings, plan under mocks, manifests, cost summary",
        description="Run the program for a stack under Pulumi's mock runtime (no cloud account, no CLI), "
        "write DIR/plan.json and DIR/manifests/, and print a summary.",
    )
    parser.add_argument("--stack", required=True, type=_stack_name, help="stack name; reads Pulumi.STACK.yaml")
    parser.add_argument("--stack-file", type=Path, help="read this stack file instead of Pulumi.STACK.yaml")
    parser.add_argument("--out", type=_output_dir, help="output directory (default: build/STACK)")
    parser.add_argument(
        "--policy-config", type=Path, help="policy pack config (default: policies/config/STACK.json)"
    )
    parser.add_argument("--output", choices=("text", "json"), default="text", help="summary format on stdout")
    parser.set_defaults(run=_run_check)


def _stack_name(text: str) -> str:
    from automation.commands._common import stack_flag

    return stack_flag(text)


def _output_dir(text: str) -> Path:
    from automation.commands._common import output_dir

    return output_dir(text)


def _run_check(args: argparse.Namespace) -> int:
    from automation.offline.check import fewer_collections, run_check

    _program_log_to_stderr()
    with fewer_collections():  # through the report too: the heap is at its largest
        result = run_check(args.stack, args.out, stack_file=args.stack_file, policy_config=args.policy_config)
        return print_check(result, args.output)


def print_check(result, output: str = "text") -> int:
    """The check's result on stdout, as text for people or one JSON document for scripts; its exit code."""
    from automation.offline.report import render, render_policies

    if output == "json":
        print(json.dumps(
            {"summary": result.summary.to_json(), "policies": result.policies.to_json(), "plan": str(result.plan_path),
             "budgetUnknown": result.budget_unknown, "seconds": result.seconds},
            indent=2,
        ))
    else:
        console = stdout()
        render(result.summary, console)
        render_policies(result.policies, console)
        console.print(f"plan: {result.plan_path}; manifests: {len(result.manifest_paths)} file(s) in "
                      f"{result.plan_path.parent / 'manifests'}")
        if result.seconds:
            seconds = result.seconds
            console.print(f"recorded in {seconds['record']:.2f} s (the policy pack analyzing beside it), "
                          f"summary and manifests in {seconds['summary']:.2f} s (the pack analyzing the stack beside "
                          f"them), {seconds['analyze']:.2f} s more for the pack's answers, files written in "
                          f"{seconds['write']:.2f} s")
    return result.exit_code


def _program_log_to_stderr() -> None:
    """The program's ``pulumi.log`` lines (e.g. a secret stored in plain text) reach the root logger
    under mocks; show them as the CLI would: ``warning: ...`` on stderr, text as given."""
    import logging

    class _Line(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"{record.levelname.lower()}: {record.getMessage()}"

    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_Line())
        root.addHandler(handler)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse hook
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m automation",
        description="Run llm-platform stacks: offline checks, previews and updates, self-service environments.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    _declare_check(verbs)
    stack_ops.declare(verbs)
    env.declare(verbs)
    integration.declare(verbs)
    unlock.declare(verbs)
    images.declare(verbs)
    catalog.declare(verbs)
    pack_config.declare(verbs)
    settings_doc.declare(verbs)
    versions.declare(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run one verb, and end every known failure through the error table (``errors.OUTCOMES``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = argparse.Namespace(command_line="python -m automation " + shlex.join(argv))
    try:
        build_parser().parse_args(argv, namespace=args)
        from automation.driver.interrupts import cancel_grace, guard_signals

        try:
            grace = cancel_grace()
        except ValueError as exc:
            raise errors.DriverError(str(exc), exit_codes.USAGE) from None
        with guard_signals(notify=err.print, grace=grace):
            return args.run(args)
    except BaseException as exc:  # noqa: B036 - the table decides; anything it does not know is re-raised
        code = errors.report(exc, args)
        if code is None:
            raise
        return code


if __name__ == "__main__":
    sys.exit(main())
