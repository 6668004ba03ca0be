"""Where an image lives: registry host and repository path, normalised as the runtime normalises them.

The rule is distribution/reference's ``splitDockerDomain`` (github.com/distribution/reference,
normalize.go): the first path component is a registry host only if it contains ``.`` or ``:`` or is
``localhost``; otherwise the image is on Docker Hub (``docker.io``), and a single-component Docker Hub
name gets ``library/`` (official images). So ``amazon/aws-cli`` is ``docker.io/amazon/aws-cli``, not
host ``amazon``, and ``python`` is ``docker.io/library/python``. Docker Hub's API is served by
``registry-1.docker.io`` (the host ``docker.io`` itself only redirects to the website).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.versions import DIGEST_RE

DOCKER_HUB = "docker.io"
#: The host that answers Docker Hub's registry API (moby/moby registry/config.go ``DefaultRegistryHost``).
DOCKER_HUB_API = "registry-1.docker.io"
_LEGACY_DOCKER_HUB = "index.docker.io"
#: A pinnable digest: the only form ``components.versions.Image`` accepts (sha256, lowercase hex).
DIGEST = DIGEST_RE

# distribution/reference regexp.go: path components are lowercase alphanumerics joined by separators.
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?$")


class ReferenceError(ValueError):
    """A repository or tag that no registry would accept."""


@dataclass(frozen=True)
class Reference:
    """One tagged image: ``domain`` as users write it (``docker.io``), ``path`` as the API takes it."""

    domain: str
    path: str
    tag: str

    @property
    def api_host(self) -> str:
        """The host whose ``/v2/`` answers for this image."""
        return DOCKER_HUB_API if self.domain == DOCKER_HUB else self.domain

    @property
    def qualified(self) -> str:
        """``domain/path:tag``: unambiguous for crane, skopeo and docker alike."""
        return f"{self.domain}/{self.path}:{self.tag}"


def parse(repository: str, tag: str) -> Reference:
    """``repository`` as written in an ``Image`` pin, normalised (see the module docstring)."""
    if not _TAG.match(tag):
        raise ReferenceError(f"tag {tag!r} is not a valid tag")
    first, sep, rest = repository.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
        if not _HOST.match(domain):
            raise ReferenceError(f"registry host {domain!r} in {repository!r} is not a host name")
    else:
        domain, path = DOCKER_HUB, repository
    if domain == _LEGACY_DOCKER_HUB:
        domain = DOCKER_HUB
    if domain == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or not all(_COMPONENT.match(part) for part in path.split("/")):
        raise ReferenceError(f"repository {repository!r} is not a valid image name (lowercase a-z, 0-9, . _ -)")
    return Reference(domain, path, tag)
