"""Everything the stack installs is pinned: chart versions, container images, Karpenter AMIs.

A floating reference makes two previews of the same code deploy different software; for charts
and images that is a silent upgrade, for a Karpenter ``@latest`` AMI alias it replaces every node
on each AMI release.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypeGuard

from lib.helm import chart_ref, is_exact_version, values
from lib.kit import ADVISORY, MANDATORY, resource_policy
from lib.pod_templates import POD_TEMPLATE_PATHS, pod_templates
from lib.resources import EC2NODECLASS, HELM_TYPES, Resource
from lib.values import UNKNOWN, as_list

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
#: Tags registries move to new builds: an image under them changes without its reference changing.
MOVING_TAGS = frozenset({"latest", "stable", "nightly", "main", "master", "edge", "dev"})
_VERSION = re.compile(r"\d+\.\d+")


def moving_tag(tag: Any) -> TypeGuard[str]:
    """Whether a tag floats: a moving word (``stable``), one built from it first (``main-stable``,
    ``nightly-2026-01-05``, ``latest-cuda``), or one carrying a moving word but no version
    (``cuda-latest``); ``1.2.3-stable`` and ``12.4.1-devel`` name a release."""
    if not isinstance(tag, str) or not tag:
        return False
    words = [w for w in re.split(r"[-_.+]", tag.lower()) if w]
    if not words:
        return False
    if words[0] in MOVING_TAGS:
        return True
    return any(w in MOVING_TAGS for w in words) and not _VERSION.search(tag)


def _moving(tag: str) -> str:
    return "uses the 'latest' tag" if tag == "latest" else f"uses the moving tag '{tag}'"
_RANGE = re.compile(r"[\^~<>=*|,\s]|(^|\.)[xX](\.|$)")


def _version_problem(version: Any) -> str:
    if version in (None, ""):
        return "no version (Helm installs whatever is newest)"
    text = str(version).strip()
    if text.lower() == "latest":
        return "version 'latest'"
    if _RANGE.search(text):
        return f"version '{text}', a range"
    return f"version '{text}', which is not an exact X.Y.Z release"


def _check_chart(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    ref = chart_ref(resource)
    if ref.kind in ("local", "unknown") or ref.version is UNKNOWN:
        return
    if is_exact_version(ref.version):
        return
    if ref.version in (None, "") and is_exact_version(ref.embedded_version):
        return
    problem = _version_problem(ref.version if ref.version not in (None, "") else ref.embedded_version)
    yield (
        f"{resource.label} installs chart '{ref.name}' with {problem}, so each preview can resolve a different "
        f"chart. Set version to an exact release (for example '1.2.3')."
    )


TAG_ONLY = "is pinned by tag only and this stack requires a digest"


def image_problem(image: Any, require_digest: bool) -> str | None:
    """Why an image reference floats, or ``None`` if it is pinned (or unknown)."""
    if not isinstance(image, str) or not image.strip():
        return None
    if _DIGEST.search(image):
        return None
    if "@" in image:
        return "has a malformed digest"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    if tag is None:
        return "has no tag, so it means 'latest'"
    if moving_tag(tag):
        return _moving(tag)
    if require_digest:
        return TAG_ONLY
    return None


def _helm_image_problems(node: Any, path: str, require_digest: bool) -> Iterator[tuple[str, str, str]]:
    """(values path, image, problem) for image fields in chart values, recursively."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _helm_image_problems(item, f"{path}[{i}]", require_digest)
        return
    if not isinstance(node, dict):
        return
    image = node.get("image")
    if isinstance(image, dict) and _names_images(image):
        # Several images keyed by component, as KEDA's chart spells them (image.keda, image.webhooks).
        for name, each in image.items():
            if isinstance(each, dict) and _is_structured_image(each):
                yield from _structured_image(each, f"{path}.image.{name}", require_digest)
    elif isinstance(image, dict):
        yield from _structured_image(image, f"{path}.image", require_digest)
    elif isinstance(image, str):
        pinned_by = next((k for k in ("tag", "version", "digest") if k in node), None)
        repository = node.get("repository")
        if isinstance(repository, str) and pinned_by in ("tag", "version") and isinstance(node[pinned_by], str):
            yield from _split_image(repository, image, node[pinned_by], f"{path}.{pinned_by}", require_digest)
        elif pinned_by:
            value = node[pinned_by]
            if pinned_by != "digest" and moving_tag(value):
                yield f"{path}.{pinned_by}", f"{image}:{value}", _moving(value)
        elif "repository" not in node:
            problem = image_problem(image, require_digest)
            if problem:
                yield f"{path}.image", image, problem
    for key, child in node.items():
        if key == "image":
            continue
        if _IMAGE_KEY.fullmatch(key) and isinstance(child, dict) and _is_structured_image(child):
            # An image under a name of its own, as kube-prometheus-stack's prometheusOperator.thanosImage.
            yield from _structured_image(child, f"{path}.{key}", require_digest)
        else:
            yield from _helm_image_problems(child, f"{path}.{key}", require_digest)


#: A values key that names one structured image: ``thanosImage`` (camelCase, ending in ``Image``). Text
#: under such a key is left alone: kube-prometheus-stack's ``alertmanagerDefaultBaseImage`` is a
#: repository the operator adds a version to, not an image reference.
_IMAGE_KEY = re.compile(r"[a-z][A-Za-z0-9]*Image")
#: The keys of a structured image's name: chart conventions for the repository.
_REPOSITORY_KEYS = ("repository", "repo", "name")


def _is_structured_image(node: dict[str, Any]) -> bool:
    """``{repository, tag, ...}``: a repository under one of the names charts give it, as text."""
    return any(isinstance(node.get(key), str) for key in _REPOSITORY_KEYS)


