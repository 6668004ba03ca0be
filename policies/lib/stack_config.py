"""The stack's own configuration, as the engine hands it to a policy pack.

The engine starts a policy pack with the stack's configuration in the environment variable
``PULUMI_CONFIG``: a JSON object of ``"namespace:key"`` to a string, structured values (such as
``llm-platform:gpuBudget``) JSON-encoded into that string (pulumi/pulumi
sdk/go/common/resource/plugin/analyzer_plugin.go, ``constructEnv`` and ``constructConfig``). The
offline check's runner starts the pack the same way. So the pack reads the stack's ``gpuBudget``
itself, instead of ``policies/config/<stack>.json`` repeating its numbers.

A policy parameter listed in :data:`STACK_PARAMS` takes its value, in this order, from the policy's
own config (``--policy-pack-config``: an explicit override), else from the stack's configuration,
else from the parameter's documented fallback. Its default is therefore not advertised in the
policy's schema: the engine fills every advertised default into the config it sends
(pkg/resource/analyzer/config.go, ``ReconcilePolicyPackConfig`` -> ``createConfigWithDefaults``),
and the pack could not tell an explicit value from a default any more.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from capacity import bounded_json

#: The environment variable the engine sets for a policy pack (``constructEnv``).
CONFIG_ENV = "PULUMI_CONFIG"
#: The program's config namespace (``name`` in Pulumi.yaml).
NAMESPACE = "llm-platform"
GPU_BUDGET_KEY = f"{NAMESPACE}:gpuBudget"
#: The stack's AWS region (the program's own setting); the pack prices instances there.
REGION_KEY = f"{NAMESPACE}:region"


class StackConfigError(ValueError):
    """The stack's configuration holds a value the pack cannot read; the message names the key."""


@dataclass(frozen=True)
class GpuBudget:
    """The stack's GPU ceilings (``llm-platform:gpuBudget``)."""

    max_gpus: float
    monthly_budget_usd: float


def stack_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``PULUMI_CONFIG`` as a dict (``{}`` when the engine set none: a stack without config, or a
    pack started by hand)."""
    raw = (os.environ if environ is None else environ).get(CONFIG_ENV)
    if not raw:
        return {}
    try:
        config = bounded_json.loads(raw)
    except ValueError:
        raise StackConfigError(f"{CONFIG_ENV} is not JSON; the engine sets it to the stack's configuration") from None
    if not isinstance(config, dict):
        raise StackConfigError(f"{CONFIG_ENV} is not a JSON object; the engine sets it to the stack's configuration")
    return config


#: An integer as text the way the program's settings read it (pydantic's lax mode): optional sign,
#: digits with single underscores between them, and an optional fraction of zeros (``"16"``, ``" 16 "``,
#: ``"1_000"``, ``"16.0"``).
_INTEGER_TEXT = re.compile(r"^[+-]?\d(?:_?\d)*(?:\.0*)?$")


def config_number(value: Any, *, integer: bool = False) -> int | float | None:
    """A number from the stack's configuration, taken as the program's settings take it (pydantic's lax
    mode), so the pack never refuses what the settings accepted: a JSON number, or its text (a value
    quoted in the stack file arrives as a JSON string, ``"900"``); an integer field takes a float or
    text only when it is whole. ``None`` for anything else: a boolean (``true`` is not 1), text that is
    not a number, a non-finite value."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if integer:
            return int(text.split(".", 1)[0]) if _INTEGER_TEXT.match(text) else None
        try:
            value = float(text)
        except ValueError:
            return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return (int(value) if value.is_integer() else None) if integer else value
    return None


def gpu_budget(environ: Mapping[str, str] | None = None) -> GpuBudget | None:
    """The stack's ``gpuBudget``, ``None`` when its configuration has none.

    The engine hands an object config value as its JSON text; a value that is already an object
    (a hand-written ``PULUMI_CONFIG``) is taken as it is.
    """
    value = stack_config(environ).get(GPU_BUDGET_KEY)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = bounded_json.loads(value)
        except ValueError:
            raise StackConfigError(f"{GPU_BUDGET_KEY} is not a JSON object (the stack's configuration)") from None
    if not isinstance(value, dict):
        raise StackConfigError(f"{GPU_BUDGET_KEY} must be an object with maxGpus and monthlyBudgetUsd")
    numbers = {}
    for field, integer in (("maxGpus", True), ("monthlyBudgetUsd", False)):
        number = config_number(value.get(field), integer=integer)
        if number is None or number < 0:
            raise StackConfigError(f"{GPU_BUDGET_KEY}.{field} must be a number >= 0 (the stack's configuration)")
        numbers[field] = number
    return GpuBudget(numbers["maxGpus"], numbers["monthlyBudgetUsd"])


def stack_region(environ: Mapping[str, str] | None = None) -> str | None:
    """The stack's ``region`` (``None`` when its configuration has none: a pack started by hand).

    Asked for every catalog lookup, so the parse is kept per ``PULUMI_CONFIG`` text."""
    return _region((os.environ if environ is None else environ).get(CONFIG_ENV) or "")


@lru_cache(maxsize=4)
def _region(raw: str) -> str | None:
    value = stack_config({CONFIG_ENV: raw}).get(REGION_KEY)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise StackConfigError(f"{REGION_KEY} must be a region name such as us-east-1 (the stack's configuration)")
    return value


@dataclass(frozen=True)
class StackParam:
    """A policy parameter the stack's configuration gives: ``source`` names it, ``read()`` returns
    the value (``None`` when the stack has none; :class:`StackConfigError` when it is unreadable)."""

    source: str
    read: Callable[[], Any]


def _budget_field(field: str, attribute: str) -> StackParam:
    def read() -> Any:
        budget = gpu_budget()
        return None if budget is None else getattr(budget, attribute)

    return StackParam(f"{GPU_BUDGET_KEY}.{field}", read)


#: (policy, parameter) -> where the stack's configuration gives its value.
STACK_PARAMS: dict[tuple[str, str], StackParam] = {
    ("gpu-capacity-cap", "maxGpus"): _budget_field("maxGpus", "max_gpus"),
    ("gpu-monthly-budget", "monthlyBudgetUsd"): _budget_field("monthlyBudgetUsd", "monthly_budget_usd"),
}
