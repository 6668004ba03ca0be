"""Helm releases and charts as the engine sees them (helm.sh/v3 Release, helm.sh/v4 Chart).

Both carry ``chart``, ``version``, ``repositoryOpts`` and ``values``. A chart reference may be a
plain name (``nvidia-device-plugin``), ``repo/name``, an OCI reference (``oci://host/path/name``,
possibly with ``:version``), a URL to a packaged ``.tgz`` or a local path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lib.resources import Resource
from lib.values import UNKNOWN, as_dict

EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_TGZ_VERSION = re.compile(r"-(v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\.tgz$")


@dataclass(frozen=True)
class ChartRef:
    name: Any
    version: Any
    embedded_version: str | None
    kind: str  # "repo", "oci", "url", "local", "unknown"


def chart_ref(resource: Resource) -> ChartRef:
    chart = resource.get("chart")
    version = resource.get("version")
    if chart is UNKNOWN or not isinstance(chart, str):
        return ChartRef(UNKNOWN if chart is UNKNOWN else None, version, None, "unknown")
    if chart.startswith("oci://"):
        last = chart.rstrip("/").rsplit("/", 1)[-1]
        name, _, embedded = last.partition(":")
        return ChartRef(name, version, embedded or None, "oci")
    if re.match(r"^https?://", chart):
        last = chart.rsplit("/", 1)[-1]
        match = _TGZ_VERSION.search(last)
        name = _TGZ_VERSION.sub("", last) if match else last.removesuffix(".tgz")
        return ChartRef(name, version, match.group(1) if match else None, "url")
    if chart.startswith((".", "/")) or chart.endswith(".tgz"):
        return ChartRef(chart.rstrip("/").rsplit("/", 1)[-1], version, None, "local")
    return ChartRef(chart.rsplit("/", 1)[-1], version, None, "repo")


def chart_name(resource: Resource) -> Any:
    return chart_ref(resource).name


def is_exact_version(version: Any) -> bool:
    return isinstance(version, str) and bool(EXACT_VERSION.match(version.strip()))


def values(resource: Resource) -> Any:
    """The release's ``values`` (``{}`` when absent, :data:`UNKNOWN` when unknown)."""
    return as_dict(resource.get("values", default={}))