def _names_images(image: dict[str, Any]) -> bool:
    """An ``image`` map of images by component (no repository of its own, a structured image under some key)."""
    return not _is_structured_image(image) and any(isinstance(v, dict) and _is_structured_image(v) for v in image.values())


def _split_image(repository: str, image: str, version: str, where: str,
                 require_digest: bool) -> Iterator[tuple[str, str, str]]:
    """``{repository, image, version}`` (the GPU Operator's shape): the operator pulls
    ``repository/image@version`` when the version is a ``sha256:`` digest, else ``repository/image:version``
    (NVIDIA/gpu-operator internal/image/image.go, ``ImagePath``), so the reference it builds is judged
    like any other image, the digest rule included."""
    reference = f"{repository.rstrip('/')}/{image}" + ("@" if version.startswith("sha256:") else ":") + version
    problem = image_problem(reference, require_digest)
    if problem:
        yield where, reference, problem


def _structured_image(image: dict[str, Any], path: str, require_digest: bool) -> Iterator[tuple[str, str, str]]:
    repository = image.get("repository") or image.get("repo") or image.get("name")
    digest, tag = image.get("digest"), image.get("tag")
    registry, sha = image.get("registry"), image.get("sha")
    if UNKNOWN in (repository, digest, tag, registry, sha):
        return
    if isinstance(registry, str) and registry and isinstance(repository, str) and repository:
        repository = f"{registry.rstrip('/')}/{repository}"
    if not digest and isinstance(sha, str) and sha:
        digest = sha if sha.startswith("sha256:") else f"sha256:{sha}"
    if isinstance(digest, str) and digest:
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            yield f"{path}.digest", str(repository), "has a malformed digest"
        return
    if isinstance(repository, str) and ("@" in repository or ":" in repository.rsplit("/", 1)[-1]):
        problem = image_problem(repository, require_digest)
        if problem:
            yield f"{path}.repository", repository, problem
        return
    if isinstance(tag, str) and "@" in tag:
        # Charts that build "repository:tag" take a digest in the tag: "v1.2.3@sha256:...".
        problem = image_problem(f"{repository}:{tag}", require_digest)
        if problem:
            yield f"{path}.tag", f"{repository}:{tag}", problem
        return
    if moving_tag(tag):
        yield f"{path}.tag", f"{repository}:{tag}", _moving(tag)
    elif require_digest and repository:
        yield f"{path}.digest", f"{repository}:{tag or '<chart default>'}", TAG_ONLY


def _check_images(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    require_digest = bool(config["requireDigest"])
    exempt = set(config.get("digestExemptImages") or [])
    fix = ("Pin it by digest ('repo:tag@sha256:...')." if require_digest
           else "Pin it to an exact release tag (e.g. ':v1.2.3') or a digest ('@sha256:...').")
    if resource.type in HELM_TYPES:
        vals = values(resource)
        if vals is UNKNOWN:
            return
        for path, image, problem in _helm_image_problems(vals, "values", require_digest):
            if problem == TAG_ONLY and image in exempt:
                continue
            yield f"{resource.label} sets image '{image}' at {path}, which {problem}. {fix}"
        return
    for template in pod_templates(resource, config):
        if template.spec is UNKNOWN:
            continue
        for field_name in ("initContainers", "containers", "ephemeralContainers"):
            for container in template.containers(field_name):
                container_problem = image_problem(container.get("image"), require_digest)
                if container_problem == TAG_ONLY and container.get("image") in exempt:
                    continue
                if container_problem:
                    yield (
                        f"{template.label}: {field_name[:-1]} '{container.get('name', '?')}' image "
                        f"'{container.get('image')}' {container_problem}. {fix}"
                    )


def _check_ami_alias(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    terms = resource.get("spec", "amiSelectorTerms", default=[])
    if terms is UNKNOWN:
        return
    for term in as_list(terms):
        alias = term.get("alias") if isinstance(term, dict) else None
        if not isinstance(alias, str) or "@" not in alias:
            continue
        family, version = alias.split("@", 1)
        if version == "latest" and not family.startswith("windows"):
            yield (
                f"{resource.label} uses AMI alias '{alias}': every new AMI release drifts and replaces all its "
                f"nodes. Pin a version, e.g. '{family}@v20251117'."
            )


POLICIES = [
    resource_policy(
        name="helm-chart-version-pinned",
        description="Pin every Helm release and chart to an exact chart version (no empty, 'latest' or range).",
        types=HELM_TYPES,
        check=_check_chart,
        enforcement=MANDATORY,
    ),
    resource_policy(
        name="container-image-pinned",
        description=(
            "Pin every container image, in pod templates and Helm values, to an exact release tag (not latest, "
            "stable, nightly, main, master, edge, dev or tags built from them) or, where the stack requires it, a digest."
        ),
        types=frozenset(POD_TEMPLATE_PATHS) | HELM_TYPES,
        check=_check_images,
        enforcement=MANDATORY,
        custom_workloads=True,
        params={
            "requireDigest": {
                "type": "boolean",
                "default": False,
                "description": "Require '@sha256:' digests instead of accepting exact tags (default off; on in prod).",
            },
            "digestExemptImages": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": (
                    "Exact 'repo:tag' references accepted without a digest while requireDigest is on, each a "
                    "documented exception (e.g. a digest that could not be verified); any other tag, or a moving "
                    "tag, is still refused."
                ),
            },
        },
    ),
    resource_policy(
        name="karpenter-ami-alias-pinned",
        description="Pin EC2NodeClass AMI aliases to a version instead of '@latest'.",
        types={EC2NODECLASS},
        check=_check_ami_alias,
        enforcement=ADVISORY,
    ),
]
