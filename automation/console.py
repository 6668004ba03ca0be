"""The CLI's consoles: results on stdout, errors and notes on stderr, progress lines to either.

Every console prints text as given (markup and emoji codes off): stack names, key paths such as
``llm-platform:gpuPools[interactive]``, values and the Pulumi CLI's own output reach the terminal
verbatim. Emphasis is a style on a ``rich.text.Text``, never inline markup.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console

#: Width of result tables when stdout is a pipe or a CI log (the check's pool table needs about 200).
PIPE_WIDTH = 220

#: Errors, warnings and notes: stderr, so stdout stays parseable (``--output json``).
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


def stdout() -> Console:
    """Console for results; as wide as the terminal, or :data:`PIPE_WIDTH` when stdout is not one."""
    console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
    return console if console.is_terminal else Console(highlight=False, soft_wrap=True, markup=False, emoji=False, width=PIPE_WIDTH)


def on(stream: TextIO) -> Console:
    """Console drawing on ``stream`` (the live progress line goes wherever progress lines go)."""
    return Console(file=stream, highlight=False, soft_wrap=True, markup=False, emoji=False)


@dataclass(frozen=True)
class ProgressWriter:
    """Writes progress lines to ``stream``, each flushed; live progress draws on the same ``stream``."""

    stream: TextIO

    def __call__(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def progress_writer(json_mode: bool) -> ProgressWriter:
    """Streams the CLI's progress lines: stdout for people, stderr when stdout carries JSON."""
    return ProgressWriter(sys.stderr if json_mode else sys.stdout)
