"""Every core Kubernetes object in both plans passes strict schema validation at the default minor."""

from __future__ import annotations

import kubernetes_validate

from automation.offline.manifests import kubernetes_documents
from components import versions

KUBERNETES_VERSION = versions.DEFAULT_KUBERNETES_VERSION
CUSTOM_KINDS = {"NodePool", "EC2NodeClass", "ScaledObject", "PodMonitor", "ServiceMonitor", "PrometheusRule"}


def test_core_objects_are_valid_under_strict_schemas(stack_plan):
    documents = [d for d in kubernetes_documents(stack_plan).values() if "helmRelease" not in d]
    core = [d for d in documents if d["kind"] not in CUSTOM_KINDS]
    assert len(core) >= 15
    failures = []
    for document in core:
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{document['kind']}/{document['metadata']['name']}: {exc.message} at {list(exc.path)}")
    assert not failures, failures


def test_strict_validation_catches_an_unknown_field(dev_plan):
    (deployment,) = [d for d in kubernetes_documents(dev_plan).values() if d.get("kind") == "Deployment"][:1]
    broken = {**deployment, "spec": {**deployment["spec"], "replicaz": 2}}
    try:
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        assert "replicaz" in exc.message
    else:
        raise AssertionError("strict validation accepted an unknown field")
