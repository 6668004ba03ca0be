"""pulumi_policy's analyzer loops, doing each piece of work once per request instead of per policy.

pulumi_policy 1.21's ``Analyze`` goes through every policy of the pack for every resource, and its
``AnalyzeStack`` builds every resource of the stack again for every stack policy (a
``PolicyResource`` each, parents and dependencies linked). At 500 models that is 25 policies for
each of 4,703 resources, and 8 x 4,703 resources built for one answer. Two changes, installed by
:func:`install` (through ``request_cache.install()``), with answers that stay the same:

- **Analyze** goes only through the resource policies that take the resource's type. A policy
  built by ``kit.resource_policy`` returns at once for any other type (it reports nothing, and
  pulumi_policy adds nothing for it); its types are in ``takes_types``. A policy whose types
  depend on its config (``customWorkloads``), or any other policy, is always gone through.
- **AnalyzeStack** builds the stack's resources once, as pulumi_policy's loop builds them, and
  hands each stack policy its own list of them. The resources themselves are shared: this pack's
  stack policies only read them (``kit`` turns them into its own ``Stack`` of plain data, which
  checks must not change either: its strict mode fails a check that does).
- **Configure** answers, beside its empty message, with the types the enabled resource policies
  take under the new config (``lib.analyzed_types``): a driver that knows Analyze answers nothing
  for any other type (the offline check's feeder) sends only those.

Both run only with the pulumi_policy version they were written against; with another, the
analyzer is left as it is. ``tests/policies/test_analyzer_loop.py`` compares the answers with
pulumi_policy's own loops over whole plans.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from importlib import metadata
from inspect import isawaitable
from typing import Any

import pulumi_policy.policy as _policy
from pulumi_policy.policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from lib import analyzed_types

#: The pulumi_policy release whose AnalyzeStack ``_analyze_stack`` follows line by line.
WRITTEN_FOR = "1.21.0"
#: Set to ``1`` to serve with pulumi_policy's own loops: the reference these are tested against.
SDK_LOOPS_ENV = "LLM_PLATFORM_PACK_SDK_LOOPS"

_serving = threading.local()


class _PoliciesByType(list):
    """The pack's policies; inside Analyze, only those that may act on the request's type."""

    def __init__(self, policies: list[Any]) -> None:
        super().__init__(policies)
        self._by_type: dict[str, list[Any]] = {}

    def __iter__(self) -> Iterator[Any]:
        resource_type = getattr(_serving, "resource_type", None)
        if resource_type is None:
            return super().__iter__()
        narrowed = self._by_type.get(resource_type)
        if narrowed is None:
            narrowed = self._by_type[resource_type] = [
                p for p in list.__iter__(self) if _may_act_on(p, resource_type)]
        return iter(narrowed)


def _may_act_on(policy: Any, resource_type: str) -> bool:
    if not isinstance(policy, ResourceValidationPolicy):
        return False  # Analyze passes over stack policies
    takes = getattr(policy, "takes_types", None)
    return takes is None or resource_type in takes


def taken_types(servicer: Any) -> frozenset[str] | None:
    """Every type some enabled resource policy of ``servicer`` acts on under its current config;
    ``None`` when that cannot be told (a policy that does not say, or one that only remediates:
    pulumi_policy answers every resource with its not-applicable entry)."""
    types: set[str] = set()
    for policy in list.__iter__(getattr(servicer, "_PolicyAnalyzerServicer__policies")):
        if isinstance(policy, StackValidationPolicy):
            continue
        if servicer._get_enforcement_level(policy) == EnforcementLevel.DISABLED:
            continue  # pulumi_policy's Analyze passes it over before anything else
        if not isinstance(policy, ResourceValidationPolicy) or not policy.has_validation():
            return None
        takes_with = getattr(policy, "takes_types_with", None)
        takes = takes_with(servicer._get_policy_config(policy.name)) if takes_with else getattr(policy, "takes_types", None)
        if takes is None:
            return None
        types |= takes
    return frozenset(types)


def _configure_naming_types(configure: Any) -> Any:
    def Configure(self: Any, request: Any, context: Any) -> Any:  # noqa: N802 - the gRPC method's name
        response = configure(self, request, context)
        types = taken_types(self)
        value = None if types is None else analyzed_types.encode(types)
        if value is not None and context is not None:
            context.set_trailing_metadata(((analyzed_types.KEY, value),))
        return response

    return Configure


def _narrowed_analyze(analyze: Any) -> Any:
    def Analyze(self: Any, request: Any, context: Any) -> Any:  # noqa: N802 - the gRPC method's name
        _serving.resource_type = request.type
        try:
            return analyze(self, request, context)
        finally:
            _serving.resource_type = None

    return Analyze


def _stack_resources(servicer: Any, request: Any) -> list[PolicyResource]:
    """AnalyzeStack's resources as pulumi_policy 1.21 builds them for each stack policy.

    Resources with the same options (the same parent, mostly) share one options object, and those
    with the same provider one provider resource: policies only read them, and building them was
    a third of this loop at 500 models.
    """
    resources: list[PolicyResource] = []
    by_urn: dict[str, PolicyResource] = {}
    links = []
    options_by_wire: dict[bytes, Any] = {}
    providers_by_wire: dict[bytes, Any] = {}
    props_of = _props_of or _sdk_props_of
    for r in request.resources:
        wire = r.options.SerializeToString(deterministic=True)
        options = options_by_wire.get(wire)
        if options is None:
            options = options_by_wire[wire] = servicer._get_resource_options(r)
        if r.HasField("provider"):
            wire = r.provider.SerializeToString(deterministic=True)
            provider = providers_by_wire.get(wire)
            if provider is None:
                provider = providers_by_wire[wire] = servicer._get_provider_resource(r)
        else:
            provider = None
        resource = PolicyResource(r.type, props_of(r.properties), r.urn, r.name, options, provider, None, [], {})
        property_dependencies = {k: list(v.urns) for k, v in r.propertyDependencies.items()}
        links.append((resource, r.parent, list(r.dependencies), property_dependencies))
        resources.append(resource)
        by_urn[resource.urn] = resource
    for resource, parent, dependencies, property_dependencies in links:
        if parent is not None and parent in by_urn:
            resource.parent = by_urn[parent]
        resource.dependencies.extend(by_urn[d] for d in dependencies if d in by_urn)
        for key, urns in property_dependencies.items():
            resource.property_dependencies[key] = [by_urn[d] for d in urns if d in by_urn]
    return resources


def _sdk_props_of(properties: Any) -> Any:
    """A resource's properties as pulumi_policy's AnalyzeStack makes them."""
    return _policy.unknown_checking_proxy(_policy.deserialize_properties(_policy.json_format.MessageToDict(properties)))


#: Set by :func:`install`: how the pack makes a resource's properties (``request_cache`` makes
#: them convert when first read); ``None``: as pulumi_policy does.
_props_of: Any = None


def _analyze_stack(self: Any, request: Any, _context: Any) -> Any:
    """pulumi_policy 1.21's ``AnalyzeStack``, with the resources built once (see the module)."""
    self._configure_runtime_settings()
    response = _policy.proto.AnalyzeResponse()
    resources: list[PolicyResource] | None = None
    pack_name = getattr(self, "_PolicyAnalyzerServicer__policy_pack_name")
    pack_version = getattr(self, "_PolicyAnalyzerServicer__policy_pack_version")
    for policy in getattr(self, "_PolicyAnalyzerServicer__policies"):
        enforcement_level = self._get_enforcement_level(policy)
        if enforcement_level == EnforcementLevel.DISABLED or not isinstance(policy, StackValidationPolicy):
            continue
        if enforcement_level == EnforcementLevel.REMEDIATE:
            enforcement_level = EnforcementLevel.MANDATORY  # stack policies cannot remediate
        report_violation = self._create_report_violation(response, policy.name, policy.description,
                                                         enforcement_level, policy.severity)
        if resources is None:
            resources = _stack_resources(self, request)
        args = StackValidationArgs(list(resources), self._get_policy_config(policy.name),
                                   getattr(self, "_PolicyAnalyzerServicer__stack_tags"))
        try:
            result = policy.validate(args, report_violation)
            if isawaitable(result):
                loop = asyncio.new_event_loop()
                task = asyncio.Task(result, loop=loop)
                loop.run_until_complete(task)
                loop.close()
        except UnknownValueError as e:
            response.diagnostics.append(_policy.proto.AnalyzeDiagnostic(
                policyName=policy.name,
                policyPackName=pack_name,
                policyPackVersion=pack_version,
                message=(f"can't run policy '{policy.name}' from policy pack "
                         f"'{pack_name}@v{pack_version}' during preview: {e.message}"),
                urn="",
                description=policy.description,
                enforcementLevel=self._map_enforcement_level(EnforcementLevel.ADVISORY),
            ))
        except _policy._NotApplicableError as e:
            response.not_applicable.append(_policy.proto.PolicyNotApplicable(
                policy_name=policy.name,
                reason=e.reason or "",
            ))
    return response


def install(wrap: Any = lambda method: method, props_of: Any = None) -> bool:
    """Put both loops in place (``wrap``: what request_cache puts around each request;
    ``props_of``: how it makes a stack resource's properties from their Struct, the same as
    pulumi_policy's conversion when read); False, and nothing changed, under another pulumi_policy
    than :data:`WRITTEN_FOR` or with :data:`SDK_LOOPS_ENV` set."""
    global _props_of
    if metadata.version("pulumi_policy") != WRITTEN_FOR or os.environ.get(SDK_LOOPS_ENV) == "1":
        return False
    _props_of = props_of
    servicer = _policy._PolicyAnalyzerServicer
    original_init = servicer.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        original_init(self, *args, **kwargs)
        policies = self._PolicyAnalyzerServicer__policies
        self._PolicyAnalyzerServicer__policies = _PoliciesByType(policies)

    servicer.__init__ = __init__
    servicer.Analyze = _narrowed_analyze(servicer.Analyze)
    servicer.Configure = _configure_naming_types(servicer.Configure)
    servicer.AnalyzeStack = wrap(_analyze_stack)
    return True
