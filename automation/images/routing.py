"""Where the resolver's requests go, and how long each may take.

``--registry-override HOST=URL`` sends every request for HOST (a registry, its token realm, a
redirect target) to URL: a mirror, or a test registry on 127.0.0.1. Plain ``http`` is allowed only
for those URLs; anything else must be ``https``. No third-party import here: the CLI parses the
flag before it needs an HTTP client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from automation.images.reference import DOCKER_HUB, DOCKER_HUB_API

#: Seconds one exchange may take in all, connection, headers and body (``--timeout``).
DEFAULT_TIMEOUT = 10.0


class Unresolved(Exception):
    """Why one image's digest could not be read (the image stays as it was)."""


class OverrideError(ValueError):
    """A ``--registry-override`` value that is not ``HOST=http(s)://host[:port][/path]``."""


def parse_override(text: str) -> tuple[str, str]:
    """``HOST=URL`` -> (host, base URL). ``docker.io`` means Docker Hub's API host."""
    host, sep, url = text.partition("=")
    host = host.strip().lower()
    if not sep or not host or "/" in host or any(c.isspace() for c in host):
        raise OverrideError(f"{text!r} is not HOST=URL (e.g. docker.io=http://127.0.0.1:5000)")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise OverrideError(f"{text!r}: the URL must be http(s)://host[:port][/path]")
    if host in (DOCKER_HUB, "index.docker.io"):
        host = DOCKER_HUB_API
    return host, url.strip().rstrip("/")


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


@dataclass
class Router:
    """Sends a request for an overridden host to its base URL; refuses plain http anywhere else."""

    overrides: Mapping[str, str] = field(default_factory=dict)

    def route(self, url: str) -> str:
        parts = urlsplit(url)
        base = self.overrides.get(parts.netloc.lower())
        if base is not None:
            return base + parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.scheme != "https" and origin(url) not in {origin(b) for b in self.overrides.values()}:
            raise Unresolved(f"refused to follow {origin(url)}: not https and not a --registry-override URL")
        return url


