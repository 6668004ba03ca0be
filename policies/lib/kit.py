"""Small builders so every policy module declares only its checks.

A check is a generator: resource checks yield messages, stack checks yield ``(message, urn)``.
The builders turn inputs into plain data (:func:`lib.values.plain`), merge config defaults and the
stack's own configuration (:mod:`lib.stack_config`), filter by resource type, and attach the config
schema, so no policy repeats that plumbing. They use pulumi_policy's public API only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from lib.contract_config import contract_schema
from lib.pod_templates import (
    CUSTOM_WORKLOADS,
    CUSTOM_WORKLOADS_SCHEMA,
    PodTemplate,
    pod_templates,
    workload_paths,
)
from lib.resources import Resource
from lib.stack_config import STACK_PARAMS, StackConfigError
from lib.values import contains_unknown, plain

#: Set by the pack's tests so a bug in a check fails loudly instead of becoming a finding.
STRICT_ENV = "LLM_PLATFORM_POLICY_STRICT"

ResourceCheck = Callable[[Resource, dict[str, Any]], Iterable[str]]
StackCheck = Callable[["Stack", dict[str, Any]], Iterable[tuple[str, str | None]]]

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY


class Stack:
    """All resources of a stack, each converted to plain data when a check first reads it, with
    parent links by URN. One per stack policy and AnalyzeStack call (pulumi_policy hands every
    stack policy resources of its own)."""

    def __init__(self, resources: list[Resource]) -> None:
        self.resources = resources
        self.by_urn = {r.urn: r for r in resources}
        self._derived: dict[tuple[str, Any], Any] = {}
        self._shape: tuple[tuple[str, str, str | None], ...] | None = None

    def of_type(self, *types: str | Iterable[str]) -> list[Resource]:
        wanted: set[str] = set()
        for t in types:
            wanted.update([t] if isinstance(t, str) else t)
        return [r for r in self.resources if r.type in wanted]

    def derived(self, name: str, key: Any, compute: Callable[[], Any], *, reads: Iterable[str] | None = None) -> Any:
        """``compute()``, worked out once for this stack; readers share it and must not change it.
        ``key``: what else the result depends on.

        ``reads``: the resource types whose properties ``compute`` reads (besides every resource's
        URN, type and parent). Given, the result is also shared with the other stack policies of
        the same AnalyzeStack call: pulumi_policy hands each of them resources of its own, built
        again from the request, so the result is found by content (:class:`_SharedByContent`).
        """
        entry = (name, key)
        if entry not in self._derived:
            if reads is None:
                self._derived[entry] = compute()
            else:
                content = tuple(repr(r.props) for r in self.of_type(frozenset(reads)))
                self._derived[entry] = _SHARED.get(self.shape, (name, key, content), compute)
        return self._derived[entry]

    @property
    def shape(self) -> tuple[tuple[str, str, str | None], ...]:
        """Every resource's URN, type and parent, in order."""
        if self._shape is None:
            self._shape = tuple((r.urn, r.type, r.parent) for r in self.resources)
        return self._shape

    def ancestors(self, resource: Resource) -> list[str]:
        """URNs of the resource's ancestors present in the stack, nearest first."""
        chain: list[str] = []
        parent = resource.parent
        while parent and parent in self.by_urn and parent not in chain:
            chain.append(parent)
            parent = self.by_urn[parent].parent
        return chain


class _SharedByContent:
    """Results derived from a stack, kept for the next stack policy handed an equal stack.

    The key is the stack's shape (every URN, type and parent) and, per result, its name, its other
    inputs and the plain properties (``repr``) of the resources it reads; a stack of another shape
    drops what was kept. Equal keys mean equal inputs, so a result found here is the one
    ``compute`` would give.
    """

    #: Results kept per shape: a few per AnalyzeStack call; more only from calls with equal shapes.
    LIMIT = 64

    def __init__(self) -> None:
        self._shape: Any = None
        self._results: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, shape: Any, key: Any, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if shape != self._shape:
                self._shape, self._results = shape, {}
            if key in self._results:
                return self._results[key]
        result = compute()
        with self._lock:
            if shape == self._shape:
                if len(self._results) >= self.LIMIT:
                    self._results.clear()
                self._results[key] = result
        return result


_SHARED = _SharedByContent()


class StackResource(Resource):
    """A resource of a stack policy's :class:`Stack`, its properties converted on first read (a
    policy reads few of a stack's resources)."""

    def __init__(self, resource: PolicyResource) -> None:
        self.type, self.name, self.urn = resource.resource_type, resource.name, resource.urn
        self.parent = resource.parent.urn if resource.parent else resource.opts.parent
        self._source: Any = resource.props
        self._plain: dict[str, Any] | None = None

    @property
    def props(self) -> dict[str, Any]:
        if self._plain is None:
            self._plain = plain(self._source)
        return self._plain

    @props.setter
    def props(self, value: dict[str, Any]) -> None:
        """Writable, as a :class:`Resource`'s ``props`` is."""
        self._plain = value


def _strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


