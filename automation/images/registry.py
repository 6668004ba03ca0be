"""The OCI distribution API, asked one thing: which digest does ``<name>:<tag>`` point at.

``HEAD /v2/<name>/manifests/<tag>`` with an ``Accept`` header listing the OCI index, OCI manifest,
Docker manifest list and Docker v2 manifest types (OCI distribution-spec, "Pulling manifests"). The
``Accept`` list decides the answer for a multi-arch image: a registry that is not told the client
takes a list answers with one platform's manifest instead, a digest that pins one architecture and
not the image (distribution v2.8 registry/handlers/manifests.go ``GetManifest`` rewrites a Docker
manifest list to its linux/amd64 entry, and answers 404 for an OCI index). The digest is ``Docker-Content-Digest`` when the
registry sends a sha256 one, else the sha256 of the manifest bytes from a ``GET``.

Authentication is the anonymous bearer flow of distribution's token spec (docs/spec/auth/token.md):
a 401 carrying ``WWW-Authenticate: Bearer realm=...,service=...,scope=repository:<name>:pull`` is
answered by ``GET <realm>?service=...&scope=...``, whose JSON ``token`` (or ``access_token``) goes
back as ``Authorization: Bearer``. Docker Hub, ghcr.io, nvcr.io, public.ecr.aws and registry.k8s.io's
backends all hand out pull tokens for public images this way. A token is sent only to the host that
asked for it.

Redirects (registry.k8s.io sends every request to a regional backend) are followed by hand, at most
:data:`MAX_REDIRECTS`, and only to ``https`` URLs or to a base URL given with ``--registry-override``
(a test registry or a mirror on plain http); the token realm obeys the same rule.
"""

from __future__ import annotations

import hashlib
import queue
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import requests

from automation.images.reference import DIGEST, Reference
from automation.images.routing import DEFAULT_TIMEOUT, Router, Unresolved, loopback, origin
from policies.capacity import bounded_json

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
#: Every manifest type whose digest pins an image; lists and indexes first.
MANIFEST_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST, OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join(MANIFEST_TYPES)
#: The distribution spec asks registries to take manifests up to 4 MiB ("Pushing manifests"); no more is read.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
#: A pull token answer is a few kilobytes of JSON; more is not a token server's answer.
MAX_TOKEN_BYTES = 1024 * 1024
MAX_REDIRECTS = 5
#: Tags asked per page, pages followed, and bytes read in all for one repository's tag list (a
#: registry.k8s.io repository with years of builds lists a few thousand tags, well under 1 MiB).
TAG_PAGE_SIZE = 1000
MAX_TAG_PAGES = 50
MAX_TAG_LIST_BYTES = 8 * 1024 * 1024

_REDIRECTS = {301, 302, 303, 307, 308}
_NO_HEAD = {405, 501}
_CHALLENGE_PARAM = re.compile(r'([A-Za-z][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)')


def bearer_challenge(header: str | None) -> dict[str, str] | None:
    """The parameters of the ``Bearer`` challenge in a ``WWW-Authenticate`` header, or None."""
    if not header:
        return None
    match = re.search(r"(?i)\bbearer\s+(.*)", header)
    if not match:
        return None
    params: dict[str, str] = {}
    for key, value in _CHALLENGE_PARAM.findall(match.group(1)):
        key = key.lower()
        if key in params:  # the next challenge (e.g. ", Basic realm=...") starts here
            break
        params[key] = re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
    return params if "realm" in params else None


