"""Debian's Prometheus tools for the behaviour tests: a real Prometheus on 127.0.0.1, promtool, amtool.

Tests that need a binary skip with the reason outside CI and fail in CI (``.ci/run`` installs the
``prometheus`` and ``prometheus-alertmanager`` packages). Servers bind 127.0.0.1 on a free port, run
in a temporary directory and are stopped by the fixture that started them.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.needs import missing


def require_binary(name: str, package: str) -> str:
    """Path of ``name``; skip (or fail in CI) when the Debian package is not installed."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} not installed (apt-get install {package}; .ci/run does it in CI)")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_ready(process: subprocess.Popen, url: str, *, name: str, log: Path, seconds: float, pause: float) -> None:
    """Poll ``url`` until it answers 2xx; fail with the log's tail if the server exits or stays silent."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(pause)
    stop_process(process)
    raise RuntimeError(f"{name} did not become ready in {seconds:.0f}s")


def stop_process(process: subprocess.Popen | None) -> None:
    """Terminate a local server, killing it after 20 s."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Sample:
    labels: dict[str, str]
    value: float


class PrometheusServer:
    """A Prometheus process over ``data_dir`` with ``config``; queried through its HTTP API as KEDA does."""

    def __init__(self, workdir: Path, config: dict[str, Any], data_dir: Path | None = None, rule_files: dict[str, Any] | None = None):
        self.binary = require_binary("prometheus", "prometheus")
        self.workdir = workdir
        self.data_dir = data_dir or workdir / "data"
        self.port = free_port()
        config = dict(config)
        if rule_files:
            names = []
            for name, document in rule_files.items():
                (workdir / name).write_text(yaml.safe_dump(document, sort_keys=False))
                names.append(str(workdir / name))
            config["rule_files"] = names
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        log = open(self.workdir / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=400d",
                "--query.lookback-delta=5m",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until_ready(self.process, f"{self.url}/-/ready", name="prometheus", log=self.workdir / "prometheus.log",
                         seconds=60, pause=0.2)
        return self

    def stop(self) -> None:
        stop_process(self.process)

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """Instant query, as KEDA's Prometheus scaler sends it (``/api/v1/query``)."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"query failed: {expr}: {exc.read().decode()[:500]}") from None
        data = body["data"]
        if data["resultType"] == "scalar":
            return [Sample({}, float(data["result"][1]))]
        return [Sample(item["metric"], float(item["value"][1])) for item in data["result"]]

    def targets_up(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as response:
            return json.load(response)["data"]["activeTargets"]


def backfill(openmetrics: str, data_dir: Path, workdir: Path) -> None:
    """Write ``openmetrics`` text (ends with ``# EOF``) into TSDB blocks with promtool."""
    promtool = require_binary("promtool", "prometheus")
    source = workdir / "series.om"
    source.write_text(openmetrics)
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=800h", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
