"""What a test needs from outside the virtual environment, and what happens when it is missing:
a printed skip on a developer's machine, a failure in CI (``CI`` set), where `.ci/run` provides it."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = bool(os.environ.get("CI"))


def missing(reason: str) -> NoReturn:
    """Stop this test: skip with ``reason``, or fail with it in CI."""
    if IN_CI:
        pytest.fail(f"{reason} (required in CI)", pytrace=False)
    pytest.skip(reason)
