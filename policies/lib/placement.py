"""Where a pod may land: taints and tolerations, and node selection (selectors, affinity, pool requirements)
as per-label constraints. Taint effects and toleration matching are the capacity model's, so the pack
has one table and one matcher."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from capacity.model import EKS_EFFECTS, HARD_EFFECTS  # noqa: F401  (re-exported)
from capacity.model import Taint as _ModelTaint
from capacity.model import tolerates as _model_tolerates

from lib.values import UNKNOWN, as_int, as_list, contains_unknown, dig


@dataclass(frozen=True)
class Taint:
    key: Any
    value: Any
    effect: Any

    def __str__(self) -> str:
        value = "" if self.value in (None, "") else f"={self.value}"
        return f"{self.key}{value}:{self.effect}"

    @property
    def is_known(self) -> bool:
        return UNKNOWN not in (self.key, self.value, self.effect)


def tolerates(toleration: Any, taint: Taint) -> bool | None:
    """Kubernetes toleration matching (the capacity model's matcher); ``None`` when an unknown value decides it."""
    if not isinstance(toleration, dict):
        return None if toleration is UNKNOWN else False
    if contains_unknown(toleration) or not taint.is_known:
        return None
    return _model_tolerates([toleration], _ModelTaint(str(taint.key), str(taint.value or ""), str(taint.effect)))


def tolerates_all(tolerations: Any, taint: Taint) -> bool | None:
    """Whether any toleration in the list tolerates ``taint`` (``None`` = can't judge)."""
    if tolerations is UNKNOWN:
        return None
    results = [tolerates(t, taint) for t in tolerations or []]
    if any(r is True for r in results):
        return True
    if any(r is None for r in results):
        return None
    return False


@dataclass(frozen=True)
class Constraint:
    """What one label key may be: allowed values, exclusions, integer bounds, presence.

    Both sides of scheduling are expressed this way (a pod's selector and what a pool's nodes can
    carry) so "can this pool hold this pod" is an intersection that must be satisfiable.
    """

    values: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()
    gt: int | None = None
    lt: int | None = None
    exists: bool = False
    absent: bool = False

    @staticmethod
    def fixed(value: str) -> Constraint:
        return Constraint(values=frozenset({str(value)}), exists=True)

    @staticmethod
    def one_of(values: Sequence[str]) -> Constraint:
        return Constraint(values=frozenset(str(v) for v in values), exists=True)

    @staticmethod
    def any_value() -> Constraint:
        return Constraint(exists=True)

    @staticmethod
    def missing() -> Constraint:
        return Constraint(absent=True)

    def __and__(self, other: Constraint) -> Constraint:
        if self.values is None:
            values = other.values
        elif other.values is None:
            values = self.values
        else:
            values = self.values & other.values
        gts = [b for b in (self.gt, other.gt) if b is not None]
        lts = [b for b in (self.lt, other.lt) if b is not None]
        return Constraint(
            values=values,
            excluded=self.excluded | other.excluded,
            gt=max(gts) if gts else None,
            lt=min(lts) if lts else None,
            exists=self.exists or other.exists,
            absent=self.absent or other.absent,
        )

    def _admits(self, value: str) -> bool:
        if value in self.excluded:
            return False
        if self.gt is not None or self.lt is not None:
            number = as_int(value)
            if number is None:
                return False
            if self.gt is not None and not number > self.gt:
                return False
            if self.lt is not None and not number < self.lt:
                return False
        return True

    def candidates(self) -> set[str] | None:
        """The finite set of values a present label may take, or ``None`` if unbounded."""
        if self.values is None:
            return None
        return {v for v in self.values if self._admits(v)}

    def satisfiable(self) -> bool:
        if self.absent:
            return not self.exists
        if not self.exists:
            return True
        if self.values is not None:
            return bool(self.candidates())
        if self.gt is not None and self.lt is not None:
            low, high = self.gt + 1, self.lt - 1
            blocked = {n for n in map(as_int, self.excluded) if n is not None and low <= n <= high}
            return high - low + 1 > len(blocked)
        return True


def requirement_constraint(requirement: Any) -> Constraint | None:
    """A ``{key, operator, values}`` requirement as a :class:`Constraint` (``None`` if unknown/invalid)."""
    if not isinstance(requirement, dict) or contains_unknown(requirement):
        return None
    operator = requirement.get("operator")
    values = [str(v) for v in as_list(requirement.get("values"))]
    if operator == "In":
        return Constraint(values=frozenset(values), exists=True)
    if operator == "NotIn":
        return Constraint(excluded=frozenset(values))
    if operator == "Exists":
        return Constraint(exists=True)
    if operator == "DoesNotExist":
        return Constraint(absent=True)
    bound = as_int(values[0]) if len(values) == 1 else None
    if operator in ("Gt", "Lt", "Gte", "Lte") and bound is not None:
        if operator == "Gt":
            return Constraint(gt=bound, exists=True)
        if operator == "Gte":
            return Constraint(gt=bound - 1, exists=True)
        if operator == "Lt":
            return Constraint(lt=bound, exists=True)
        return Constraint(lt=bound + 1, exists=True)
    return None


@dataclass
class SelectorTerm:
    """One alternative of a pod's node selection: every key's constraint must hold (AND)."""

    constraints: dict[str, Constraint] = field(default_factory=dict)

    def add(self, key: str, constraint: Constraint) -> None:
        self.constraints[key] = self.constraints[key] & constraint if key in self.constraints else constraint

    def describe(self) -> str:
        parts = []
        for key, c in self.constraints.items():
            if c.absent:
                parts.append(f"!{key}")
            elif c.values is not None:
                parts.append(f"{key} in ({', '.join(sorted(c.values))})")
            elif c.excluded:
                parts.append(f"{key} notin ({', '.join(sorted(c.excluded))})")
            elif c.gt is not None or c.lt is not None:
                parts.append(f"{key} in ({c.gt}, {c.lt})")
            else:
                parts.append(key)
        return ", ".join(parts) or "any node"


def node_selection(spec: Any) -> list[SelectorTerm] | None:
    """The pod spec's ``nodeSelector`` and required node affinity as alternatives (OR of ANDs).

    Returns ``None`` when an unknown value makes the selection unknowable.
    """
    if spec is UNKNOWN:
        return None
    base = SelectorTerm()
    selector = dig(spec, "nodeSelector", default={})
    if contains_unknown(selector):
        return None
    for key, value in (selector or {}).items():
        base.add(key, Constraint.fixed(value))
    terms = dig(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    if terms is UNKNOWN or contains_unknown(terms):
        return None
    if not terms:
        return [base]
    alternatives = []
    for term in terms:
        alternative = SelectorTerm(dict(base.constraints))
        for expression in as_list(dig(term, "matchExpressions", default=[])):
            constraint = requirement_constraint(expression)
            if constraint is None:
                return None
            alternative.add(expression["key"], constraint)
        alternatives.append(alternative)
    return alternatives


def pod_uses_key(alternatives: list[SelectorTerm], key: str) -> bool:
    return any(key in alt.constraints and not alt.constraints[key].absent for alt in alternatives)
