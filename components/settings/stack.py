"""Parsing a stack's config into its settings (``root.Settings``) with every problem reported in one round.

Field rules sit on the models (one module per concern), rules between keys in ``rules``, and how a
problem is shown in ``problems``."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from components import versions
from components.settings._base import NAMESPACE
from components.settings.problems import (
    Problem,
    decode_config_value,
    field_problem,
    masked,
    secret_warnings,
)
from components.settings.reservation_rules import reservation_warnings
from components.settings.root import Settings, support_date
from components.settings.rules import cross_field_problems

#: Stand-ins for required top-level keys that failed, so the cross-field rules that do not read them
#: still run in the same round (rules that read a failed key are skipped: their finding would be noise).
_STAND_INS: dict[str, Any] = {
    "environment": "x",
    "region": "us-east-1",
    "systemPool": {"instanceTypes": ["m7i.xlarge"], "scaling": {"minSize": 2, "desiredSize": 2, "maxSize": 2}},
}


@dataclass(frozen=True)
class SettingsRead:
    """A stack's config read into settings, with what is wrong with it so far.

    ``problems`` are the field errors and the cross-field rules' findings; ``misspelled`` the keys of
    a namespace that nearly spells this project's; ``failed`` the top-level keys whose own value
    failed (a later rule reading one of them is skipped: its finding would be noise). ``settings`` is
    None only when the field errors leave nothing to run the rules on; with field errors it holds
    stand-ins for the failed required keys."""

    settings: Settings | None
    problems: list[Problem]
    misspelled: list[Problem]
    failed: frozenset[str]


def read_settings(config: Mapping[str, Any]) -> SettingsRead:
    """Read a stack's config map (keys ``llm-platform:<key>``; other namespaces are ignored): field
    errors, then the cross-field rules whose keys are valid, in one round. The capacity verdict on the
    objects these settings describe is ``components.capacity_check``'s."""
    prefix = f"{NAMESPACE}:"
    misspelled = _misspelled_namespaces(config)
    raw = {k[len(prefix) :]: decode_config_value(v) for k, v in config.items() if k.startswith(prefix)}
    problems: list[Problem] = []
    failed: set[str] = set()
    try:
        settings: Settings | None = Settings.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        problems += [field_problem(Settings, raw, e) for e in errors]
        failed = {str(e["loc"][0]) for e in errors if e["loc"]}
        partial = {k: v for k, v in raw.items() if k not in failed}
        partial.update({k: v for k, v in _STAND_INS.items() if k in failed})
        try:
            settings = Settings.model_validate(partial)
        except ValidationError:
            settings = None
    if settings is not None:
        problems += cross_field_problems(settings, failed)
    return SettingsRead(settings, problems, misspelled, frozenset(failed))


def _misspelled_namespaces(config: Mapping[str, Any]) -> list[Problem]:
    """Keys whose namespace nearly spells this project's (``llm-platfrom:gpuPools``): the Pulumi
    CLI accepts any namespace, so such a setting would be silently ignored."""
    problems = []
    for key, value in config.items():
        namespace, colon, name = str(key).partition(":")
        if colon and namespace != NAMESPACE and difflib.SequenceMatcher(None, namespace, NAMESPACE).ratio() >= 0.8:
            problems.append(Problem(str(key)[:120], masked(decode_config_value(value), name),
                                    f"namespace {namespace[:40]!r} is not {NAMESPACE!r}, so this setting would be "
                                    f"ignored; write {NAMESPACE}:{name[:60]}"))
    return problems


def config_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Turn a stack file's ``config:`` block into the string map the language host would pass."""
    out = {}
    for key, value in config.items():
        if isinstance(value, (dict, list)):
            out[key] = json.dumps(value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def kubernetes_warnings(settings: Settings) -> list[str]:
    """What a stack is told about its Kubernetes minor: the end of standard support from
    ``SUPPORT_WARNING_DAYS`` before, and each pinned component not known to run on it."""
    minor = settings.kubernetes_version
    support = versions.EKS_KUBERNETES_SUPPORT[minor]
    key = f"{NAMESPACE}:kubernetesVersion"
    out = []
    days = (support.standard_support_ends - support_date()).days
    if days <= versions.SUPPORT_WARNING_DAYS:
        out.append(f"warning: {key} {minor} leaves EKS standard support on {support.standard_support_ends.isoformat()} "
                   f"(in {days} day(s)); from then on it is refused, and a running cluster bills extended support: "
                   f"upgrade to {versions.SUPPORTED_KUBERNETES_VERSIONS[-1]}")
    out.extend(f"warning: {key} {minor}: {component} is known to run on {low}-{high} ({source})"
               for component, low, high, source in versions.components_not_running_on(minor))
    return out


def settings_warnings(config: Mapping[str, Any], settings: Settings, secret_keys: Iterable[str] = ()) -> list[str]:
    """Every warning a valid stack gets: credentials in plain text, its Kubernetes minor's support, a
    Capacity Block that ends soon under a serving tier."""
    return secret_warnings(config, secret_keys) + kubernetes_warnings(settings) + reservation_warnings(settings)