@dataclass(frozen=True)
class Answer:
    """One HTTP exchange, read whole (the body up to the caller's cap) within the client's deadline."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes
    #: the body went past the cap; ``content`` holds the first cap + 1 bytes only
    truncated: bool = False


def manifest_problem(body: bytes, media_type: str) -> str | None:
    """Why ``body`` is not the manifest its ``Content-Type`` says (None when it is one).

    A digest pins bytes, so only bytes that are an image manifest or index may be pinned: JSON with
    ``schemaVersion: 2`` and, for an index or manifest list, a ``manifests`` list, for a manifest a
    ``config`` object and a ``layers`` list (OCI image-spec ``image-index.md`` and ``manifest.md``;
    Docker's manifest v2 schema 2); a ``mediaType`` field, where present, is one of those types."""
    try:
        document = bounded_json.loads(body)
    except ValueError:
        return "the registry answered bytes that are not a JSON manifest"
    if not isinstance(document, dict) or document.get("schemaVersion") != 2:
        return "the registry answered a document that is not a schema 2 manifest"
    if "mediaType" in document and document["mediaType"] not in MANIFEST_TYPES:
        return "the registry answered a document whose mediaType is not an image manifest"
    if media_type in (OCI_INDEX, DOCKER_MANIFEST_LIST):
        if not isinstance(document.get("manifests"), list):
            return "the registry answered an index without a manifests list"
    elif not isinstance(document.get("config"), dict) or not isinstance(document.get("layers"), list):
        return "the registry answered a manifest without config and layers"
    return None


class RegistryClient:
    """Resolves tags to digests; one instance per run (it keeps pull tokens per host and repository).

    Every exchange (connect, headers and body) must finish within ``timeout`` seconds in all: a
    server that drips a byte at a time never lets a per-read timeout fire, so each exchange runs in
    a daemon thread that is given up on at the deadline."""

    def __init__(self, overrides: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.router = Router(dict(overrides or {}))
        self.timeout = timeout
        self.session = requests.Session()
        self._tokens: dict[tuple[str, str], str] = {}

    def close(self) -> None:
        self.session.close()

    def digest(self, ref: Reference) -> str:
        """The digest ``ref``'s tag points at: the index's digest for a multi-arch image."""
        url = f"https://{ref.api_host}/v2/{ref.path}/manifests/{ref.tag}"
        head, where = self._request("HEAD", url, ref)
        if head.status_code not in _NO_HEAD:  # a registry without HEAD gets the GET below
            self._raise_for_status(head, ref, where)
            header = head.headers.get("Docker-Content-Digest", "")
            if DIGEST.match(header) and self._media_type(head) in MANIFEST_TYPES:
                return header
        response, where = self._request("GET", url, ref)
        self._raise_for_status(response, ref, where)
        media_type = self._media_type(response)
        if media_type not in MANIFEST_TYPES:
            raise Unresolved(f"the registry answered with a {media_type or 'untyped'} document, not an "
                             "OCI or Docker v2 manifest")
        if response.truncated:
            raise Unresolved("the manifest is larger than 4 MiB")
        problem = manifest_problem(response.content, media_type)
        if problem:
            raise Unresolved(problem)
        digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        header = response.headers.get("Docker-Content-Digest", "")
        if DIGEST.match(header) and header.startswith("sha256:") and header != digest:
            raise Unresolved("the registry's Docker-Content-Digest does not match the manifest it sent")
        return digest

    def tags(self, ref: Reference) -> list[str]:
        """Every tag of ``ref``'s repository (``GET /v2/<name>/tags/list``, distribution-spec "Listing
        Tags"), following ``Link: <...>; rel="next"`` pages; at most :data:`MAX_TAG_LIST_BYTES` in all."""
        url = f"https://{ref.api_host}/v2/{ref.path}/tags/list?n={TAG_PAGE_SIZE}"
        found: list[str] = []
        budget = MAX_TAG_LIST_BYTES
        for _ in range(MAX_TAG_PAGES):
            answer, where = self._request("GET", url, ref, accept="application/json", max_bytes=budget)
            host = urlsplit(where).netloc
            if answer.status_code == 404:
                raise Unresolved(f"404 from {host}: no repository {ref.path!r}")
            self._raise_for_status(answer, ref, where)
            if answer.truncated:
                raise Unresolved(f"tag list from {host}: larger than {MAX_TAG_LIST_BYTES // (1024 * 1024)} MiB")
            budget -= len(answer.content)
            try:
                document = bounded_json.loads(answer.content)
            except bounded_json.NestingError as exc:
                raise Unresolved(f"tag list from {host}: the JSON is {exc}") from None
            except ValueError:
                raise Unresolved(f"tag list from {host}: the answer is not JSON") from None
            listed = document.get("tags") if isinstance(document, dict) else None
            if listed is None and isinstance(document, dict) and "tags" in document:
                listed = []  # a repository without tags answers null
            if not isinstance(listed, list) or not all(isinstance(tag, str) for tag in listed):
                raise Unresolved(f"tag list from {host}: not a distribution tag list (no 'tags' array of strings)")
            found.extend(listed)
            link = next((entry.get("url") for entry in requests.utils.parse_header_links(answer.headers.get("Link", ""))
                         if entry.get("rel") == "next"), None)
            if not link:
                return found
            url = urljoin(url, link)
        raise Unresolved(f"tag list from {urlsplit(url).netloc}: more than {MAX_TAG_PAGES} pages")

    @staticmethod
    def _media_type(response: Answer) -> str:
        return response.headers.get("Content-Type", "").split(";")[0].strip().lower()

    @staticmethod
    def _raise_for_status(response: Answer, ref: Reference, url: str) -> None:
        status = response.status_code
        if status == 200:
            return
        where = urlsplit(url).netloc
        if status == 404:
            raise Unresolved(f"404 from {where}: no tag {ref.tag!r} in repository {ref.path!r}")
        if status == 401:
            if bearer_challenge(response.headers.get("WWW-Authenticate")) is not None:
                # Only returned after the anonymous token was fetched and sent (see _request).
                raise Unresolved(f"401 from {where} with an anonymous pull token: a private image, or no "
                                 f"repository {ref.path!r}")
            scheme = response.headers.get("WWW-Authenticate", "").split(" ", 1)[0] or "no"
            raise Unresolved(f"401 from {where}: the registry wants credentials ({scheme} challenge, "
                             "no anonymous token)")
        if status == 403:
            raise Unresolved(f"403 from {where}: pulling {ref.path!r} is denied to anonymous clients")
        if status == 429:
            raise Unresolved(f"429 from {where}: rate limited; try again later")
        raise Unresolved(f"HTTP {status} from {where}")

    def _request(self, method: str, url: str, ref: Reference, accept: str = ACCEPT,
                 max_bytes: int = MAX_MANIFEST_BYTES) -> tuple[Answer, str]:
        """``method url``, following redirects and answering one bearer challenge per host; the final
        answer and the URL it answers for (before ``--registry-override`` routing)."""
        challenged: set[str] = set()
        for _ in range(MAX_REDIRECTS + 1):
            host = urlsplit(url).netloc.lower()
            headers = {"Accept": accept}
            token = self._tokens.get((host, ref.path))
            if token:
                headers["Authorization"] = f"Bearer {token}"
            response = self._send(method, url, headers, max_bytes)
            if response.status_code in _REDIRECTS:
                location = response.headers.get("Location")
                if not location:
                    raise Unresolved(f"HTTP {response.status_code} from {host} without a Location")
                url = urljoin(url, location)
                continue
            if response.status_code == 401 and host not in challenged:
                challenge = bearer_challenge(response.headers.get("WWW-Authenticate"))
                if challenge is not None:
                    challenged.add(host)
                    self._tokens[(host, ref.path)] = self._token(challenge, ref)
                    continue
            return response, url
        raise Unresolved(f"more than {MAX_REDIRECTS} redirects")

    def _token(self, challenge: dict[str, str], ref: Reference) -> str:
        scope = {"scope": challenge.get("scope") or f"repository:{ref.path}:pull"}
        if challenge.get("service"):
            scope["service"] = challenge["service"]
        params: dict[str, str] | None = scope
        url = challenge["realm"]
        for _ in range(MAX_REDIRECTS + 1):
            response = self._send("GET", url, {"Accept": "application/json"}, MAX_TOKEN_BYTES, params=params)
            if response.status_code not in _REDIRECTS:
                break
            url, params = urljoin(url, response.headers.get("Location", "")), None
        else:
            raise Unresolved(f"token endpoint {url}: more than {MAX_REDIRECTS} redirects")
        if response.status_code != 200:
            raise Unresolved(f"token endpoint {origin(url)} answered HTTP {response.status_code}")
        try:
            answer = None if response.truncated else bounded_json.loads(response.content)
        except ValueError:
            answer = None
        token = (answer.get("token") or answer.get("access_token")) if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise Unresolved(f"token endpoint {origin(url)} answered without a token")
        return token

    def _send(self, method: str, url: str, headers: dict[str, str], max_bytes: int,
              params: dict[str, str] | None = None) -> Answer:
        """One exchange, its body read up to ``max_bytes`` + 1, all within :attr:`timeout` seconds."""
        target = self.router.route(url)
        # A loopback override (a test registry) is never sent through the environment's proxy.
        proxies = {"http": None, "https": None} if loopback(urlsplit(target).hostname) else None

        def exchange() -> Answer:
            response = self.session.request(method, target, headers=headers, params=params, stream=True,
                                            allow_redirects=False, timeout=(self.timeout, self.timeout),
                                            # requests reads a None proxy as "none for this scheme"
                                            # (merge_setting drops None keys after the environment's
                                            # proxies are merged); its annotation says dict[str, str] only.
                                            proxies=proxies)  # type: ignore[arg-type]
            with response:
                body = b""
                if method != "HEAD":
                    for chunk in response.iter_content(64 * 1024):
                        body += chunk
                        if len(body) > max_bytes:
                            break
                return Answer(response.status_code, response.headers, body[: max_bytes + 1], len(body) > max_bytes)

        done: queue.Queue[tuple[Answer | None, BaseException | None]] = queue.Queue(maxsize=1)

        def run() -> None:
            try:
                done.put((exchange(), None))
            except BaseException as exc:  # handed to the caller's thread below
                done.put((None, exc))

        threading.Thread(target=run, name=f"registry {urlsplit(url).netloc}", daemon=True).start()
        try:
            answer, error = done.get(timeout=self.timeout)
        except queue.Empty:
            raise Unresolved(self._no_answer(url)) from None
        if isinstance(error, requests.RequestException):
            raise Unresolved(self._network_reason(error, url)) from None
        if error is not None:
            raise error
        assert answer is not None
        return answer

    def _no_answer(self, url: str) -> str:
        return f"no answer from {urlsplit(url).netloc} within {self.timeout:g} s"

    def _network_reason(self, exc: requests.RequestException, url: str) -> str:
        host = urlsplit(url).netloc
        if isinstance(exc, requests.Timeout):
            return self._no_answer(url)
        if isinstance(exc, requests.ConnectionError):
            return f"cannot connect to {host} (network refused or unreachable)"
        return f"request to {host} failed ({type(exc).__name__})"
