"""A real OCI registry on 127.0.0.1 (Debian's ``docker-registry``, distribution v2), a token server
for its bearer-token auth, and a pusher that uploads blobs and manifests through the registry API.

The registry runs with its own config in a temporary folder (filesystem storage, no system service);
``auth.token`` makes it answer 401 with a ``Bearer`` challenge until a client brings a JWT signed by
the key whose certificate is its ``rootcertbundle``. The token server signs RS256 with an openssl
key and puts the certificate in the JWT's ``x5c`` header, which distribution v2.8 verifies against
that bundle (registry/auth/token/token.go ``VerifySigningKey``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import requests

BINARY_ENV = "LLM_PLATFORM_DOCKER_REGISTRY"
DEFAULT_BINARY = "/usr/bin/docker-registry"
START_TIMEOUT = 10.0


def registry_binary() -> str | None:
    """The ``docker-registry`` executable, or None (``$LLM_PLATFORM_DOCKER_REGISTRY`` first)."""
    for candidate in (os.environ.get(BINARY_ENV), DEFAULT_BINARY, shutil.which("docker-registry")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class SigningKey:
    """An RSA key and its self-signed certificate, made by the openssl CLI."""

    key: Path
    cert: Path

    @classmethod
    def create(cls, folder: Path) -> SigningKey:
        key, cert = folder / "token.key", folder / "token.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                        "-out", str(cert), "-days", "2", "-subj", "/CN=llm-platform test token issuer"],
                       check=True, capture_output=True, timeout=30)
        return cls(key, cert)

    def certificate_der_b64(self) -> str:
        body = self.cert.read_text().split("-----BEGIN CERTIFICATE-----")[1].split("-----END CERTIFICATE-----")[0]
        return "".join(body.split())

    def sign(self, data: bytes) -> bytes:
        return subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)], input=data, check=True,
                              capture_output=True, timeout=30).stdout


@dataclass
class TokenServer:
    """Docker's token endpoint in miniature: ``GET /token?service=S&scope=repository:NAME:ACTIONS``
    answers ``{"token": JWT, "access_token": JWT}`` granting what was asked, except for repositories
    in ``private`` (a token granting nothing, as Docker Hub answers for an image one may not pull);
    every request is kept."""

    signing_key: SigningKey
    issuer: str
    service: str
    private: set[str] = field(default_factory=set)
    requests: list[dict[str, list[str]]] = field(default_factory=list)

    def jwt(self, scope: str) -> str:
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.signing_key.certificate_der_b64()]}
        access = []
        for item in filter(None, scope.split(" ")):
            kind, _, rest = item.partition(":")
            name, _, actions = rest.rpartition(":")
            if name not in self.private:
                access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": "anonymous", "aud": self.service, "exp": now + 600,
                  "nbf": now - 60, "iat": now, "jti": os.urandom(8).hex(), "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        return f"{signing_input}.{_b64url(self.signing_key.sign(signing_input.encode()))}"

    @contextmanager
    def serving(self):
        """Serve on 127.0.0.1; yields the base URL."""
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server hook
                query = parse_qs(urlsplit(self.path).query)
                server_self.requests.append(query)
                token = server_self.jwt(" ".join(query.get("scope", [])))
                body = json.dumps({"token": token, "access_token": token, "expires_in": 600}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        with serve(Handler) as url:
            yield url


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]):
    """An http.server on a free 127.0.0.1 port in a thread; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def registry_config(folder: Path, port: int, auth: dict | None = None) -> Path:
    """A config for ``docker-registry serve``: storage in ``folder``, listening on 127.0.0.1:``port``."""
    config = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folder / "data")}, "delete": {"enabled": False}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": os.urandom(16).hex()},
        "health": {"storagedriver": {"enabled": False}},
    }
    if auth:
        config["auth"] = auth
    path = folder / "config.yml"
    path.write_text(json.dumps(config, indent=2))  # YAML is a superset of JSON
    return path


@contextmanager
def running_registry(binary: str, folder: Path, auth: dict | None = None):
    """``docker-registry serve`` on a free port until the block ends; yields its base URL."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = registry_config(folder, port, auth)
    log = (folder / "registry.log").open("wb")
    # The registry also reads REGISTRY_* variables; none from this environment may change its config.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"docker-registry exited {process.returncode}: "
                                   f"{(folder / 'registry.log').read_text()[-2000:]}")
            try:
                if requests.get(f"{url}/v2/", timeout=1).status_code in (200, 401):
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"docker-registry did not answer on {url} within {START_TIMEOUT:g} s")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


@dataclass
class Pusher:
    """Uploads blobs and manifests to ``url`` the way ``docker push`` does (distribution-spec push API)."""

    url: str
    token: str | None = None

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def blob(self, name: str, data: bytes) -> str:
        """Upload ``data`` (POST for a session, PUT with its digest); returns the digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        started = requests.post(f"{self.url}/v2/{name}/blobs/uploads/", headers=self._headers(), timeout=10)
        assert started.status_code == 202, (started.status_code, started.text)
        location = started.headers["Location"]
        location = location if location.startswith("http") else self.url + location
        put = requests.put(location, params={"digest": digest}, data=data, timeout=10,
                           headers=self._headers({"Content-Type": "application/octet-stream"}))
        assert put.status_code == 201, (put.status_code, put.text)
        return digest

    def manifest(self, name: str, reference: str, body: bytes, media_type: str) -> str:
        """PUT ``body`` as ``name:reference``; returns the digest the registry reports for it."""
        put = requests.put(f"{self.url}/v2/{name}/manifests/{reference}", data=body, timeout=10,
                           headers=self._headers({"Content-Type": media_type}))
        assert put.status_code == 201, (put.status_code, put.text)
        return put.headers["Docker-Content-Digest"]
