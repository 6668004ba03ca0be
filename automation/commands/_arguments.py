"""Argument types shared by the verbs that talk to registries and other sources over the network
(``images resolve``, ``versions outdated``): one line each for argparse to print, exit 2."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from automation.images.routing import OverrideError, parse_override


def host_override(text: str) -> tuple[str, str]:
    """``HOST=URL`` (``--registry-override``, ``--source-override``)."""
    try:
        return parse_override(text)
    except OverrideError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_up_to(limit: float) -> Callable[[str], float]:
    """A ``--timeout`` type: a number of seconds above 0 and at most ``limit``."""

    def seconds(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 and at most {limit:g} seconds")
        return value

    return seconds
