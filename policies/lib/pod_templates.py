"""Every pod template of a resource, at any depth: the built-in workload kinds (``capacity.kinds``) and
those a policy's config adds under ``customWorkloads``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from capacity.kinds import DAEMONSET, INLINE_POD_SPEC, KSERVE_CONTAINER_FIELDS, POD_TEMPLATE_PATHS

from lib.resources import Resource
from lib.values import UNKNOWN, as_dict, as_list, dig

#: Policy parameter that adds workload kinds (custom resources) to the built-in table above.
CUSTOM_WORKLOADS = "customWorkloads"
CUSTOM_WORKLOADS_SCHEMA: dict[str, Any] = {
    CUSTOM_WORKLOADS: {
        "type": "object",
        "additionalProperties": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "pattern": r"^(|[A-Za-z0-9_-]+(\[\])?(\.[A-Za-z0-9_-]+(\[\])?)*)$"},
        },
        "default": {},
        "description": (
            "Extra workload kinds whose pod templates the workload policies judge: resource type token "
            "(e.g. 'kubernetes:example.com/v1:InferenceGroup') -> dotted paths of its pod templates, "
            "'[]' after a list field for every item (e.g. 'spec.groups[].template'), '' when the object is a pod."
        ),
    }
}


def workload_paths(config: Mapping[str, Any] | None = None) -> dict[str, tuple[str, ...]]:
    """The built-in pod-template table plus the kinds a policy's config adds."""
    extra = (config or {}).get(CUSTOM_WORKLOADS) or {}
    return {**POD_TEMPLATE_PATHS, **{k: tuple(v) for k, v in extra.items() if isinstance(v, list)}}


@dataclass
class PodTemplate:
    """One pod template of a workload resource, with the namespace it will run in."""

    resource: Resource
    kind: str
    namespace: Any
    metadata: dict[str, Any]
    spec: Any
    #: Where in the resource the template sits ("" for a Pod, else e.g. "spec.workerGroupSpecs[1].template").
    where: str = ""
    #: Whether the resource can hold several templates (then messages name ``where``).
    several: bool = False

    @property
    def is_daemonset(self) -> bool:
        return self.resource.type == DAEMONSET

    @property
    def label(self) -> str:
        """How messages name the template: the resource, plus the template's path when it has several."""
        return f"{self.resource.label} ({self.where})" if self.several and self.where else self.resource.label

    def containers(self, *fields: str) -> Iterator[dict[str, Any]]:
        for field_name in fields or ("initContainers", "containers", "ephemeralContainers"):
            items = as_list(dig(self.spec, field_name))
            if items is UNKNOWN:
                continue
            for item in items:
                if isinstance(item, dict):
                    yield item

    @property
    def annotations(self) -> dict[str, Any]:
        value = dig(self.metadata, "annotations", default={})
        return value if isinstance(value, dict) else {}

    @property
    def tolerations(self) -> Any:
        return as_list(dig(self.spec, "tolerations"))


def _walk(node: Any, steps: list[str], where: str) -> Iterator[tuple[str, Any]]:
    """(concrete path, value) for a dotted path whose ``name[]`` steps fan out over list items."""
    if not steps:
        yield where, node
        return
    step, rest = steps[0], steps[1:]
    fan = step.endswith("[]")
    name = step[:-2] if fan else step
    value = dig(node, name)
    here = f"{where}.{name}" if where else name
    if value is None:
        return
    if value is UNKNOWN:
        yield here, UNKNOWN
        return
    if not fan:
        yield from _walk(value, rest, here)
        return
    if not isinstance(value, list):
        return
    for index, item in enumerate(value):
        if item is UNKNOWN:
            yield f"{here}[{index}]", UNKNOWN
        else:
            yield from _walk(item, rest, f"{here}[{index}]")


def _as_template(spec: Any) -> Any:
    """A pod spec given inline (a KServe component) as a template: its model/framework fields join
    the containers, its annotations and labels are the template's metadata."""
    if not isinstance(spec, dict):
        return spec
    containers = as_list(spec.get("containers") or [])
    if containers is UNKNOWN:
        return {"metadata": {}, "spec": UNKNOWN}
    extra = [spec[f] for f in KSERVE_CONTAINER_FIELDS if isinstance(spec.get(f), dict)]
    metadata = {k: spec[k] for k in ("annotations", "labels") if isinstance(spec.get(k), dict)}
    return {"metadata": metadata, "spec": {**spec, "containers": [*containers, *extra]}}


def pod_templates(resource: Resource, config: Mapping[str, Any] | None = None) -> list[PodTemplate]:
    """Every pod template of a workload (built-in kinds and the config's ``customWorkloads``), at any depth.

    A template that is unknown during preview comes back with ``spec`` :data:`UNKNOWN` ("can't judge").
    """
    paths = workload_paths(config).get(resource.type)
    if not paths:
        return []
    kind = resource.type.rsplit(":", 1)[-1]
    namespace = resource.get("metadata", "namespace", default="default")
    out = []
    several = len(paths) > 1 or any("[]" in p for p in paths)
    for path in paths:
        inline = path.endswith(INLINE_POD_SPEC)
        path = path.removesuffix(INLINE_POD_SPEC)
        if path == "":
            found: list[tuple[str, Any]] = [("", resource.props)]
        else:
            found = list(_walk(resource.props, path.split("."), ""))
        if inline:
            found = [(where, _as_template(value)) for where, value in found]
        for where, template in found:
            if template is UNKNOWN:
                out.append(PodTemplate(resource, kind, UNKNOWN, {}, UNKNOWN, where, several))
            elif isinstance(template, dict):
                out.append(PodTemplate(
                    resource=resource,
                    kind=kind,
                    namespace=namespace,
                    metadata=as_dict(template.get("metadata")) or {},
                    spec=template.get("spec") if template.get("spec") is not None else {},
                    where=where,
                    several=several,
                ))
    return out


def pod_template(resource: Resource) -> PodTemplate | None:
    """The first pod template (for kinds that have exactly one, such as DaemonSets)."""
    templates = pod_templates(resource)
    return templates[0] if templates else None
