"""``images list`` and ``images resolve`` against a real registry (Debian's ``docker-registry``) on
127.0.0.1, with images this test pushes through the registry API.

Expected digests are literals: the sha256 of the exact manifest bytes pushed here (fixed content, so
fixed digests; each push also checks the registry reports the same literal), never what the
resolver answered.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests

from automation import exit_codes
from automation.cli import main
from automation.images.pins import read_pins, rewrite
from automation.images.reference import ReferenceError, parse
from automation.images.registry import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
    bearer_challenge,
)
from components import versions
from tests.support.needs import missing
from tests.support.registry import Pusher, SigningKey, TokenServer, registry_binary, running_registry, serve

ROOT = Path(__file__).resolve().parents[2]
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
MANIFEST_PAIRS = {OCI_MANIFEST: (OCI_CONFIG, OCI_LAYER), DOCKER_MANIFEST: (DOCKER_CONFIG, DOCKER_LAYER)}

# sha256 of the manifest bytes built below (checked against hashlib and the registry on every push).
#: A linux/amd64 OCI manifest and Docker v2 manifest; the same bytes are the amd64 entries of the lists.
SINGLE_OCI = "sha256:2d7dda959d511bb0a5e6d4de6c40dda44f4a36cb88440e8a31a7d618ff1f713a"
SINGLE_DOCKER = "sha256:993034bfc2618abc195db05f049e2cdb927c3345f66d6b751bc374d0daddff10"
#: An OCI index and a Docker manifest list, each of a linux/amd64 and a linux/arm64 manifest.
OCI_INDEX_DIGEST = "sha256:b33bdc56541ad78030d151ea9f3bc5adbf8e49b17f70a9eb320287b6e7dc3524"
DOCKER_LIST_DIGEST = "sha256:f0f4b091fc443c582c5d59d70d9689d6a27d4ebcc48cc5704dd99e7dc2ab47a8"

#: Stand-ins for digests already pinned in a file (not real images).
OLD = "sha256:" + "0" * 64


# --- what the test pushes -------------------------------------------------------------------------


def _json(document: dict) -> bytes:
    return json.dumps(document, indent=3, sort_keys=True).encode()


def _blobs(arch: str) -> tuple[bytes, bytes]:
    config = _json({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}})
    return config, f"llm-platform test layer for linux/{arch}\n".encode()


def _descriptor(media_type: str, data: bytes, **extra) -> dict:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data),
            **extra}


def _manifest(media_type: str, arch: str) -> bytes:
    config_type, layer_type = MANIFEST_PAIRS[media_type]
    config, layer = _blobs(arch)
    return _json({"schemaVersion": 2, "mediaType": media_type, "config": _descriptor(config_type, config),
                  "layers": [_descriptor(layer_type, layer)]})


def _list(media_type: str, entry_type: str) -> bytes:
    return _json({"schemaVersion": 2, "mediaType": media_type, "manifests": [
        _descriptor(entry_type, _manifest(entry_type, arch), platform={"architecture": arch, "os": "linux"})
        for arch in ("amd64", "arm64")]})


def _pushed(pusher: Pusher, name: str, reference: str, body: bytes, media_type: str) -> str:
    reported = pusher.manifest(name, reference, body, media_type)
    assert reported == "sha256:" + hashlib.sha256(body).hexdigest()
    return reported


def push_single(pusher: Pusher, name: str, tag: str, media_type: str = OCI_MANIFEST, arch: str = "amd64") -> str:
    config, layer = _blobs(arch)
    pusher.blob(name, config)
    pusher.blob(name, layer)
    return _pushed(pusher, name, tag, _manifest(media_type, arch), media_type)


def push_list(pusher: Pusher, name: str, tag: str, media_type: str = OCI_INDEX) -> str:
    entry_type = OCI_MANIFEST if media_type == OCI_INDEX else DOCKER_MANIFEST
    for arch in ("amd64", "arm64"):
        push_single(pusher, name, "sha256:" + hashlib.sha256(_manifest(entry_type, arch)).hexdigest(),
                             entry_type, arch)
    return _pushed(pusher, name, tag, _list(media_type, entry_type), media_type)


# --- registries -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def binary() -> str:
    found = registry_binary()
    if found is None:
        missing("docker-registry is not installed (apt-get install docker-registry; see .ci/run)")
    return found


@pytest.fixture(scope="module")
def open_registry(binary, tmp_path_factory) -> str:
    with running_registry(binary, tmp_path_factory.mktemp("open-registry")) as url:
        yield url


TOKEN_HOST = "token.registry.test"
TOKEN_SERVICE = "llm-platform-test-registry"


@pytest.fixture(scope="module")
def token_registry(binary, tmp_path_factory):
    """A registry with ``auth.token``: its realm is an https URL on a host that exists only through
    ``--registry-override``, which sends it to the token server on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("token-registry")
    server = TokenServer(SigningKey.create(folder), issuer="llm-platform-test-issuer", service=TOKEN_SERVICE,
                         private={"team/private"})
    auth = {"token": {"realm": f"https://{TOKEN_HOST}/token", "service": TOKEN_SERVICE, "issuer": server.issuer,
                      "rootcertbundle": str(server.signing_key.cert)}}
    with server.serving() as token_url, running_registry(binary, folder / "registry", auth) as url:
        yield url, token_url, server


