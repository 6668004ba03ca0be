"""GPU device plugin: pinned chart and image, tolerates the GPU taint, bounded resources."""

from __future__ import annotations

from components import contract, versions


def release(plan):
    (rel,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "nvidia-device-plugin"]
    return rel


def test_release_is_pinned_from_versions(dev_plan):
    inputs = release(dev_plan).inputs
    assert (inputs["chart"], inputs["version"]) == ("nvidia-device-plugin", "0.20.0")
    assert inputs["version"] == versions.NVIDIA_DEVICE_PLUGIN.version
    assert inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert inputs["values"]["image"] == {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": versions.NVIDIA_DEVICE_PLUGIN_IMAGE.chart_tag}
    assert versions.NVIDIA_DEVICE_PLUGIN_IMAGE.chart_tag.startswith("v0.20.0@sha256:")


def test_plugin_tolerates_gpu_taint_and_has_resources(dev_plan):
    values = release(dev_plan).inputs["values"]
    assert contract.gpu_toleration() in values["tolerations"]
    assert values["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}
    assert values["resources"]["limits"]["memory"] == "256Mi"


def test_release_goes_through_the_cluster_provider(dev_plan):
    (provider,) = dev_plan.of_type("pulumi:providers:kubernetes")
    assert release(dev_plan).provider.startswith(provider.urn + "::")
