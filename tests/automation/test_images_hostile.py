"""``images resolve`` against registries and token servers that answer what no registry should.

Each server runs on 127.0.0.1; each answer ends as one line naming the image and the reason, the
versions file untouched, exit INCOMPLETE (6): never a pinned digest of bytes that are not a manifest,
never a traceback, never a run that outlives ``--timeout`` because a server drips its answer.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from automation import exit_codes
from automation.cli import main
from automation.images.registry import OCI_INDEX, OCI_MANIFEST, manifest_problem
from tests.support.registry import serve

PIN = 'A = Image(repository="ghcr.io/team/app", tag="v1")\n'
CRANE = "; run: crane digest ghcr.io/team/app:v1"


def resolve(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["images", "resolve", "--versions-file", str(path), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def unresolved_line(capsys, tmp_path: Path, handler: type[BaseHTTPRequestHandler], *extra: str) -> str:
    path = tmp_path / "versions.py"
    path.write_text(PIN)
    with serve(handler) as url:
        code, out, err = resolve(capsys, path, "--registry-override", f"ghcr.io={url}", *extra)
    assert code == exit_codes.INCOMPLETE == 6
    assert "Traceback" not in out + err
    assert path.read_text() == PIN, "nothing is written for an image that was not resolved"
    return out.splitlines()[-1]


def _quiet(self, *_args):
    pass


def _get_only(content_type: str, body: bytes, digest: str | None = None) -> type[BaseHTTPRequestHandler]:
    """HEAD answered 405 (some mirrors), GET with ``body`` under ``content_type`` and ``digest`` (if any) as
    its Docker-Content-Digest."""

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server hook
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):  # noqa: N802 - http.server hook
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            if digest is not None:
                self.send_header("Docker-Content-Digest", digest)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        log_message = _quiet

    return Handler


@pytest.mark.parametrize("content_type, body, reason", [
    (OCI_MANIFEST, b"<html>maintenance</html>", "the registry answered bytes that are not a JSON manifest"),
    (OCI_MANIFEST, b'{"schemaVersion": 1, "config": {}, "layers": []}',
     "the registry answered a document that is not a schema 2 manifest"),
    (OCI_MANIFEST, b'{"schemaVersion": 2}', "the registry answered a manifest without config and layers"),
    (OCI_INDEX, b'{"schemaVersion": 2, "layers": []}', "the registry answered an index without a manifests list"),
    (OCI_MANIFEST, b'{"schemaVersion": 2, "mediaType": "text/html", "config": {}, "layers": []}',
     "the registry answered a document whose mediaType is not an image manifest"),
    (OCI_MANIFEST, b"[" * 100_000, "the registry answered bytes that are not a JSON manifest"),
], ids=["html", "schema-1", "no-layers", "index-without-manifests", "foreign-media-type", "deep"])
def test_bytes_that_are_not_a_manifest_are_not_pinned(capsys, tmp_path, content_type, body, reason):
    assert unresolved_line(capsys, tmp_path, _get_only(content_type, body)) == f"  A: {reason}{CRANE}"


def test_a_digest_header_that_does_not_match_the_bytes_is_not_pinned(capsys, tmp_path):
    body = b'{"schemaVersion": 2, "config": {}, "layers": []}'
    handler = _get_only(OCI_MANIFEST, body, digest="sha256:" + "1" * 64)
    assert unresolved_line(capsys, tmp_path, handler) == (
        f"  A: the registry's Docker-Content-Digest does not match the manifest it sent{CRANE}")


def test_a_manifest_and_an_index_of_the_spec_shape_are_manifests():
    assert manifest_problem(b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", '
                            b'"config": {"digest": "sha256:0"}, "layers": []}', OCI_MANIFEST) is None
    assert manifest_problem(b'{"schemaVersion": 2, "manifests": []}', OCI_INDEX) is None


class _Dripping(BaseHTTPRequestHandler):
    """Answers every request one byte every 50 ms: each read gets a byte long before any per-read
    timeout, so only a bound on the whole exchange stops the client. It gives up after 3 s."""

    def _drip(self):
        answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n"
                  b"Content-Length: 2\r\n\r\n{}")
        deadline = time.monotonic() + 3
        for byte in answer:
            if time.monotonic() > deadline:
                break
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.05)
        self.close_connection = True

    do_HEAD = do_GET = _drip  # noqa: N815 - http.server hooks
    log_message = _quiet


def test_a_server_that_drips_its_answer_is_given_up_on_at_the_timeout(capsys, tmp_path):
    assert unresolved_line(capsys, tmp_path, _Dripping, "--timeout", "0.5") == (
        f"  A: no answer from ghcr.io within 0.5 s{CRANE}")


def _token_answer(body: bytes) -> type[BaseHTTPRequestHandler]:
    """A registry whose challenge names its own ``/token`` realm, which answers ``body``."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            if self.path.startswith("/token"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                return
            realm = f"http://127.0.0.1:{self.server.server_address[1]}/token"
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="{realm}",service="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET = _answer  # noqa: N815 - http.server hooks
        log_message = _quiet

    return Handler


@pytest.mark.parametrize("body", [
    b'{"token":' * 50_000 + b'"t"' + b"}" * 50_000,
    b"not json",
    b'{"token": 42}',
    b'{"token": "' + b"t" * (2 * 1024 * 1024) + b'"}',
], ids=["deep", "garbage", "not-a-string", "over-a-mebibyte"])
def test_a_token_server_that_answers_no_token_leaves_the_image_unresolved(capsys, tmp_path, body):
    line = unresolved_line(capsys, tmp_path, _token_answer(body))
    assert line.startswith("  A: token endpoint http://127.0.0.1:") and line.endswith(f" answered without a token{CRANE}")