@pytest.fixture(scope="module")
def basic_registry(binary, tmp_path_factory) -> str:
    """A registry that wants a password (htpasswd): 401 with a Basic challenge, no token endpoint."""
    folder = tmp_path_factory.mktemp("basic-registry")
    htpasswd = folder / "htpasswd"
    htpasswd.write_text("someone:$2y$05$" + "a" * 53 + "\n")  # never checked: nobody logs in
    with running_registry(binary, folder / "registry", {"htpasswd": {"realm": "test", "path": str(htpasswd)}}) as url:
        yield url


def resolve(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["images", "resolve", "--versions-file", str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def overrides(url: str, *hosts: str) -> list[str]:
    return [arg for host in hosts for arg in ("--registry-override", f"{host}={url}")]


FIXTURE = '''"""Pins for the resolver's tests: every shape an Image(...) call takes."""
from components.versions import Image

ONE_LINE = Image(repository="python", tag="3.13-slim")
MULTI_LINE = Image(
    repository="ghcr.io/berriai/litellm",
    tag="v1.109.1"  # no trailing comma
)
PINNED = Image(
    repository="vllm/vllm-openai",
    tag="v0.33.0",
    digest='@OLD@',
)
POSITIONAL = Image("nvcr.io/nvidia/cuda", "12.9.1-base-ubuntu22.04", None)
BY_MINOR = {
    "1.35": Image(repository="registry.k8s.io/autoscaling/cluster-autoscaler", tag="v1.35.2"),
}
'''.replace("@OLD@", OLD)


# --- names and challenges, as the runtime reads them ---------------------------------------------


@pytest.mark.parametrize(("repository", "domain", "path", "api_host"), [
    # Docker Hub: a first component without "." or ":" is a namespace, not a host.
    ("amazon/aws-cli", "docker.io", "amazon/aws-cli", "registry-1.docker.io"),
    # Official images live under library/ (the textbook /v2/python/... is a 404 on Docker Hub).
    ("python", "docker.io", "library/python", "registry-1.docker.io"),
    ("docker.io/python", "docker.io", "library/python", "registry-1.docker.io"),
    ("index.docker.io/vllm/vllm-openai", "docker.io", "vllm/vllm-openai", "registry-1.docker.io"),
    ("localhost/team/app", "localhost", "team/app", "localhost"),
    ("localhost:5000/app", "localhost:5000", "app", "localhost:5000"),
    ("registry.k8s.io/autoscaling/cluster-autoscaler", "registry.k8s.io", "autoscaling/cluster-autoscaler",
     "registry.k8s.io"),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", "nvcr.io", "nvidia/k8s/dcgm-exporter", "nvcr.io"),
])
def test_references_are_normalised_as_the_runtime_does(repository, domain, path, api_host):
    ref = parse(repository, "v1")
    assert (ref.domain, ref.path, ref.api_host) == (domain, path, api_host)


@pytest.mark.parametrize(("repository", "tag"), [("Vllm/vllm-openai", "v1"), ("vllm/vllm-openai", "bad tag"),
                                                  ("ghcr.io/", "v1"), ("a//b", "v1")])
def test_a_reference_no_registry_accepts_is_refused(repository, tag):
    with pytest.raises(ReferenceError):
        parse(repository, tag)


def test_bearer_challenge_parameters():
    # The example of distribution's token spec (docs/spec/auth/token.md).
    header = ('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
              'scope="repository:samalba/my-app:pull,push"')
    assert bearer_challenge(header) == {"realm": "https://auth.docker.io/token", "service": "registry.docker.io",
                                        "scope": "repository:samalba/my-app:pull,push"}
    assert bearer_challenge('Basic realm="Registry Realm"') is None
    assert bearer_challenge(None) is None


# --- the versions file ----------------------------------------------------------------------------


def test_rewrite_changes_only_the_digests(tmp_path):
    new = "sha256:" + "1" * 64
    result = rewrite(FIXTURE.encode(), {"ONE_LINE": new, "MULTI_LINE": new, "PINNED": new, "POSITIONAL": new,
                                        "BY_MINOR['1.35']": new})
    assert result.decode() == f'''"""Pins for the resolver's tests: every shape an Image(...) call takes."""
from components.versions import Image

ONE_LINE = Image(repository="python", tag="3.13-slim", digest="{new}")
MULTI_LINE = Image(
    repository="ghcr.io/berriai/litellm",
    tag="v1.109.1",  # no trailing comma
    digest="{new}",
)
PINNED = Image(
    repository="vllm/vllm-openai",
    tag="v0.33.0",
    digest='{new}',
)
POSITIONAL = Image("nvcr.io/nvidia/cuda", "12.9.1-base-ubuntu22.04", "{new}")
BY_MINOR = {{
    "1.35": Image(repository="registry.k8s.io/autoscaling/cluster-autoscaler", tag="v1.35.2", digest="{new}"),
}}
'''


def test_rewrite_keeps_crlf_line_endings():
    source = b'X = Image(\r\n    repository="python",\r\n    tag="3",\r\n)\r\n'
    assert rewrite(source, {"X": "sha256:" + "2" * 64}) == (
        b'X = Image(\r\n    repository="python",\r\n    tag="3",\r\n    digest="sha256:' + b"2" * 64 + b'",\r\n)\r\n')


def test_every_pin_of_the_shipped_versions_file_is_read():
    names = {pin.name for pin in read_pins(Path(versions.__file__).read_bytes())}
    shipped = {name for name, value in vars(versions).items() if isinstance(value, versions.Image)}
    assert shipped <= names, f"pins the resolver does not see: {sorted(shipped - names)}"


def test_list_prints_each_pin_with_its_digest_or_tag_only(tmp_path, capsys):
    path = tmp_path / "versions.py"
    path.write_text(FIXTURE)
    assert main(["images", "list", "--versions-file", str(path)]) == exit_codes.OK
    assert capsys.readouterr().out.splitlines() == [
        "ONE_LINE          python:3.13-slim  tag only",
        "MULTI_LINE        ghcr.io/berriai/litellm:v1.109.1  tag only",
        f"PINNED            vllm/vllm-openai:v0.33.0  {OLD}",
        "POSITIONAL        nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04  tag only",
        "BY_MINOR['1.35']  registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.2  tag only",
    ]
    assert main(["images", "list", "--versions-file", str(path), "--output", "json"]) == exit_codes.OK
    listed = json.loads(capsys.readouterr().out)
    assert listed[2] == {"name": "PINNED", "repository": "vllm/vllm-openai", "tag": "v0.33.0", "digest": OLD}


def test_some_unresolved_has_its_own_exit_code():
    others = {exit_codes.OK, exit_codes.FAILED, exit_codes.USAGE, exit_codes.LOCKED, exit_codes.NOT_FOUND,
              exit_codes.PREFLIGHT, exit_codes.INTERRUPTED, exit_codes.TERMINATED}
    assert exit_codes.INCOMPLETE == 6 and exit_codes.INCOMPLETE not in others


@pytest.mark.parametrize(("argv", "flag"), [
    (["--registry-override", "docker.io"], "--registry-override"),
    (["--registry-override", "docker.io=ftp://127.0.0.1:1"], "--registry-override"),
    (["--registry-override", "=http://127.0.0.1:1"], "--registry-override"),
    (["--timeout", "0"], "--timeout"),
    (["--timeout", "soon"], "--timeout"),
    (["--only", "NO_SUCH_IMAGE"], "--only NO_SUCH_IMAGE"),
    (["--versions-file", "/nonexistent/versions.py"], "/nonexistent/versions.py"),
])
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, argv, flag):
    path = tmp_path / "versions.py"
    path.write_text(FIXTURE)
    code = main(["images", "resolve", "--versions-file", str(path), *argv])
    err = capsys.readouterr().err
    assert code == exit_codes.USAGE
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and flag in err, err
    assert path.read_text() == FIXTURE


def test_a_versions_file_that_does_not_parse_exits_2(tmp_path, capsys):
    path = tmp_path / "versions.py"
    path.write_text("X = Image(repository='python', tag='3'\n")
    assert main(["images", "list", "--versions-file", str(path)]) == exit_codes.USAGE
    assert capsys.readouterr().err.startswith(f"error: {path}: line 1")


# --- against the registry -------------------------------------------------------------------------


def test_the_registry_answers_one_platform_to_a_client_that_does_not_accept_a_list(open_registry):
    """Why the Accept list matters: distribution v2.8 (registry/handlers/manifests.go ``GetManifest``)
    answers a client that does not say it takes a Docker manifest list with the list's linux/amd64
    manifest, a digest that pins one architecture, and answers 404 for an OCI index."""
    pusher = Pusher(open_registry)
    assert push_list(pusher, "engine/docker-list", "v1", DOCKER_MANIFEST_LIST) == DOCKER_LIST_DIGEST
    assert push_list(pusher, "engine/oci-index", "v1") == OCI_INDEX_DIGEST
    manifests_only = {"Accept": f"{OCI_MANIFEST}, {DOCKER_MANIFEST}"}
    docker_list = requests.head(f"{open_registry}/v2/engine/docker-list/manifests/v1", headers=manifests_only,
                                timeout=5)
    oci_index = requests.head(f"{open_registry}/v2/engine/oci-index/manifests/v1", headers=manifests_only,
                              timeout=5)
    assert (docker_list.status_code, docker_list.headers["Docker-Content-Digest"]) == (200, SINGLE_DOCKER)
    assert oci_index.status_code == 404


def test_resolve_writes_the_digest_of_each_kind_of_manifest(open_registry, tmp_path, capsys):
    pusher = Pusher(open_registry)
    assert push_list(pusher, "library/python", "3.13-slim") == OCI_INDEX_DIGEST
    assert push_single(pusher, "berriai/litellm", "v1.109.1", DOCKER_MANIFEST) == SINGLE_DOCKER
    assert push_list(pusher, "vllm/vllm-openai", "v0.33.0", DOCKER_MANIFEST_LIST) == DOCKER_LIST_DIGEST
    assert push_single(pusher, "autoscaling/cluster-autoscaler", "v1.35.2") == SINGLE_OCI
    # nvidia/cuda is not pushed: 404.
    path = tmp_path / "versions.py"
    path.write_text(FIXTURE)

    code, out, _ = resolve(capsys, path, *overrides(open_registry, "docker.io", "ghcr.io", "nvcr.io",
                                                    "registry.k8s.io"))

    assert code == exit_codes.INCOMPLETE
    assert path.read_text() == FIXTURE.replace(
        'tag="3.13-slim")', f'tag="3.13-slim", digest="{OCI_INDEX_DIGEST}")').replace(
        'tag="v1.109.1"  # no trailing comma\n', f'tag="v1.109.1",  # no trailing comma\n    digest="{SINGLE_DOCKER}",\n'
    ).replace(OLD, DOCKER_LIST_DIGEST).replace('tag="v1.35.2")', f'tag="v1.35.2", digest="{SINGLE_OCI}")')
    lines = out.splitlines()
    assert f"changed    PINNED            vllm/vllm-openai:v0.33.0  {OLD} -> {DOCKER_LIST_DIGEST}" in lines
    assert "unresolved POSITIONAL        nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04" in lines
    assert lines[-2:] == [
        "1 image(s) unresolved; run where the registry is reachable, then pin the digest (or run this command there):",
        "  POSITIONAL: 404 from nvcr.io: no tag '12.9.1-base-ubuntu22.04' in repository 'nvidia/cuda'; "
        "run: crane digest nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04",
    ]

    # Everything now resolves: exit 0, and a second run changes nothing.
    assert push_single(pusher, "nvidia/cuda", "12.9.1-base-ubuntu22.04") == SINGLE_OCI
    code, out, _ = resolve(capsys, path, *overrides(open_registry, "docker.io", "ghcr.io", "nvcr.io",
                                                    "registry.k8s.io"))
    assert code == exit_codes.OK
    assert f'"12.9.1-base-ubuntu22.04", "{SINGLE_OCI}")' in path.read_text()
    written = path.read_bytes()
    code, out, _ = resolve(capsys, path, *overrides(open_registry, "docker.io", "ghcr.io", "nvcr.io",
                                                    "registry.k8s.io"))
    assert code == exit_codes.OK and path.read_bytes() == written
    assert out.splitlines()[-1] == f"no digest to change in {path}"


def test_resolve_on_a_copy_of_the_shipped_versions_file(open_registry, tmp_path, capsys, monkeypatch):
    """Only the digests of the named pins change; every other byte of components/versions.py stays."""
    pusher = Pusher(open_registry)
    vllm, litellm = versions.VLLM_IMAGE, versions.LITELLM_IMAGE
    assert push_list(pusher, parse(vllm.repository, vllm.tag).path, vllm.tag) == OCI_INDEX_DIGEST
    assert push_single(pusher, parse(litellm.repository, litellm.tag).path, litellm.tag,
                       DOCKER_MANIFEST) == SINGLE_DOCKER
    original = Path(versions.__file__).read_text()
    path = tmp_path / "versions.py"
    path.write_text(original)

    code, _, _ = resolve(capsys, path, "--only", "VLLM_IMAGE", "--only", litellm.repository,
                         *overrides(open_registry, "docker.io", "ghcr.io"))

    assert code == exit_codes.OK
    spec = importlib.util.spec_from_file_location("resolved_versions", path)
    resolved = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "resolved_versions", resolved)  # dataclasses look their module up
    spec.loader.exec_module(resolved)
    assert (resolved.VLLM_IMAGE.tag, resolved.VLLM_IMAGE.digest) == (vllm.tag, OCI_INDEX_DIGEST)
    assert (resolved.LITELLM_IMAGE.tag, resolved.LITELLM_IMAGE.digest) == (litellm.tag, SINGLE_DOCKER)
    # Take the two inserted digests out again (either insertion shape): the original, byte for byte.
    stripped = re.sub(rf', digest="(?:{OCI_INDEX_DIGEST}|{SINGLE_DOCKER})"|\n[ \t]*digest="(?:{OCI_INDEX_DIGEST}|'
                      rf'{SINGLE_DOCKER})",', "", path.read_text())
    assert stripped == original


