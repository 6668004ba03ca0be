"""Render pinned charts with Helm's own engine (helm-python-sdk: Helm v4's Go SDK, no helm binary).

Charts cannot be downloaded here or in CI, and fetched chart code is never committed, so rendering
reads charts from a cache outside the repository: ``$LLM_PLATFORM_CHART_CACHE`` (default
``~/.cache/llm-platform/charts``), one ``<chart>-<version>.tgz`` per pinned chart. Fill it from a
local checkout of the chart's upstream repository at the pinned tag::

    python -m tests.support.helm_render cache path/to/chart-dir [...]
    python -m tests.support.helm_render cache --git-dir path/to/repo.git --ref <tag> --path <chart subdir>

The ref must hold the chart as published: Karpenter stamps version, appVersion and image tags in a
"Stable Release updates" commit after the tag, so use that commit, not the tag (docs/charts.md lists refs).
Where a release pipeline stamps the chart only while packaging (the GPU Operator's tag carries
``v1.0.0-devel``; its release workflow runs ``helm package --version <tag> --app-version <tag>``),
say so explicitly with ``--stamp-version``/``--stamp-app-version``, which rewrite Chart.yaml exactly
as those ``helm package`` flags do; nothing is stamped unless asked. Subcharts published from other
repositories (kube-prometheus-stack's grafana, kube-state-metrics, ...) are brought in with
``--dependency <chart dir or .tgz>`` or ``--dependency-git <git dir> <ref> <chart subdir>``, as
``helm dependency build`` would vendor them; each must be a dependency Chart.yaml names, at a
version it allows, and every dependency with a repository must be present before packaging.

Where the local cache lacks a pinned chart, the shared chart folder beside the clone
(``../shared/charts``, which CI always has) is read instead; the local cache wins, so a chart being
upgraded can be tried there first. A chart in neither place is reported by :func:`missing_reason`;
callers pass that to ``tests.support.needs.missing``, which skips with the reason on a developer's
machine and fails, naming the chart and version, in CI.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

from components.versions import HelmChart

CACHE_ENV = "LLM_PLATFORM_CHART_CACHE"

try:  # the engine is a pinned test dependency (tests/requirements-helm.txt)
    import helm_python as helm
    from helm_python import _native
    HELM_INSTALLED = True
except ImportError:  # pragma: no cover - reported through missing_reason
    HELM_INSTALLED = False


#: The packaged pinned charts beside the clone (``../shared/charts``): read where the local cache
#: lacks a chart, e.g. on a fresh machine or in CI.
SHARED_CHARTS = Path(__file__).resolve().parents[3] / "shared" / "charts"


def cache_dir() -> Path:
    """The local chart cache: where ``cache`` writes, and the first place a chart is looked for."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "llm-platform" / "charts")


def _archive_name(chart: HelmChart) -> str:
    return f"{chart.chart}-{chart.version}.tgz"


def cached_chart(chart: HelmChart) -> Path:
    """The archive of the pinned ``chart``: the local cache's if it has one, else the shared
    folder's if that has one, else where the local cache would keep it."""
    local = cache_dir() / _archive_name(chart)
    if local.is_file():
        return local
    shared = SHARED_CHARTS / _archive_name(chart)
    return shared if shared.is_file() else local


def missing_reason(chart: HelmChart) -> str | None:
    """Why ``chart`` cannot be rendered here, or None when it can."""
    if not HELM_INSTALLED:
        return "helm-python-sdk is not installed (tests/requirements-helm.txt)"
    if not cached_chart(chart).is_file():
        return (
            f"pinned chart {chart.chart} {chart.version} is in neither the chart cache {cache_dir()} "
            f"nor the shared charts {SHARED_CHARTS} (set {CACHE_ENV}; fill it with "
            "`python -m tests.support.helm_render cache`, and ask for the chart in ../shared/charts)"
        )
    return None