def _run(name: str, produce: Callable[[], list[Any]], props: Iterable[Any], report: ReportViolation) -> list[Any]:
    """Run a check; a crash on inputs with unknowns is "can't judge", any other crash a finding.

    A pack that raises fails the whole preview with a stack trace; a finding names the policy and
    the error, and never blocks a preview merely because values are not known yet.
    """
    try:
        return produce()
    except Exception as error:  # noqa: BLE001 - see docstring
        if _strict():
            raise
        if any(contains_unknown(p) for p in props):
            return []
        report(f"Policy {name} could not evaluate this input ({type(error).__name__}: {error}); "
               f"report it to the platform team with the resource definition.", None)
        return []


def _schema(
    policy: str, params: dict[str, dict[str, Any]] | None, contract: Iterable[str], required: list[str] | None
) -> tuple[PolicyConfigSchema | None, dict[str, Any]]:
    """The policy's config schema, and the fallback of each parameter the stack's configuration can
    give (:data:`lib.stack_config.STACK_PARAMS`), whose default the schema does not advertise."""
    properties = {**contract_schema(*contract), **(params or {})}
    fallbacks: dict[str, Any] = {}
    for param, spec in list(properties.items()):
        if (policy, param) in STACK_PARAMS:
            spec = dict(spec)
            fallback = spec.pop("default", None)
            fallbacks[param] = fallback
            source = STACK_PARAMS[(policy, param)].source
            spec["description"] = (f"{spec.get('description', '').rstrip()} Unset: the stack's {source} "
                                   f"(PULUMI_CONFIG), else {fallback}.").lstrip()
            properties[param] = spec
    schema = PolicyConfigSchema(properties=properties, required=required) if properties else None
    return schema, fallbacks


def _config(policy: str, schema: PolicyConfigSchema | None, fallbacks: dict[str, Any], given: Any) -> dict[str, Any]:
    """Schema defaults, then the stack's configuration for the parameters it can give, then the
    policy's own config (``given``)."""
    config = {k: v["default"] for k, v in (schema.properties if schema else {}).items() if "default" in v}
    explicit = plain(given) or {}
    for param, fallback in fallbacks.items():
        if param not in explicit:
            value = STACK_PARAMS[(policy, param)].read()
            config[param] = fallback if value is None else value
    config.update(explicit)
    return config


def _configured(policy: str, schema: PolicyConfigSchema | None, fallbacks: dict[str, Any], given: Any,
                report: ReportViolation) -> dict[str, Any] | None:
    """:func:`_config`; ``None``, and a finding that names the key, when the stack's configuration
    cannot be read."""
    try:
        return _config(policy, schema, fallbacks, given)
    except StackConfigError as error:
        report(f"Policy {policy} cannot read the stack's configuration: {error}.", None)
        return None


def resource_policy(
    *,
    name: str,
    description: str,
    types: Iterable[str],
    check: ResourceCheck,
    enforcement: EnforcementLevel = MANDATORY,
    params: dict[str, dict[str, Any]] | None = None,
    contract: Iterable[str] = (),
    required: list[str] | None = None,
    custom_workloads: bool = False,
) -> ResourceValidationPolicy:
    """``custom_workloads``: the policy also takes the kinds its config lists under ``customWorkloads``.

    pulumi_policy calls every resource policy for every resource; one that does not take the
    resource's type returns before it reads the resource's properties or its config.
    """
    wanted = frozenset(types)
    if custom_workloads:
        params = {**(params or {}), **CUSTOM_WORKLOADS_SCHEMA}
    schema, fallbacks = _schema(name, params, contract, required)

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in wanted and not custom_workloads:
            return
        given = args.get_config()
        if args.resource_type not in wanted and args.resource_type not in ((given or {}).get(CUSTOM_WORKLOADS) or {}):
            return
        config = _configured(name, schema, fallbacks, given, report)
        if config is None:
            return
        resource = Resource(args.resource_type, args.name, args.urn, plain(args.props), args.opts.parent)
        for message in _run(name, lambda: list(check(resource, config)), [resource.props, config], report):
            report(message, None)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=enforcement, config_schema=schema
    )


def stack_policy(
    *,
    name: str,
    description: str,
    check: StackCheck,
    enforcement: EnforcementLevel = MANDATORY,
    params: dict[str, dict[str, Any]] | None = None,
    contract: Iterable[str] = (),
    required: list[str] | None = None,
    custom_workloads: bool = False,
) -> StackValidationPolicy:
    if custom_workloads:
        params = {**(params or {}), **CUSTOM_WORKLOADS_SCHEMA}
    schema, fallbacks = _schema(name, params, contract, required)

    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        stack = Stack([StackResource(r) for r in args.resources])
        config = _configured(name, schema, fallbacks, args.get_config(), report)
        if config is None:
            return
        # Read only if the check crashes, to tell "inputs not known yet" from a bug.
        props = (r.props for r in stack.resources)
        for message, urn in _run(name, lambda: list(check(stack, config)), props, report):
            report(message, urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=enforcement, config_schema=schema
    )


def stack_workloads(stack: Stack, config: dict[str, Any]) -> list[PodTemplate]:
    """Every pod template in the stack: built-in workload kinds and the config's ``customWorkloads``
    (found once per AnalyzeStack call for the same kinds; the templates are shared)."""
    paths = workload_paths(config)
    key = tuple(sorted(paths.items()))
    return list(stack.derived("stack workloads", key, lambda: [
        t for r in stack.of_type(frozenset(paths)) for t in pod_templates(r, config)], reads=paths))