def test_dry_run_writes_nothing(open_registry, tmp_path, capsys):
    assert push_list(Pusher(open_registry), "dry/run", "v1") == OCI_INDEX_DIGEST
    path = tmp_path / "versions.py"
    path.write_text('X = Image(repository="localhost:5000/dry/run", tag="v1")\n')
    code, out, _ = resolve(capsys, path, "--dry-run", *overrides(open_registry, "localhost:5000"))
    assert code == exit_codes.OK
    assert path.read_text() == 'X = Image(repository="localhost:5000/dry/run", tag="v1")\n'
    assert out.splitlines() == [f"new        X  localhost:5000/dry/run:v1  {OCI_INDEX_DIGEST}",
                                f"dry run: would write 1 digest(s) into {path}"]


def test_resolve_fetches_an_anonymous_token_first(token_registry, tmp_path, capsys):
    url, token_url, server = token_registry
    pusher = Pusher(url, server.jwt("repository:library/python:pull,push repository:vllm/vllm-openai:pull,push"))
    assert push_list(pusher, "library/python", "3.13-slim") == OCI_INDEX_DIGEST
    assert push_single(pusher, "vllm/vllm-openai", "v0.33.0", DOCKER_MANIFEST) == SINGLE_DOCKER
    assert requests.head(f"{url}/v2/library/python/manifests/3.13-slim", timeout=5).status_code == 401
    server.requests.clear()
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="python", tag="3.13-slim")\nB = Image(repository="vllm/vllm-openai", '
                    'tag="v0.33.0")\n')

    code, _, _ = resolve(capsys, path, *overrides(url, "docker.io"), *overrides(token_url, TOKEN_HOST))

    assert code == exit_codes.OK
    assert path.read_text() == (f'A = Image(repository="python", tag="3.13-slim", digest="{OCI_INDEX_DIGEST}")\n'
                                f'B = Image(repository="vllm/vllm-openai", tag="v0.33.0", digest="{SINGLE_DOCKER}")\n')
    # One token per repository, for the scope and service of the registry's challenge.
    assert server.requests == [
        {"scope": ["repository:library/python:pull"], "service": [TOKEN_SERVICE]},
        {"scope": ["repository:vllm/vllm-openai:pull"], "service": [TOKEN_SERVICE]},
    ]


