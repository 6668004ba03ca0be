"""Small builders so every policy module declares only its checks.

A check is a generator: resource checks yield messages, stack checks yield ``(message, urn)``.
The builders turn inputs into plain data (see :mod:`shapes`), merge config defaults, filter by
resource type, and attach the config schema, so no policy repeats that plumbing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from lib.contract_config import contract_schema
from lib.request_cache import changed_since_handed_out, per_request, shared_plain, watch_handed_out
from lib.values import contains_unknown, free_of_unknowns, plain
from lib.resources import Resource
from lib.pod_templates import (
    CUSTOM_WORKLOADS,
    CUSTOM_WORKLOADS_SCHEMA,
    PodTemplate,
    pod_templates,
    workload_paths,
)

#: Every stack policy reads resources of the stack, and every resource policy that applies reads
#: the resource of an Analyze call: each resource's plain properties are converted once and read by
#: all of them. Checks read them and never change them; in strict mode (the pack's tests) a check
#: that changes what it read fails (``_guarded``), so a check that needs to change data copies it
#: first (``copy_plain``).
_plain_props = shared_plain(plain)

#: Set by the pack's tests so a bug in a check fails loudly instead of becoming a finding.
STRICT_ENV = "LLM_PLATFORM_POLICY_STRICT"

ResourceCheck = Callable[[Resource, dict[str, Any]], Iterable[str]]
StackCheck = Callable[["Stack", dict[str, Any]], Iterable[tuple[str, str | None]]]

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY


@dataclass
class Stack:
    """All resources of a stack in plain form, with parent links by URN."""

    resources: list[Resource]

    def __post_init__(self) -> None:
        self.by_urn = {r.urn: r for r in self.resources}

    def of_type(self, *types: str | Iterable[str]) -> list[Resource]:
        wanted: set[str] = set()
        for t in types:
            wanted.update([t] if isinstance(t, str) else t)
        return [r for r in self.resources if r.type in wanted]

    def derived(self, name: str, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, worked out once per request for every stack policy handed the same
        resources (each gets a Stack of its own, of the same objects: ``_kit_resources``), and
        shared: readers must not change it. ``key``: what else the result depends on."""
        resources = self.resources
        made = per_request((name, key, len(resources), id(resources[0]) if resources else None),
                           lambda: (list(resources), compute()))
        if not all(a is b for a, b in zip(made[0], resources)):
            return compute()  # other resources under the same key
        return made[1]

    def ancestors(self, resource: Resource) -> list[str]:
        """URNs of the resource's ancestors present in the stack, nearest first."""
        chain: list[str] = []
        parent = resource.parent
        while parent and parent in self.by_urn and parent not in chain:
            chain.append(parent)
            parent = self.by_urn[parent].parent
        return chain


class _StackResource(Resource):
    """A resource of a stack policy's ``Stack``, its plain props converted on first read (a policy
    reads few of a stack's resources) and shared with the other policies (see ``_plain_props``)."""

    def __init__(self, resource: Any) -> None:  # noqa: D107 - a pulumi_policy PolicyResource
        self.type, self.name, self.urn = resource.resource_type, resource.name, resource.urn
        self.parent = resource.parent.urn if resource.parent else resource.opts.parent
        self._source, self._props = resource.props, None

    @property  # type: ignore[override]
    def props(self) -> dict[str, Any]:
        if self._props is None:
            self._props = _plain_props(self._source)
        return self._props

    def free_of_unknowns(self) -> bool:
        return free_of_unknowns(self._source)


def _kit_resources(resources: list[Any]) -> list[_StackResource]:
    """A stack policy's resources as kit's, made once per request for all its stack policies (the
    analyzer hands each the same resources) and a fresh list for each."""
    key = ("kit stack resources", len(resources), id(resources[0]) if resources else None)
    made = per_request(key, lambda: (resources, [_StackResource(r) for r in resources]))
    if made[0] is not resources and not all(a is b for a, b in zip(made[0], resources)):
        return [_StackResource(r) for r in resources]  # other resources under the same key
    return list(made[1])