def render(
    chart: HelmChart,
    values: dict[str, Any],
    *,
    release_name: str,
    namespace: str,
    kube_version: str,
    api_versions: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Every object a ``helm install`` of the pinned ``chart`` with ``values`` would send, as Helm
    renders it for a cluster of ``kube_version`` (``"1.35"``). Values are checked against the
    chart's ``values.schema.json`` first, as an install does. Raises ``helm_python.HelmError``."""
    reason = missing_reason(chart)
    if reason:
        raise FileNotFoundError(reason)
    version = kube_version if kube_version.startswith("v") else f"v{kube_version}"
    version = version if version.count(".") == 2 else f"{version}.0"
    options: dict[str, Any] = {
        "name": release_name, "namespace": namespace, "is_install": True, "kube_version": version,
    }
    if api_versions:
        options["api_versions"] = list(api_versions)
    with helm.Chart.load(str(cached_chart(chart))) as loaded:
        if (loaded.name, loaded.version) != (chart.chart, chart.version):
            raise ValueError(f"cache holds {loaded.name} {loaded.version} under the name of {chart.chart} {chart.version}")
        _check_kube_version(loaded.metadata.get("kubeVersion"), version, chart)
        loaded.validate_schema(values)
        manifests = json.loads(
            _native.call_string("helm_render", loaded._raw(), json.dumps(values), json.dumps(options))
        )
    objects: list[dict[str, Any]] = []
    for path in sorted(manifests):
        if not path.endswith((".yaml", ".yml")):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(manifests[path]) if doc)
    return objects


_CONSTRAINT = re.compile(r"^(>=|<=|>|<|=|!=)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-[0-9A-Za-z.-]+)?$")


def _check_kube_version(constraint: str | None, version: str, chart: HelmChart) -> None:
    """What ``helm install`` checks before rendering (the engine alone does not): the chart's
    ``kubeVersion``, a space/comma-separated AND of comparisons (``||`` alternatives allowed)."""
    if not constraint:
        return
    have = tuple(int(p) for p in version.lstrip("v").split(".")[:3])
    compare = {">=": tuple.__ge__, "<=": tuple.__le__, ">": tuple.__gt__, "<": tuple.__lt__, "=": tuple.__eq__, "!=": tuple.__ne__}

    def holds(clause: str) -> bool:
        clause = re.sub(r"(>=|<=|!=|>|<|=)\s+", r"\1", clause.strip())
        for part in re.split(r"[\s,]+", clause):
            match = _CONSTRAINT.match(part)
            if not match:
                raise ValueError(f"cannot read kubeVersion constraint {constraint!r} of {chart.chart}")
            op, major, minor, patch = match.groups()
            want = (int(major), int(minor or 0), int(patch or 0))
            if not compare[op or "="](have, want):
                return False
        return True

    if not any(holds(alternative) for alternative in constraint.split("||")):
        raise ValueError(f"chart {chart.chart} {chart.version} requires kubeVersion {constraint}, not Kubernetes {version}")


def add_to_cache(chart_dir: Path) -> Path:
    """Package the chart in ``chart_dir`` (a local path) into the cache; returns the archive."""
    if not HELM_INSTALLED:
        raise SystemExit("helm-python-sdk is not installed: pip install -r tests/requirements-helm.txt")
    with helm.Chart.load(str(chart_dir)) as loaded:
        target = cache_dir()
        target.mkdir(parents=True, exist_ok=True)
        return Path(loaded.save(str(target)))


def stamp(chart_dir: Path, *, version: str | None, app_version: str | None) -> None:
    """Set ``version``/``appVersion`` in Chart.yaml, as ``helm package --version/--app-version``."""
    if not (version or app_version):
        return
    chart_yaml = chart_dir / "Chart.yaml"
    metadata = yaml.safe_load(chart_yaml.read_text())
    if version:
        metadata["version"] = version
    if app_version:
        metadata["appVersion"] = app_version
    chart_yaml.write_text(yaml.safe_dump(metadata, sort_keys=False))


