"""``settings-doc write|check``: docs/settings.md and README's settings table, from the settings models.

Every settings field documents itself (``Field(description=...)``, its type, default and bounds);
``automation/settings_reference.py`` renders them. ``write`` regenerates both files, ``check`` exits 1
naming each file that differs, so a setting cannot change without its documentation.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from automation import exit_codes
from automation.console import stdout
from automation.errors import DriverError
from automation.paths import ROOT


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "settings-doc", help="generate the settings reference (docs/settings.md, README's table) from the models",
        description="docs/settings.md and the table between README.md's settings-table markers are generated from "
        "the settings models' field descriptions, types, defaults and bounds (components/settings/). Exit codes: "
        "0 written or up to date, 1 a file differs (check), 2 bad command line or README without its markers.",
    )
    actions = parser.add_subparsers(dest="settings_doc_verb", required=True, metavar="ACTION")
    for name, help_text in (("write", "write the files"),
                            ("check", "exit 1 when a committed file differs from what write would write")):
        action = actions.add_parser(name, help=help_text, description=help_text + ".")
        action.add_argument("--root", type=_checkout, default=ROOT, metavar="DIR",
                            help="the checkout whose README.md and docs/ are written or checked (default: this one)")
        action.set_defaults(run=_run)


def _checkout(text: str) -> Path:
    path = Path(text)
    if not (path / "README.md").is_file():
        raise argparse.ArgumentTypeError(f"{text[:200]!r} holds no README.md")
    return path


def _run(args: argparse.Namespace) -> int:
    from automation.settings_reference import WRITE_COMMAND, MissingMarkers, generated

    try:
        files = generated(args.root)
    except MissingMarkers as exc:
        raise DriverError(str(exc), exit_codes.USAGE) from None
    console = stdout()
    stale = []
    for file in files:
        if not file.stale:
            console.print(f"{file.path.as_posix()}: up to date")
        elif args.settings_doc_verb == "write":
            (args.root / file.path).parent.mkdir(parents=True, exist_ok=True)
            (args.root / file.path).write_text(file.text)
            console.print(f"{file.path.as_posix()}: written")
        else:
            stale.append(file)
            console.print(f"{file.path.as_posix()}: differs from the settings models; run `{WRITE_COMMAND}`")
    return exit_codes.FAILED if stale else exit_codes.OK