def test_a_token_realm_that_cannot_be_reached_leaves_the_image_unresolved(token_registry, tmp_path, capsys):
    url, _, _ = token_registry
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="python", tag="3.13-slim")\n')
    # The registry answers with its challenge; the realm's host refuses the connection.
    code, out, _ = resolve(capsys, path, *overrides(url, "docker.io"), *overrides(closed_port_url(), TOKEN_HOST))
    assert code == exit_codes.INCOMPLETE
    assert out.splitlines()[-1] == (f"  A: cannot connect to {TOKEN_HOST} (network refused or unreachable); "
                                    "run: crane digest docker.io/library/python:3.13-slim")
    assert path.read_text() == 'A = Image(repository="python", tag="3.13-slim")\n'


def test_a_private_image_is_unresolved(token_registry, tmp_path, capsys):
    url, token_url, server = token_registry
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="ghcr.io/team/private", tag="v1")\n')
    code, out, _ = resolve(capsys, path, *overrides(url, "ghcr.io"), *overrides(token_url, TOKEN_HOST))
    assert code == exit_codes.INCOMPLETE
    assert out.splitlines()[-1] == ("  A: 401 from ghcr.io with an anonymous pull token: a private image, or no "
                                    "repository 'team/private'; run: crane digest ghcr.io/team/private:v1")


