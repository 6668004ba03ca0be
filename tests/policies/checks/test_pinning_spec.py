"""container-image-pinned with a digest required, as a specification: an exempt 'repo:tag' passes
without a digest, in pod templates and in Helm values, and exemption never covers a moving tag."""

from __future__ import annotations

from tests.policies.builders import helm_release, patch, template_path, workload
from tests.policies.conftest import one

IMAGE = "container-image-pinned"
CONTAINER = f"{template_path('Deployment')}.containers.0.image"
EXEMPT = "vllm/vllm-openai:v0.11.0"


def with_image(image: str) -> dict:
    return patch(workload(), {CONTAINER: image})


def test_an_exempt_tag_passes_without_a_digest_and_others_do_not(pack):
    pack.configure({IMAGE: {"requireDigest": True, "digestExemptImages": [EXEMPT, "vllm/vllm-openai:latest"]}})
    assert pack.messages(with_image(EXEMPT), IMAGE) == []
    message = one(pack.messages(with_image("vllm/vllm-openai:v0.10.0"), IMAGE), "is pinned by tag only")
    assert EXEMPT not in message
    one(pack.messages(with_image("vllm/vllm-openai:latest"), IMAGE), "'vllm/vllm-openai:latest'")


def test_an_exempt_tag_in_helm_values(pack):
    pack.configure({IMAGE: {"requireDigest": True,
                            "digestExemptImages": ["nvcr.io/nvidia/k8s-device-plugin:v0.20.0"]}})
    exempt = {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"}}
    assert pack.messages(helm_release(values=exempt), IMAGE) == []
    other = {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.19.0"}}
    one(pack.messages(helm_release(values=other), IMAGE), "'nvcr.io/nvidia/k8s-device-plugin:v0.19.0'",
        "pinned by tag only")
