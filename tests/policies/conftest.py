"""One pack process per test session (per xdist worker), reconfigured per test as needed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from automation.offline.pack.runner import PolicyPackRunner, Violation

ROOT = Path(__file__).resolve().parents[2]

#: Every policy mandatory, contract and parameters at the pack's defaults.
BASELINE: dict[str, Any] = {"all": "mandatory"}


class Pack:
    """The session's pack, with helpers that return one policy's findings."""

    def __init__(self, runner: PolicyPackRunner):
        self.runner = runner
        self._config: Any = None

    def configure(self, config: Any = None) -> dict[str, Any]:
        self._config = config
        return self.runner.configure(BASELINE if config is None else config)

    def reset(self) -> None:
        if self._config is not None:
            self.configure()

    def analyze(self, resource: dict[str, Any], policy: str | None = None) -> list[Violation]:
        return [v for v in self.runner.analyze(resource) if policy is None or v.policy_name == policy]

    def analyze_stack(self, resources: Iterable[dict[str, Any]], policy: str | None = None) -> list[Violation]:
        return [v for v in self.runner.analyze_stack(list(resources)) if policy is None or v.policy_name == policy]

    def messages(self, resource: dict[str, Any], policy: str) -> list[str]:
        return [v.message for v in self.analyze(resource, policy)]

    def stack_messages(self, resources: Iterable[dict[str, Any]], policy: str) -> list[str]:
        return [v.message for v in self.analyze_stack(resources, policy)]


@pytest.fixture(scope="session")
def _runner() -> Iterator[PolicyPackRunner]:
    with PolicyPackRunner(env={"LLM_PLATFORM_POLICY_STRICT": "1"}) as runner:
        runner.configure(BASELINE)
        yield runner


@pytest.fixture
def pack(_runner: PolicyPackRunner) -> Iterator[Pack]:
    """The running pack at the baseline config; a test that reconfigures it is reset afterwards."""
    helper = Pack(_runner)
    yield helper
    helper.reset()


def one(messages: list[str], *fragments: str) -> str:
    """The single finding, checked to contain every fragment (so tests name the exact finding)."""
    assert len(messages) == 1, f"expected exactly one finding, got {len(messages)}: {messages}"
    for fragment in fragments:
        assert fragment in messages[0], f"{fragment!r} not in finding: {messages[0]}"
    return messages[0]


def engine_config(config: dict[str, Any]) -> str:
    """``PULUMI_CONFIG`` as the engine sets it for a policy pack: every value a string, objects as
    their JSON text (pulumi/pulumi sdk/go/common/resource/plugin/analyzer_plugin.go, constructConfig)."""
    return json.dumps({key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()})


def stack_yaml_config(stack: str) -> dict[str, Any]:
    """The ``config`` of ``Pulumi.<stack>.yaml``."""
    return yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
