"""Which of a source's versions is newest, and whether a chart's ``kubeVersion`` admits an EKS cluster.

Newest: a candidate counts only if it has the pinned version's *shape*: the same text between its
numbers (``v1.12.1-distroless`` admits ``v1.13.0-distroless``, not ``v1.13.0`` or ``v1.13.0-rc.1``;
``v1.23.0-eksbuild.1`` admits ``v1.24.2-eksbuild.3``). So pre-releases, other variants and stray tags
(``latest``, ``sha-abc123``) never count, and the numbers compare as numbers (``1.10`` after ``1.9``).
A pin made per Kubernetes minor (the Cluster Autoscaler's image) also keeps its first two numbers.

``kubeVersion``: Helm refuses to install a chart whose ``kubeVersion`` constraint the cluster's version
does not meet (helm/helm ``pkg/action/install.go``, ``chartutil.IsCompatibleRange`` on
``Capabilities.KubeVersion``, the API server's ``gitVersion``). EKS reports ``v1.35.2-eks-3cfe0ce``:
a pre-release in semver terms. Masterminds/semver v3 (``constraints.go``, e.g.
``constraintGreaterThanEqual``) answers false for a pre-release version against a constraint term
without a pre-release of its own, so ``>=1.25.0`` refuses every EKS cluster while ``>=1.25.0-0``
admits it: the ``-0`` that charts write is what makes them install on EKS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUMBER = re.compile(r"(\d+)")


def shape(version: str) -> tuple[str, ...]:
    """The text between a version's numbers: ``v1.2.3-eksbuild.4`` -> ``('v', '.', '.', '-eksbuild.', '')``."""
    return tuple(_NUMBER.split(version)[0::2])


def numbers(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in _NUMBER.split(version)[1::2])


def newest(pinned: str, candidates: Iterable[str], fixed: int = 0) -> str | None:
    """The highest candidate shaped like ``pinned`` whose first ``fixed`` numbers equal the pin's."""
    form, head = shape(pinned), numbers(pinned)[:fixed]
    admitted = [c for c in candidates if shape(c) == form and numbers(c)[:fixed] == head]
    return max(admitted, key=numbers, default=None)


def is_behind(pinned: str, newest_version: str) -> bool:
    return numbers(newest_version) > numbers(pinned)


# --- Masterminds/semver v3 constraints, the subset charts use for kubeVersion ---------------------

_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_TERM = re.compile(r"^(>=|=>|<=|=<|!=|>|<|=)?\s*(\S+)$")


class ConstraintError(ValueError):
    """A constraint this reader does not evaluate (wildcards, ``~``, ``^``): the answer is unknown."""


def _parse(version: str) -> tuple[tuple[int, int, int], tuple[str, ...]]:
    match = _SEMVER.match(version.strip())
    if not match:
        raise ConstraintError(f"{version!r} is not a version")
    major, minor, patch, pre = match.groups()
    return (int(major), int(minor or 0), int(patch or 0)), tuple(pre.split(".")) if pre else ()


def _pre_key(pre: tuple[str, ...]) -> tuple:
    """Semver 2.0 section 11: a release ranks above its pre-releases; numeric identifiers rank below
    alphanumeric ones; a longer list ranks above its prefix."""
    if not pre:
        return (1,)
    return (0, *[(0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre])


def _compare(a: str, b: str) -> int:
    (core_a, pre_a), (core_b, pre_b) = _parse(a), _parse(b)
    key_a, key_b = (core_a, _pre_key(pre_a)), (core_b, _pre_key(pre_b))
    return (key_a > key_b) - (key_a < key_b)


def _term_holds(version: str, op: str, bound: str) -> bool:
    if any(ch in bound for ch in "xX*^~"):
        raise ConstraintError(f"{op}{bound}")
    if _parse(version)[1] and not _parse(bound)[1]:
        return False  # a pre-release meets only terms that name a pre-release themselves
    order = _compare(version, bound)
    return {"": order == 0, "=": order == 0, "!=": order != 0, ">": order > 0, "<": order < 0,
            ">=": order >= 0, "=>": order >= 0, "<=": order <= 0, "=<": order <= 0}[op]


def admits(constraint: str, version: str) -> bool:
    """Whether Helm installs a chart with ``kubeVersion: constraint`` on a cluster reporting ``version``.

    Alternatives are separated by ``||``; within one, terms by commas or spaces, all of which must hold."""
    for alternative in constraint.split("||"):
        spaced = re.sub(r"(>=|=>|<=|=<|!=|>|<|=)\s+", r"\1", alternative.replace(",", " "))
        terms = spaced.split()
        if not terms:
            raise ConstraintError(constraint)
        parsed = []
        for term in terms:
            match = _TERM.match(term)
            if not match:
                raise ConstraintError(term)
            parsed.append((match.group(1) or "", match.group(2)))
        if all(_term_holds(version, op, bound) for op, bound in parsed):
            return True
    return False


def eks_version(minor: str) -> str:
    """The version Helm sees on an EKS cluster of ``minor``: ``gitVersion`` carries an ``-eks-<hash>``
    suffix (a pre-release to semver); the patch is not known offline, 0 stands for it."""
    return f"v{minor}.0-eks-0"