def _run(name: str, produce: Callable[[], list[Any]], props: Iterable[Any], report: ReportViolation) -> list[Any]:
    """Run a check; a crash on inputs with unknowns is "can't judge", any other crash a finding.

    A pack that raises fails the whole preview with a stack trace; a finding names the policy and
    the error, and never blocks a preview merely because values are not known yet.
    """
    try:
        if os.environ.get(STRICT_ENV) == "1":
            return _guarded(name, produce, props if isinstance(props, list) else [])
        return produce()
    except Exception as error:  # noqa: BLE001 - see docstring
        if os.environ.get(STRICT_ENV) == "1":
            raise
        if any(contains_unknown(p) for p in props):
            return []
        report(f"Policy {name} could not evaluate this input ({type(error).__name__}: {error}); "
               f"report it to the platform team with the resource definition.", None)
        return []


def _guarded(name: str, produce: Callable[[], list[Any]], handed: list[Any]) -> list[Any]:
    """``produce()``, failing if the check changed the shared properties it was handed (``handed``,
    and what it reads while it runs), in strict mode."""
    watch_handed_out(handed)
    try:
        result = produce()
    finally:
        changed = changed_since_handed_out()
    if changed:
        raise AssertionError(f"policy {name} changed resource properties or config it was handed ({len(changed)}); "
                             f"they are shared with the other policies and calls: copy them (copy_plain) before "
                             f"changing them")
    return result


def _schema(params: dict[str, dict[str, Any]] | None, contract: Iterable[str], required: list[str] | None):
    properties = {**contract_schema(*contract), **(params or {})}
    return PolicyConfigSchema(properties=properties, required=required) if properties else None


def _config(schema: PolicyConfigSchema | None, given: Any) -> dict[str, Any]:
    config = {k: v["default"] for k, v in (schema.properties if schema else {}).items() if "default" in v}
    config.update(plain(given) or {})
    return config


_UNSET = object()


def _config_once(schema: PolicyConfigSchema | None) -> Callable[[Any], dict[str, Any]]:
    """``_config(schema, given)``, worked out again only when the configured mapping changes (the
    analyzer hands every call a shallow copy of what ``Configure`` stored, so equal, not the same
    object). Every call gets the same object: checks only read their config, and strict mode (the
    pack's tests) fails a check that changes it, as for the properties (a copy per call was a
    tenth of the pack's own work per Analyze at 500 models)."""
    last: list[Any] = [_UNSET, None]

    def config(given: Any) -> dict[str, Any]:
        if last[0] is _UNSET or last[0] != given:
            last[0], last[1] = given, _config(schema, given)
        return last[1]

    return config


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
    """``custom_workloads``: the policy also takes the kinds its config lists under ``customWorkloads``."""
    wanted = frozenset(types)
    if custom_workloads:
        params = {**(params or {}), **CUSTOM_WORKLOADS_SCHEMA}
    schema = _schema(params, contract, required)

    configured = _config_once(schema)

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in wanted and not custom_workloads:
            return
        config = configured(args.get_config())
        if args.resource_type not in wanted and args.resource_type not in (config.get(CUSTOM_WORKLOADS) or {}):
            return
        resource = Resource(args.resource_type, args.name, args.urn, _plain_props(args.props), args.opts.parent)
        for message in _run(name, lambda: list(check(resource, config)), [resource.props, config], report):
            report(message, None)

    policy = ResourceValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=enforcement, config_schema=schema
    )
    # The types it acts on, for the analyzer to pass it over for others (lib.analyzer_loop); None:
    # they depend on the config, and ``takes_types_with`` says which under a given config.
    policy.takes_types = None if custom_workloads else wanted
    if custom_workloads:
        policy.takes_types_with = lambda given: wanted | frozenset(configured(given).get(CUSTOM_WORKLOADS) or {})
    return policy


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
    schema = _schema(params, contract, required)

    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        stack = Stack(_kit_resources(args.resources))
        config = _config(schema, args.get_config())
        # Read only if the check crashes, to tell "inputs not known yet" from a bug.
        props = (r.props for r in stack.resources)
        for message, urn in _run(name, lambda: list(check(stack, config)), props, report):
            report(message, urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=enforcement, config_schema=schema
    )


def stack_workloads(stack: Stack, config: dict[str, Any]) -> list[PodTemplate]:
    """Every pod template in the stack: built-in workload kinds and the config's ``customWorkloads``
    (found once per request for the policies with the same kinds; the templates are shared)."""
    paths = workload_paths(config)
    key = tuple(sorted(paths.items()))
    return list(stack.derived("stack workloads", key, lambda: [
        t for r in stack.of_type(frozenset(paths)) for t in pod_templates(r, config)]))
