"""helm-chart-version-pinned, container-image-pinned, karpenter-ami-alias-pinned."""

from __future__ import annotations

import pytest

from tests.policies.builders import UNKNOWN, WORKLOAD_KINDS, ec2nodeclass, helm_chart_v4, helm_release, patch, template_path, workload
from tests.policies.conftest import ROOT, one

CHART, IMAGE, ALIAS = "helm-chart-version-pinned", "container-image-pinned", "karpenter-ami-alias-pinned"
DIGEST = "@sha256:" + "a" * 64


@pytest.mark.parametrize(
    "res",
    [
        helm_release(),
        helm_release(version="v25.10.0"),
        helm_release(version="1.2.3-rc.1"),
        helm_chart_v4("oci://public.ecr.aws/karpenter/karpenter", "1.14.1"),
        helm_chart_v4("oci://public.ecr.aws/karpenter/karpenter:1.14.1"),
        helm_chart_v4("https://example.com/charts/keda-2.20.2.tgz"),
        helm_chart_v4("./charts/local-chart"),
    ],
    ids=["release", "v-prefix", "prerelease", "oci", "oci-embedded", "tgz-url", "local"],
)
def test_pinned_charts(pack, res):
    assert pack.messages(res, CHART) == []


@pytest.mark.parametrize(
    "res, fragment",
    [
        (helm_release(version=None), "with no version"),
        (helm_release(version=""), "with no version"),
        (helm_release(version="latest"), "with version 'latest'"),
        (helm_release(version="^1.0.0"), "version '^1.0.0', a range"),
        (helm_release(version="~1.2"), "version '~1.2', a range"),
        (helm_release(version=">=0.17.0"), "a range"),
        (helm_release(version="1.x"), "version '1.x', a range"),
        (helm_release(version="*"), "a range"),
        (helm_release(version="0.20"), "version '0.20', which is not an exact X.Y.Z release"),
        (helm_chart_v4("oci://public.ecr.aws/karpenter/karpenter"), "with no version"),
        (helm_chart_v4("oci://public.ecr.aws/karpenter/karpenter:1.x"), "version '1.x', a range"),
        (helm_chart_v4("oci://public.ecr.aws/karpenter/karpenter", "latest"), "version 'latest'"),
    ],
    ids=["missing", "empty", "latest", "caret", "tilde", "gte", "x", "star", "partial", "oci-none", "oci-range", "oci-latest"],
)
def test_floating_charts(pack, res, fragment):
    one(pack.messages(res, CHART), fragment, "Set version to an exact release")


@pytest.mark.parametrize("kind", list(WORKLOAD_KINDS))
@pytest.mark.parametrize("field", ["containers", "initContainers", "ephemeralContainers"])
@pytest.mark.parametrize(
    "image, problem",
    [
        ("vllm/vllm-openai", "has no tag, so it means 'latest'"),
        ("vllm/vllm-openai:latest", "uses the 'latest' tag"),
        ("registry:5000/team/vllm", "has no tag"),
        ("vllm/vllm-openai@sha256:abc", "has a malformed digest"),
    ],
    ids=["no-tag", "latest", "registry-port", "bad-digest"],
)
def test_floating_images_in_pod_templates(pack, kind, field, image, problem):
    res = patch(workload(kind), {f"{template_path(kind)}.{field}": [{"name": "c", "image": image}]})
    one(pack.messages(res, IMAGE), f"{field[:-1]} 'c' image '{image}' {problem}")


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "registry:5000/vllm:1", f"vllm/vllm-openai{DIGEST}", f"x:1{DIGEST}"])
def test_pinned_images(pack, image):
    res = patch(workload(), {f"{template_path('Deployment')}.containers.0.image": image})
    assert pack.messages(res, IMAGE) == []


def test_digest_can_be_required(pack):
    pack.configure({IMAGE: {"requireDigest": True}})
    one(pack.messages(workload(), IMAGE), "pinned by tag only")
    assert pack.messages(patch(workload(), {f"{template_path('Deployment')}.containers.0.image": f"vllm{DIGEST}"}), IMAGE) == []


