"""How long KEDA keeps a model it woke from zero, by KEDA's own rule, against the model's cold start.

A model at ``minReplicaCount: 0`` is woken by a trigger that reads demand from outside its pods (the
gateway's request counter). One request keeps that trigger above its ``activationThreshold`` for as
long as the query still sees it (its *demand window*: the longest range the query looks back over);
after that KEDA counts ``cooldownPeriod`` and scales the target back to zero. The rule, as KEDA 2.20
runs it (kedacore/keda, ``pkg/scaling/executor/scale_scaledobjects.go``):

- ``RequestScale``: a trigger is active when its value is strictly above ``activationThreshold``
  (``pkg/scalers/prometheus_scaler.go``, ``GetMetricsAndActivity``: ``val > ActivationThreshold``);
  at zero replicas an active trigger calls ``scaleFromZeroOrIdle``, which sets the replicas and
  ``LastActiveTime`` to now; every later poll with an active trigger moves ``LastActiveTime`` to now;
- ``scaleToZeroOrIdle``: with no active trigger and ``minReplicaCount`` 0, the target is scaled to 0
  once ``LastActiveTime + cooldownPeriod`` is before now. Nothing in that rule looks at the target's
  pods: a replica that is still pulling its image or loading its weights is deleted all the same;
- defaults (``pkg/scaling/executor/scale_executor.go``): ``cooldownPeriod`` 300 s,
  ``initialCooldownPeriod`` 0 s (a new ScaledObject with no ``LastActiveTime`` scales its target to
  zero at its first poll); ``pollingInterval`` 30 s (KEDA's ScaledObject spec reference).

The textbook reading ("the cooldown starts when the model has served its last request", i.e. counts
from readiness) never deletes a starting replica; KEDA's does whenever the demand window plus the
cooldown is shorter than the time from the request to readiness. :func:`scaled_to_zero_at` is KEDA's
rule, :func:`textbook_scaled_to_zero_at` the textbook's, and :func:`cooldown_for` the shortest
``cooldownPeriod`` under which a woken model serves for a given window after its predicted cold start.

Times are seconds after the waking request. KEDA polls every ``pollingInterval``; the request arrives
just after a poll (the latest a poll can see it), so the first poll that reads it is one interval later
and activates the model; its cold start (:mod:`.cold_start`) runs from there.

Pure Python: the program imports it as ``policies.capacity.keep_awake``, the pack as ``capacity.keep_awake``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

#: KEDA's defaults for a ScaledObject that leaves them unset (kedacore/keda pkg/scaling/executor/scale_executor.go
#: ``defaultCooldownPeriod``, ``defaultInitialCooldownPeriod``; keda.sh ScaledObject spec: ``pollingInterval`` 30).
DEFAULT_COOLDOWN_SECONDS = 300
DEFAULT_INITIAL_COOLDOWN_SECONDS = 0
DEFAULT_POLLING_SECONDS = 30

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_RANGE = re.compile(r"\[\s*([0-9smhdwy.]+)\s*(?::[^\]]*)?\]")


def promql_duration_seconds(text: str) -> float | None:
    """A PromQL duration (``120s``, ``2m``, ``1h30m``) in seconds; ``None`` when it is not one."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def demand_window_seconds(query: str) -> float:
    """How long one event stays visible to ``query``: its longest range selector (``[120s]``), 0 for a query
    without one (an instant gauge reads a request only while it is there)."""
    windows = [promql_duration_seconds(m) for m in _RANGE.findall(query)]
    return max((w for w in windows if w is not None), default=0.0)


