"""``pack-config write|check [--stack S]``: generate ``policies/config/<stack>.json``.

The files are the program's facts the pack takes as config (contract keys, agent placement, metric
prefixes) plus each stack's hand-chosen levels and parameters (``automation/offline/pack/config.py``,
``STACK_CHOICES``). The pack is started once to report which policy takes which property.
"""

from __future__ import annotations

import argparse

from automation import exit_codes
from automation.commands._common import stack_flag
from automation.console import stdout
from automation.errors import UsageError


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "pack-config", help="generate the policy pack's per-stack config from the program's facts",
        description="policies/config/STACK.json is generated: the program's contract values into every policy "
        "whose schema takes them, plus the stack's chosen enforcement levels and parameters (STACK_CHOICES in "
        "automation/offline/pack/config.py). Exit codes: 0 written or up to date, 1 a file differs (check), "
        "2 bad command line.",
    )
    actions = parser.add_subparsers(dest="pack_config_verb", required=True, metavar="ACTION")
    for name, help_text in (("write", "write the files"),
                            ("check", "exit 1 when a committed file differs from what write would write")):
        action = actions.add_parser(name, help=help_text, description=help_text + ".")
        action.add_argument("--stack", action="append", type=stack_flag, metavar="STACK",
                            help="a stack to generate (repeatable; default: every stack with choices)")
        action.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from automation.offline.pack.config import (
        STACK_CHOICES,
        WRITE_COMMAND,
        config_path,
        generate,
        render,
        stacks,
    )
    from automation.offline.pack.runner import PolicyPackRunner

    chosen = list(dict.fromkeys(args.stack or stacks()))
    unknown = [s for s in chosen if s not in STACK_CHOICES]
    if unknown:
        raise UsageError(f"--stack: no pack choices for {', '.join(unknown)}; stacks with choices: "
                         f"{', '.join(stacks())} (STACK_CHOICES in automation/offline/pack/config.py)")
    with PolicyPackRunner() as pack:
        schemas = {name: policy.config_schema for name, policy in pack.info().policies.items()}
    console = stdout()
    stale = []
    for stack in chosen:
        path, text = config_path(stack), render(generate(stack, schemas))
        current = path.read_text() if path.is_file() else None
        if current == text:
            console.print(f"{path.relative_to(path.parents[2])}: up to date")
        elif args.pack_config_verb == "write":
            path.write_text(text)
            console.print(f"{path.relative_to(path.parents[2])}: written")
        else:
            stale.append(stack)
            console.print(f"{path.relative_to(path.parents[2])}: differs from the program's facts and STACK_CHOICES; "
                          f"run `{WRITE_COMMAND} --stack {stack}`")
    return exit_codes.FAILED if stale else exit_codes.OK
