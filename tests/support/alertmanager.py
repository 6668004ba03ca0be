"""A real Alertmanager (Debian's ``prometheus-alertmanager``) on 127.0.0.1 and a webhook receiver that
records what it delivers, to prove routing and inhibition with the configuration the program emits.

Alertmanager binds a free port, keeps its state in its own temporary directory and runs without
clustering (``--cluster.listen-address=``); the fixture that starts it stops it. Only the receivers'
endpoints are rewritten (every receiver becomes a webhook to the local recorder, at a path named after
the receiver); routes and inhibit rules stay exactly as emitted. Every wait is bounded.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.support.needs import missing
from tests.support.prometheus_tools import free_port, stop_process, wait_until_ready

#: Upstream names the binary ``alertmanager``; Debian's package installs it as ``prometheus-alertmanager``.
BINARY_NAMES = ("alertmanager", "prometheus-alertmanager")
#: Keys of a receiver that deliver somewhere (Alertmanager's receiver config).
DELIVERY_KEYS = ("slack_configs", "pagerduty_configs", "sns_configs", "webhook_configs", "email_configs",
                 "opsgenie_configs", "victorops_configs", "pushover_configs", "wechat_configs", "telegram_configs",
                 "webex_configs", "discord_configs", "msteams_configs")


def alertmanager_binary() -> str:
    """Path of the Alertmanager server; skip (or fail in CI) when the Debian package is not installed."""
    for name in BINARY_NAMES:
        path = shutil.which(name)
        if path is not None:
            return path
    missing("alertmanager not installed (apt-get install prometheus-alertmanager; .ci/run does it in CI)")
    raise AssertionError("unreachable")


class WebhookRecorder:
    """An HTTP server on 127.0.0.1 that records each Alertmanager webhook notification it receives."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self._changed = threading.Condition()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's method name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with recorder._changed:
                    recorder.notifications.append((self.path.strip("/"), json.loads(body)))
                    recorder._changed.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> WebhookRecorder:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def _firing(self) -> list[tuple[str, dict[str, str]]]:
        return [(path, alert["labels"]) for path, body in self.notifications for alert in body["alerts"]
                if alert["status"] == "firing"]

    def delivered(self) -> list[tuple[str, dict[str, str]]]:
        """(receiver path, alert labels) of every firing alert delivered so far."""
        with self._changed:
            return self._firing()

    def wait_for(self, condition: Callable[[list[tuple[str, dict[str, str]]]], bool], seconds: float) -> bool:
        """Wait (at most ``seconds``) until ``condition(delivered())`` holds; return whether it did."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while True:
                if condition(self._firing()):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(timeout=left)


def with_local_receivers(config: dict[str, Any], base_url: str) -> dict[str, Any]:
    """``config`` with every delivering receiver replaced by a webhook to ``base_url/<receiver name>``;
    receivers that deliver nowhere (``null``) stay as they are; nothing else changes."""
    out = copy.deepcopy(config)
    for receiver in out["receivers"]:
        if any(key in receiver for key in DELIVERY_KEYS):
            for key in DELIVERY_KEYS:
                receiver.pop(key, None)
            receiver["webhook_configs"] = [{"url": f"{base_url}/{receiver['name']}", "send_resolved": False}]
    return out


class AlertmanagerServer:
    """An Alertmanager process with ``config`` (a dict), driven through its v2 API."""

    def __init__(self, workdir: Path, config: dict[str, Any]):
        self.binary = alertmanager_binary()
        self.workdir = workdir
        self.port = free_port()
        self.config_path = workdir / "alertmanager.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> AlertmanagerServer:
        log_path = self.workdir / "alertmanager.log"
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_path}",
                    f"--storage.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--cluster.listen-address=",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until_ready(self.process, f"{self.url}/-/ready", name="alertmanager", log=log_path, seconds=30, pause=0.1)
        return self

    def stop(self) -> None:
        stop_process(self.process)

    def post(self, *alerts: dict[str, str]) -> None:
        """Fire alerts with these labels (as Prometheus sends them: starting now, ending in an hour)."""
        now = datetime.now(UTC)
        body = [
            {"labels": labels, "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}
            for labels in alerts
        ]
        request = urllib.request.Request(
            f"{self.url}/api/v2/alerts", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200, response.read()[:500]

    def alerts(self) -> list[dict[str, Any]]:
        """Alertmanager's view of every alert, with ``status.state`` and ``status.inhibitedBy``."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=10) as response:
            return json.load(response)

    def wait_until_known(self, count: int, seconds: float = 10) -> list[dict[str, Any]]:
        """Poll (at most ``seconds``) until Alertmanager holds ``count`` alerts; return them."""
        deadline = time.monotonic() + seconds
        while True:
            alerts = self.alerts()
            if len(alerts) >= count or time.monotonic() >= deadline:
                return alerts
            time.sleep(0.05)