@dataclass(frozen=True)
class KeepAwake:
    """What decides how long a woken model stays: the demand window of its waking triggers, its
    ScaledObject's ``cooldownPeriod`` and ``pollingInterval`` (seconds)."""

    demand_window_seconds: float
    cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS
    polling_seconds: float = DEFAULT_POLLING_SECONDS

    def __post_init__(self) -> None:
        if self.polling_seconds <= 0:
            raise ValueError(f"pollingInterval must be above 0, not {self.polling_seconds:g}")

    @property
    def woken_at(self) -> float | None:
        """The poll that activates the model: the first one, if the request is still in the window then."""
        return self.polling_seconds if self.polling_seconds < self.demand_window_seconds else None

    @property
    def last_active_at(self) -> float | None:
        """KEDA's ``LastActiveTime``: the last poll at which the request is still inside the window."""
        if self.woken_at is None:
            return None
        return self.polling_seconds * (math.ceil(self.demand_window_seconds / self.polling_seconds) - 1)

    def describe(self) -> str:
        return (f"demand window {self.demand_window_seconds:g} s + cooldownPeriod {self.cooldown_seconds:g} s, "
                f"pollingInterval {self.polling_seconds:g} s")


def _first_poll_after(keep: KeepAwake, moment: float) -> float:
    """The first poll strictly after ``moment`` (KEDA's ``Before(time.Now())``)."""
    return keep.polling_seconds * (math.floor(moment / keep.polling_seconds) + 1)


def ready_at(keep: KeepAwake, cold_start_seconds: float) -> float | None:
    """When the woken model serves: the activating poll plus its cold start."""
    return None if keep.woken_at is None else keep.woken_at + cold_start_seconds


def scaled_to_zero_at(keep: KeepAwake) -> float | None:
    """KEDA's rule: the first poll after ``LastActiveTime + cooldownPeriod``, whatever the pod's state.
    ``None``: no poll ever sees the request, the model is never woken."""
    last = keep.last_active_at
    return None if last is None else _first_poll_after(keep, last + keep.cooldown_seconds)


def textbook_scaled_to_zero_at(keep: KeepAwake, cold_start_seconds: float) -> float | None:
    """The textbook's reading: the cooldown counts from the later of the last demand and readiness."""
    last, ready = keep.last_active_at, ready_at(keep, cold_start_seconds)
    return None if last is None or ready is None else _first_poll_after(keep, max(last, ready) + keep.cooldown_seconds)


def serving_seconds(keep: KeepAwake, cold_start_seconds: float) -> float | None:
    """How long the woken model serves before KEDA scales it to zero (negative: deleted before it is
    ready, by that many seconds); ``None`` when it is never woken."""
    zero, ready = scaled_to_zero_at(keep), ready_at(keep, cold_start_seconds)
    return None if zero is None or ready is None else zero - ready


def cooldown_for(demand_window_seconds: float, polling_seconds: float, cold_start_seconds: float,
                 serving_window_seconds: float) -> int:
    """The shortest whole ``cooldownPeriod`` under which a model woken by one request serves at least
    ``serving_window_seconds`` after its cold start, by KEDA's rule (``LastActiveTime`` plus the cooldown
    must reach readiness plus the window; the scale-in poll comes after it)."""
    keep = KeepAwake(demand_window_seconds, 0, polling_seconds)
    ready, last = ready_at(keep, cold_start_seconds), keep.last_active_at
    if ready is None or last is None:
        raise ValueError(f"a demand window of {demand_window_seconds:g} s is not seen by a poll every "
                         f"{polling_seconds:g} s: one request never wakes the model")
    return max(0, math.ceil(ready + serving_window_seconds - last))


def of_scaled_object(spec: dict[str, Any], waking: list[dict[str, Any]]) -> KeepAwake:
    """The keep-awake of a ScaledObject ``spec`` whose ``waking`` triggers read demand from outside its pods:
    the longest demand window among them (a non-Prometheus trigger counts 0: it holds only while its source
    does), its ``cooldownPeriod`` and ``pollingInterval`` (KEDA's defaults when unset)."""
    windows = [demand_window_seconds(str((t.get("metadata") or {}).get("query") or ""))
               for t in waking if t.get("type") == "prometheus"]
    return KeepAwake(max(windows, default=0.0), _number(spec.get("cooldownPeriod"), DEFAULT_COOLDOWN_SECONDS),
                     _number(spec.get("pollingInterval"), DEFAULT_POLLING_SECONDS))


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool):
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if number >= 0 else default
