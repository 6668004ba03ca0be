"""What a policy pack run finds, and how it fails: plain data, no gRPC (the report and the CLI's
error table read these without loading the pack client)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any


def resource_dict(resource: Any) -> dict[str, Any]:
    """A plan resource (a mapping or a ``PlannedResource``) as a plain mapping of its fields."""
    if isinstance(resource, Mapping):
        return dict(resource)
    if is_dataclass(resource) and not isinstance(resource, type):
        # Shallow: the inputs are only read, and a deep copy per resource is the larger part of marshalling.
        return {name: getattr(resource, name) for name in _field_names(type(resource))}
    raise TypeError(f"expected a plan resource mapping or dataclass, got {type(resource).__name__}")


def urn_of(resource: Any) -> str:
    """A plan resource's URN (a mapping's ``urn``, or the attribute), without copying its fields."""
    return resource["urn"] if isinstance(resource, Mapping) else resource.urn


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, looked up once per class (the check hands every resource over)."""
    return tuple(f.name for f in fields(cls))


class PolicyPackError(RuntimeError):
    """The pack could not be started or answered with an error."""


class PolicyConfigError(ValueError):
    """A policy-pack config the CLI would refuse (or that names policies/properties that do not exist)."""


@dataclass(frozen=True)
class Violation:
    policy_name: str
    enforcement_level: str
    message: str
    description: str
    urn: str

    def __str__(self) -> str:
        where = f" [{self.urn}]" if self.urn else " [stack]"
        return f"{self.enforcement_level.upper()} {self.policy_name}{where}: {self.message}"


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    enforcement_level: str
    kind: str  # "resource" or "stack"
    config_schema: dict[str, Any]
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class PackInfo:
    name: str
    version: str
    policies: dict[str, PolicyInfo]
    initial_config: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class PackReport:
    """Every finding of one run, with the pack and config that produced them."""

    pack: str
    config: str | None
    violations: list[Violation]

    @property
    def by_level(self) -> dict[str, list[Violation]]:
        groups: dict[str, list[Violation]] = {}
        for violation in self.violations:
            groups.setdefault(violation.enforcement_level, []).append(violation)
        return groups

    @property
    def mandatory(self) -> list[Violation]:
        return self.by_level.get("mandatory", [])

    @property
    def advisory(self) -> list[Violation]:
        return self.by_level.get("advisory", [])

    @property
    def has_mandatory(self) -> bool:
        return bool(self.mandatory)

    def to_json(self) -> dict[str, Any]:
        return {
            "pack": self.pack,
            "config": self.config,
            "hasMandatory": self.has_mandatory,
            "violations": [asdict(v) for v in self.violations],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PackReport:
        """The report :meth:`to_json` wrote."""
        return cls(pack=data["pack"], config=data["config"], violations=[Violation(**v) for v in data["violations"]])