@pytest.mark.parametrize(
    "values",
    [
        {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"}},
        {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin"}},
        {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": ""}},
        {"image": {"repository": "x", "digest": "sha256:" + "b" * 64}},
        {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "580.95.05"}},
        {"sidecar": {"image": "busybox:1.37"}},
        {"image": UNKNOWN},
        {"image": {"keda": {"registry": "ghcr.io", "repository": "kedacore/keda", "tag": "2.20.1"},
                   "webhooks": {"registry": "ghcr.io", "repository": "kedacore/keda-admission-webhooks", "tag": "2.20.1"},
                   "pullPolicy": "IfNotPresent"}},
        {"prometheusOperator": {"thanosImage": {"registry": "quay.io", "repository": "thanos/thanos", "tag": "v0.42.4"},
                                "alertmanagerDefaultBaseImage": "quay.io/prometheus/alertmanager"}},
    ],
    ids=["tag", "chart-default", "empty-tag", "digest", "operator-style", "string", "unknown", "images-by-component",
         "named-image-key"],
)
def test_pinned_helm_images(pack, values):
    assert pack.messages(helm_release(values=values), IMAGE) == []


@pytest.mark.parametrize(
    "values, fragment",
    [
        ({"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "latest"}}, "at values.image.tag"),
        ({"dcgmExporter": {"repository": "nvcr.io/nvidia/k8s", "image": "dcgm-exporter", "version": "latest"}},
         "at values.dcgmExporter.version"),
        ({"sidecars": [{"image": "busybox"}]}, "'busybox' at values.sidecars[0].image, which has no tag"),
        ({"image": {"repository": "ghcr.io/x/y:latest"}}, "at values.image.repository"),
        ({"image": {"keda": {"registry": "ghcr.io", "repository": "kedacore/keda", "tag": "2.20.1"},
                    "webhooks": {"registry": "ghcr.io", "repository": "kedacore/keda-admission-webhooks", "tag": "latest"}}},
         "'ghcr.io/kedacore/keda-admission-webhooks:latest' at values.image.webhooks.tag"),
        ({"prometheusOperator": {"thanosImage": {"registry": "quay.io", "repository": "thanos/thanos", "tag": "main"}}},
         "'quay.io/thanos/thanos:main' at values.prometheusOperator.thanosImage.tag"),
    ],
    ids=["tag-latest", "operator-style-latest", "nested-list", "tag-in-repository", "images-by-component",
         "named-image-key"],
)
def test_floating_helm_images(pack, values, fragment):
    one(pack.messages(helm_release(values=values), IMAGE), fragment)


@pytest.mark.parametrize(
    "changes",
    [{"spec.template.spec.containers.0.image": UNKNOWN}, {"spec.template.spec.containers": UNKNOWN}, {"spec.template": UNKNOWN}],
    ids=["image", "containers", "template"],
)
def test_unknown_images_are_not_judged(pack, changes):
    assert pack.messages(patch(workload(), changes), IMAGE) == []


@pytest.mark.parametrize("res", [helm_release(version=UNKNOWN), helm_chart_v4(UNKNOWN, "1.0.0")], ids=["version", "chart"])
def test_unknown_chart_fields_are_not_judged(pack, res):
    assert pack.messages(res, CHART) == []


def test_nodeclass_alias_pinned(pack):
    assert pack.messages(ec2nodeclass(), ALIAS) == []
    latest = patch(ec2nodeclass(), {"spec.amiSelectorTerms": [{"alias": "al2023@latest"}]})
    one(pack.messages(latest, ALIAS), "alias 'al2023@latest'", "'al2023@v20251117'")
    assert pack.messages(patch(ec2nodeclass(), {"spec.amiSelectorTerms": UNKNOWN}), ALIAS) == []


def test_operator_shaped_images_go_through_the_prod_digest_rule(pack):
    """``{repository, image, version}``: the GPU Operator pulls repository/image@version for a sha256
    version, else repository/image:version; prod requires the digest."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    by_tag = {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "580.95.05"}}
    one(pack.messages(helm_release(values=by_tag), IMAGE), "'nvcr.io/nvidia/driver:580.95.05' at values.driver.version",
        "pinned by tag only")
    by_digest = {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "sha256:" + "c" * 64}}
    assert pack.messages(helm_release(values=by_digest), IMAGE) == []


def test_images_by_component_and_named_image_keys_go_through_the_prod_digest_rule(pack):
    """KEDA's ``image.<component>`` maps and kube-prometheus-stack's ``thanosImage``: prod requires a digest
    (``sha`` is the bare hex kube-prometheus-stack's templates append)."""
    pack.configure(ROOT / "policies" / "config" / "prod.json")
    keda = {"image": {"metricsApiServer": {"registry": "ghcr.io", "repository": "kedacore/keda-metrics-apiserver",
                                           "tag": "2.20.1"}}}
    one(pack.messages(helm_release(values=keda), IMAGE),
        "'ghcr.io/kedacore/keda-metrics-apiserver:2.20.1' at values.image.metricsApiServer.digest", "pinned by tag only")
    thanos = {"prometheusOperator": {"thanosImage": {"registry": "quay.io", "repository": "thanos/thanos",
                                                     "tag": "v0.42.4", "sha": "d" * 64}}}
    assert pack.messages(helm_release(values=thanos), IMAGE) == []
