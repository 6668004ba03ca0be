"""Nothing floats: every chart, image and AMI type in the plans is exact and comes from versions.py."""

from __future__ import annotations

import re

from components import versions

EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
#: Image tags are releases as their projects name them: GDRCopy's are two-part (``v2.6``), Envoy's
#: distroless build names its variant first (``distroless-v1.33.2``).
EXACT_IMAGE_TAG = re.compile(r"^([a-z]+-)?v?\d+\.\d+(\.\d+)?(-[0-9A-Za-z.-]+)?$")
PINNED_CHARTS = {
    (c.chart, c.version, c.repository)
    for c in vars(versions).values()
    if isinstance(c, versions.HelmChart)
}
PINNED_IMAGES = {(i.repository, i.chart_tag) for i in vars(versions).values() if isinstance(i, versions.Image)}


def _images(value):
    if isinstance(value, dict):
        image = value.get("image")
        if isinstance(image, dict) and "repository" in image:
            # kube-prometheus-stack and its subcharts: registry apart, digest in sha (bare hex or whole)
            # or digest; the pin's chart_tag is tag@digest.
            repository = f"{image['registry']}/{image['repository']}" if image.get("registry") else image["repository"]
            tag, digest = image.get("tag", ""), image.get("digest") or image.get("sha") or ""
            if digest and "@" not in tag:
                tag = f"{tag}@{digest if digest.startswith('sha256:') else 'sha256:' + digest}"
            yield repository, tag
        for v in value.values():
            yield from _images(v)
    elif isinstance(value, list):
        for v in value:
            yield from _images(v)


def test_versions_module_has_only_exact_values():
    for name, value in vars(versions).items():
        if isinstance(value, versions.HelmChart):
            assert EXACT_VERSION.match(value.version), name
        if isinstance(value, versions.Image):
            assert EXACT_IMAGE_TAG.match(value.tag), name
    assert EXACT_VERSION.match(versions.POD_IDENTITY_AGENT_ADDON_VERSION)


def test_every_release_in_the_plan_is_pinned_from_versions(stack_plan):
    releases = stack_plan.of_type("kubernetes:helm.sh/v3:Release")
    assert releases
    for release in releases:
        inputs = release.inputs
        repo = inputs.get("repositoryOpts", {}).get("repo")
        chart = inputs["chart"] if repo else inputs["chart"].rsplit("/", 1)[1]
        repo = repo or inputs["chart"].rsplit("/", 1)[0]
        assert (chart, inputs["version"], repo) in PINNED_CHARTS, release.urn


def test_every_image_in_the_plan_is_pinned_from_versions(dev_plan, prod_plan):
    images = [img for plan in (dev_plan, prod_plan) for r in plan.resources for img in _images(r.inputs)]
    assert len(images) >= 2
    for image in images:
        assert image in PINNED_IMAGES, image


def test_ami_types_come_from_versions(stack_plan):
    used = {r.inputs["amiType"] for r in stack_plan.of_type("eks:index:ManagedNodeGroup")}
    assert used == {versions.SYSTEM_AMI_TYPE, versions.GPU_AMI_TYPE}



def test_every_supported_minor_has_pinned_add_ons_and_an_autoscaler_release():
    assert versions.SUPPORTED_KUBERNETES_VERSIONS == ("1.34", "1.35", "1.36")
    for minor in versions.SUPPORTED_KUBERNETES_VERSIONS:
        addons = versions.EKS_ADDONS[minor]
        for name in ("coredns", "kube_proxy", "vpc_cni", "pod_identity_agent"):
            assert re.match(r"^v\d+\.\d+\.\d+-eksbuild\.\d+$", getattr(addons, name)), (minor, name)
        assert addons.kube_proxy.startswith(f"v{minor}."), "kube-proxy follows the cluster minor"
        assert versions.CLUSTER_AUTOSCALER_IMAGES[minor].tag.startswith(f"v{minor}."), "one autoscaler release per minor"
        assert minor in versions.STANDARD_SUPPORT_ENDS


def test_image_renders_tag_and_digest_and_refuses_a_malformed_digest():
    import pytest

    digest = "sha256:" + "a" * 64
    assert str(versions.Image("r/x", "v1", digest)) == f"r/x:v1@{digest}"
    assert str(versions.Image("r/x", "v1")) == "r/x:v1"
    with pytest.raises(ValueError, match="not sha256"):
        versions.Image("r/x", "v1", "sha256:short")


def _pod_images(value):
    if isinstance(value, dict):
        for key in ("containers", "initContainers"):
            for container in value.get(key) or []:
                yield container["image"]
        for v in value.values():
            yield from _pod_images(v)
    elif isinstance(value, list):
        for v in value:
            yield from _pod_images(v)


def test_pod_images_are_full_references_from_versions_with_their_digest(dev_plan, prod_plan):
    references = {str(i) for i in vars(versions).values() if isinstance(i, versions.Image)}
    used = {img for plan in (dev_plan, prod_plan) for r in plan.resources for img in _pod_images(r.inputs)}
    assert used and used <= references
    assert str(versions.AWS_CLI_IMAGE) in used and "@sha256:" in str(versions.AWS_CLI_IMAGE)
