"""The plan's Kubernetes objects and Helm releases as YAML documents, as a reviewer would read them."""

from __future__ import annotations

import re
from typing import Any

import yaml

from automation.offline.plan import Plan
from automation.offline.wire import SECRET_SIG, SIG_KEY
from policies.capacity.kinds import HELM_TYPES

#: PyYAML's safe dumper in C (libyaml) where PyYAML was built with it, else the pure-Python one.
_SAFE_DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class ManifestDumper(_SAFE_DUMPER):
    """PyYAML's safe dumper, with multi-line text (a script, an embedded config file) written as a
    literal block (``|``) as people write it in manifests; the emitter still quotes text a block
    cannot hold (trailing spaces, control characters)."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


ManifestDumper.add_representer(str, _represent_str)


def dumps_yaml(document: Any) -> str:
    """One manifest's YAML text: block style, keys in the document's order."""
    return yaml.dump(document, Dumper=ManifestDumper, sort_keys=False, default_flow_style=False)


def redact_secrets(value: Any, *, wire: bool = True) -> Any:
    """Secret plaintext replaced by ``[secret]``: still wrapped as on the wire for the plan, or as a
    bare value for manifests, which must stay valid Kubernetes objects.

    Copies only the dicts and lists on the way to a secret and shares the rest with ``value``:
    treat the result as read-only.
    """
    return _redacted(value, wire)


def redact_plan(plan: Plan) -> dict[str, Any]:
    """The plan file's content with secrets redacted, resource by resource."""
    content = plan.to_json()
    content["resources"] = [redact_secrets(resource) for resource in content["resources"]]
    return content


def _redacted(value: Any, wire: bool) -> Any:
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            hidden = _hide(value.get("value"))
            return {SIG_KEY: SECRET_SIG, "value": hidden} if wire else hidden
        copy = None
        for key, item in value.items():
            redacted = _redacted(item, wire)
            if redacted is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = redacted
        return value if copy is None else copy
    if isinstance(value, list):
        redacted_items = [_redacted(item, wire) for item in value]
        return value if all(r is i for r, i in zip(redacted_items, value)) else redacted_items
    return value


def _hide(value: Any) -> Any:
    """Keep a secret's shape (map keys, list length) and hide every leaf."""
    if isinstance(value, dict):
        return {k: _hide(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide(v) for v in value]
    return "[secret]"


def _slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", "-".join(p for p in parts if p).lower()).strip("-")


def kubernetes_document(type_: str, name: str, custom: bool, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A resource's manifest, file name and YAML document, if it is a Kubernetes object or a Helm
    release (``None`` otherwise); secrets redacted."""
    if not custom or not type_.startswith("kubernetes:"):
        return None
    inputs = redact_secrets(inputs, wire=False)
    if type_ in HELM_TYPES:
        repo = inputs.get("repositoryOpts", {}).get("repo", "")
        document = {
            "helmRelease": inputs.get("name", name),
            "namespace": inputs.get("namespace", "default"),
            "chart": inputs.get("chart"),
            "version": inputs.get("version"),
            "repository": repo,
            "values": inputs.get("values", {}),
        }
        return f"helm-{_slug(document['namespace'], document['helmRelease'])}.yaml", document
    metadata = inputs.get("metadata", {})
    kind = inputs.get("kind", type_.split(":")[-1])
    return f"{_slug(kind, metadata.get('namespace', ''), metadata.get('name', name))}.yaml", inputs


def kubernetes_documents(plan: Plan) -> dict[str, dict[str, Any]]:
    """File name -> YAML document for every Kubernetes object and Helm release in the plan (of two
    with one file name, the later in the plan's order)."""
    documents: dict[str, dict[str, Any]] = {}
    for resource in plan.resources:
        manifest = kubernetes_document(resource.type, resource.name, resource.custom, resource.inputs)
        if manifest is not None:
            documents[manifest[0]] = manifest[1]
    return documents