def test_a_401_without_a_token_endpoint_is_unresolved(basic_registry, tmp_path, capsys):
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="ghcr.io/berriai/litellm", tag="v1.109.1")\n')
    code, out, _ = resolve(capsys, path, *overrides(basic_registry, "ghcr.io"))
    assert code == exit_codes.INCOMPLETE
    assert out.splitlines()[-1] == ("  A: 401 from ghcr.io: the registry wants credentials (Basic challenge, no "
                                    "anonymous token); run: crane digest ghcr.io/berriai/litellm:v1.109.1")


# --- network failures, each bounded ---------------------------------------------------------------


@contextmanager
def silent_server():
    """Accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_refused_and_silent_registries_are_listed_with_the_command(tmp_path, capsys):
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="ghcr.io/berriai/litellm", tag="v1.109.1")\n'
                    'B = Image(repository="nvcr.io/nvidia/cuda", tag="12.9.1-base-ubuntu22.04")\n')
    with silent_server() as silent:
        code, out, _ = resolve(capsys, path, "--timeout", "0.5", *overrides(closed_port_url(), "ghcr.io"),
                               *overrides(silent, "nvcr.io"))
    assert code == exit_codes.INCOMPLETE
    assert out.splitlines()[-2:] == [
        "  A: cannot connect to ghcr.io (network refused or unreachable); "
        "run: crane digest ghcr.io/berriai/litellm:v1.109.1",
        "  B: no answer from nvcr.io within 0.5 s; run: crane digest nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04",
    ]


class _NoHeadNoDigestHeader(BaseHTTPRequestHandler):
    """A registry front (some mirrors) that answers HEAD with 405 and GET without Docker-Content-Digest."""

    def do_HEAD(self):  # noqa: N802 - http.server hook
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):  # noqa: N802 - http.server hook
        body = _list(OCI_INDEX, OCI_MANIFEST)
        self.send_response(200)
        self.send_header("Content-Type", OCI_INDEX)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


def test_without_a_digest_header_the_digest_is_the_sha256_of_the_manifest_bytes(tmp_path, capsys):
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="public.ecr.aws/team/app", tag="v1")\n')
    with serve(_NoHeadNoDigestHeader) as url:
        code, _, _ = resolve(capsys, path, *overrides(url, "public.ecr.aws"))
    assert code == exit_codes.OK
    assert path.read_text() == f'A = Image(repository="public.ecr.aws/team/app", tag="v1", digest="{OCI_INDEX_DIGEST}")\n'


class _RedirectToPlainHttp(BaseHTTPRequestHandler):
    def do_HEAD(self):  # noqa: N802 - http.server hook
        self.send_response(307)
        self.send_header("Location", "http://mirror.example.invalid" + self.path)
        self.end_headers()

    def log_message(self, *_args):
        pass


def test_a_redirect_to_plain_http_is_not_followed(tmp_path, capsys):
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="registry.k8s.io/pause", tag="3.10")\n')
    with serve(_RedirectToPlainHttp) as url:
        code, out, _ = resolve(capsys, path, *overrides(url, "registry.k8s.io"))
    assert code == exit_codes.INCOMPLETE
    assert out.splitlines()[-1] == ("  A: refused to follow http://mirror.example.invalid: not https and not a "
                                    "--registry-override URL; run: crane digest registry.k8s.io/pause:3.10")


def test_the_command_as_a_user_runs_it(open_registry, tmp_path):
    """A real ``python -m automation`` process: exit code and lines as a script sees them."""
    assert push_single(Pusher(open_registry), "team/cli", "v1", DOCKER_MANIFEST) == SINGLE_DOCKER
    path = tmp_path / "versions.py"
    path.write_text('A = Image(repository="ghcr.io/team/cli", tag="v1")\nB = Image(repository="ghcr.io/team/gone", '
                    'tag="v1")\n')
    run = subprocess.run([sys.executable, "-m", "automation", "images", "resolve", "--versions-file", str(path),
                          "--registry-override", f"ghcr.io={open_registry}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == exit_codes.INCOMPLETE == 6, run.stderr
    assert run.stdout.splitlines()[-1] == ("  B: 404 from ghcr.io: no tag 'v1' in repository 'team/gone'; "
                                           "run: crane digest ghcr.io/team/gone:v1")
    assert path.read_text() == (f'A = Image(repository="ghcr.io/team/cli", tag="v1", digest="{SINGLE_DOCKER}")\n'
                                'B = Image(repository="ghcr.io/team/gone", tag="v1")\n')