def _allows(constraint: str, version: str) -> bool:
    """Whether a Chart.yaml dependency ``version`` admits ``version``: an exact version or an
    ``x.y.*`` wildcard (the only forms the pinned charts use; anything else is refused)."""
    constraint = str(constraint).strip().strip('"')
    if constraint.endswith(".*"):
        return version.startswith(constraint[:-1]) and "-" not in version
    if not re.fullmatch(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", constraint):
        raise ValueError(f"dependency version constraint {constraint!r} is not one this tool reads")
    return constraint.lstrip("v") == version.lstrip("v")


def vendor_dependencies(chart_dir: Path, dependencies: list[Path]) -> None:
    """Put ``dependencies`` (chart dirs or archives) into ``chart_dir/charts`` as ``helm dependency
    build`` would, after checking each against Chart.yaml; then require every dependency that names
    a repository to be present, so a package never silently lacks a subchart."""
    metadata = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    wanted = {d["name"]: d for d in metadata.get("dependencies") or []}
    charts = chart_dir / "charts"
    charts.mkdir(exist_ok=True)
    for dependency in dependencies:
        with helm.Chart.load(str(dependency)) as loaded:
            name, version = loaded.name, loaded.version
            if name not in wanted:
                raise ValueError(f"{metadata['name']} names no dependency {name} (it names {sorted(wanted)})")
            if not _allows(wanted[name]["version"], version):
                raise ValueError(f"{metadata['name']} wants {name} {wanted[name]['version']}, not {version}")
            for stale in list(charts.glob(f"{name}-*.tgz")) + ([charts / name] if (charts / name).exists() else []):
                raise ValueError(f"{metadata['name']} already vendors {stale.name}; refusing to add {name} {version}")
            loaded.save(str(charts))
    present = {}
    for entry in sorted(charts.iterdir()):  # what is vendored, added here or kept in the tree
        with helm.Chart.load(str(entry)) as loaded:
            present[loaded.name] = loaded.version
    for name, dependency in wanted.items():
        if name not in present:
            raise ValueError(
                f"{metadata['name']} needs dependency {name} {dependency['version']}: pass --dependency or --dependency-git"
            )
        if dependency.get("repository") and not _allows(dependency["version"], present[name]):
            raise ValueError(f"{metadata['name']} vendors {name} {present[name]}, not {dependency['version']}")


def _export_from_git(git_dir: Path, ref: str, paths: list[str], into: Path) -> Path:
    """Export ``paths`` at ``ref``; the first is the chart (others are what its symlinks point to)."""
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", ref, *paths], check=True, capture_output=True
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    tar_path = into / "chart.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / paths[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.helm_render", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="package local chart directories into the chart cache")
    cache.add_argument("chart_dirs", nargs="*", type=Path)
    cache.add_argument("--git-dir", type=Path, help="a (bare) git repository holding the chart")
    cache.add_argument("--ref", help="tag or commit of the pinned release (with --git-dir)")
    cache.add_argument(
        "--path", action="append", default=[],
        help="the chart's directory inside the repository (with --git-dir); repeat for paths its symlinks need",
    )
    cache.add_argument("--stamp-version", help="set Chart.yaml version, as `helm package --version` (release pipelines)")
    cache.add_argument("--stamp-app-version", help="set Chart.yaml appVersion, as `helm package --app-version`")
    cache.add_argument(
        "--dependency", action="append", default=[], type=Path, metavar="CHART",
        help="a subchart (directory or .tgz) to vendor into charts/, as `helm dependency build`",
    )
    cache.add_argument(
        "--dependency-git", action="append", default=[], nargs=3, metavar=("GIT_DIR", "REF", "PATH"),
        help="a subchart exported from another (bare) git repository at REF",
    )
    args = parser.parse_args(argv)
    if not HELM_INSTALLED:
        raise SystemExit("helm-python-sdk is not installed: pip install -r tests/requirements-helm.txt")
    dirs = list(args.chart_dirs)
    with tempfile.TemporaryDirectory() as tmp:
        if args.git_dir:
            if not (args.ref and args.path):
                parser.error("--git-dir needs --ref and --path")
            dirs.append(_export_from_git(args.git_dir, args.ref, args.path, Path(tmp) / "chart"))
        if not dirs:
            parser.error("name chart directories or --git-dir/--ref/--path")
        changes = args.stamp_version or args.stamp_app_version or args.dependency or args.dependency_git
        if changes and len(dirs) != 1:
            parser.error("--stamp-*/--dependency* apply to exactly one chart")
        dependencies = list(args.dependency)
        for i, (git_dir, ref, path) in enumerate(args.dependency_git):
            dependencies.append(_export_from_git(Path(git_dir), ref, [path], Path(tmp) / f"dependency-{i}"))
        for chart_dir in dirs:
            if changes:  # never edit the caller's checkout: work on a copy
                copy = Path(tmp) / "stamped" / chart_dir.name
                shutil.copytree(chart_dir, copy, symlinks=False)
                chart_dir = copy
                stamp(chart_dir, version=args.stamp_version, app_version=args.stamp_app_version)
                try:
                    vendor_dependencies(chart_dir, dependencies)
                except ValueError as exc:
                    raise SystemExit(f"error: {exc}") from None
            print(add_to_cache(chart_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# -- placement: would a pod template land on a node with these labels and taints? ------------------

def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values", [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if key not in labels:
            return False
        have, want = int(labels[key]), int(values[0])
        return have > want if op == "Gt" else have < want
    raise ValueError(f"unknown node selector operator {op!r}")


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint["key"]:
                return True
        elif t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def schedulable_on(pod_spec: dict[str, Any], labels: dict[str, str], taints: list[dict[str, str]]) -> bool:
    """The scheduler's hard filters for a node: nodeSelector, required node affinity, and taints
    with effect NoSchedule/NoExecute (taints in Kubernetes spelling)."""
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if required:
        terms = required.get("nodeSelectorTerms") or []
        if not any(all(_expression_matches(e, labels) for e in term.get("matchExpressions", [])) for term in terms):
            return False
    hard = [t for t in taints if t["effect"] in ("NoSchedule", "NoExecute")]
    return all(_tolerates(pod_spec.get("tolerations") or [], t) for t in hard)


def pod_spec_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The pod template spec of a workload object, or None for anything else."""
    if obj.get("kind") in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
        return obj["spec"]["template"]["spec"]
    if obj.get("kind") == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


# -- custom resources: checked against the CRDs the chart itself ships -------------------------------

class _CrdLoader(yaml.SafeLoader):
    """PyYAML's safe loader reads a bare ``=`` (an enum value in prometheus-operator CRDs) as YAML
    1.1's ``value`` tag, which it cannot build; Kubernetes (YAML 1.2) reads the string ``=``."""


_CrdLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


@functools.cache
def chart_crd_schemas(chart: HelmChart) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(group, version, kind) -> openAPIV3Schema`` of every CRD in the cached chart's ``crds/``
    directories (its own and its subcharts'), as Helm installs them before the templates."""
    schemas: dict[tuple[str, str, str], dict[str, Any]] = {}
    with tarfile.open(cached_chart(chart)) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")  # <chart>/crds/x.yaml or <chart>/charts/<sub>/crds/x.yaml
            in_crds = len(parts) >= 3 and parts[-2] == "crds" and (len(parts) == 3 or parts[-4] == "charts")
            if not (member.isfile() and in_crds and member.name.endswith((".yaml", ".yml"))):
                continue
            extracted = archive.extractfile(member)  # None only for a member that is no regular file
            schemas.update(crd_schemas_of(extracted.read() if extracted else b""))
    return schemas


#: The CRDs that ship as release manifests, beside the clone (``../shared/manifests``, its README).
SHARED_MANIFESTS = SHARED_CHARTS.parent / "manifests"


def crd_schemas_of(text: str | bytes) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(group, version, kind) -> openAPIV3Schema`` of every served version of the CRDs in a YAML stream."""
    schemas: dict[tuple[str, str, str], dict[str, Any]] = {}
    for doc in yaml.load_all(text, Loader=_CrdLoader):  # noqa: S506 - safe loader
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec["versions"]:
            if version.get("served", True) and "schema" in version:
                schemas[(spec["group"], version["name"], spec["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return schemas


def manifest_path(manifest: Any) -> Path:
    """The local copy of a pinned release manifest (``versions.ReleaseManifest``)."""
    return SHARED_MANIFESTS / manifest.folder / manifest.file


def _closed(schema: Any) -> Any:
    """The CRD schema with unknown fields refused: the API server would prune them silently (a
    setting that is quietly lost), so a strict check treats them as errors."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {k: (_closed(v) if k in ("items", "additionalProperties", "allOf", "anyOf", "oneOf", "not") else v) for k, v in schema.items()}
    if "properties" in schema:
        closed["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            closed["additionalProperties"] = False
    return closed


def custom_resource_errors(obj: dict[str, Any], schemas: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    """Why ``obj`` (a custom resource) would be refused or pruned by its CRD; [] when it fits."""
    import jsonschema

    group, _, version = obj["apiVersion"].rpartition("/")
    schema = schemas.get((group, version, obj["kind"]))
    if schema is None:
        return [f"no CRD in the chart serves {obj['apiVersion']} {obj['kind']}"]
    schema = _closed(schema)
    schema.setdefault("properties", {}).update(
        {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}
    )
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]
