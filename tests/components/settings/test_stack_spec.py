"""Top-level settings as a specification: AWS tag keys (1-128 characters, not aws:) and a failed
required key that does not hide the cross-field problems of the other keys."""

from __future__ import annotations

import pytest

from automation.stacks import read_stack_config
from components.capacity_check import parse_settings
from components.settings import SettingsError
from tests.support.config_changes import with_changes

DEV, PROD = read_stack_config("dev"), read_stack_config("prod")


def problems(base: dict, **changes) -> list[str]:
    try:
        parse_settings(with_changes(base, changes))
    except SettingsError as error:
        return [str(p) for p in error.problems]
    return []


@pytest.mark.parametrize("key, ok", [("k" * 128, True), ("k" * 129, False), ("team", True), ("aws:team", False),
                                     ("AWS:team", False), ("cost center", True)])
def test_tag_keys(key, ok):
    found = problems(DEV, tags={key: "x"})
    assert found == ([] if ok else [
        f'llm-platform:tags.{key}: got "x": not an AWS tag key: 1-128 letters, digits, spaces and '
        "_ . : / = + - @, not starting with aws:"])


def test_a_failed_system_pool_still_lets_the_other_keys_cross_checks_run():
    """prod with a bad systemPool and an endpoint open to the world: both are reported in one round."""
    found = problems(PROD, systemPool__scaling__minSize=1,
                     endpoint={"publicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]})
    assert [p.split(":", 2)[1] for p in found] == ["systemPool.scaling", "endpoint.publicAccessCidrs"]
