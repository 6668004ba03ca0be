"""A rig for driver tests: a copy of the project, the recording Pulumi CLI and kubectl stand-ins,
a temporary file backend and PULUMI_HOME, and one JSON-lines log of every call."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from automation.cli import main
from automation.driver import workspace
from automation.offline.plan import ROOT

HERE = Path(__file__).parent
PASSPHRASE = "correct horse battery staple"
POLICY_CONFIG = {"all": "mandatory"}


def install(script: Path, target: Path) -> Path:
    """The stand-in as an executable run by this interpreter (which has grpc and PyYAML)."""
    target.write_text(f"#!{sys.executable}\n" + script.read_text())
    target.chmod(0o755)
    return target


@dataclass
class CliResult:
    code: int
    out: str
    err: str


class Calls:
    """The recorded invocations, in order."""

    def __init__(self, log: Path):
        self.log = log

    def entries(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def pulumi(self) -> list[dict[str, Any]]:
        """Pulumi CLI calls other than ``version``, with the Automation API's ``--non-interactive`` dropped."""
        rows = []
        for row in self.entries("pulumi"):
            argv = [a for a in row["argv"] if a != "--non-interactive"]
            if argv != ["version"]:
                rows.append({**row, "argv": argv})
        return rows

    def argvs(self) -> list[list[str]]:
        return [r["argv"] for r in self.pulumi()]

    def kubectl(self) -> list[dict[str, Any]]:
        """kubectl calls against the cluster (preflight's ``version --client`` dropped)."""
        return [e for e in self.entries("kubectl") if e["argv"][:1] != ["version"]]

    def commands(self, stack: str) -> list[str]:
        """A compact trace for one stack: the command words (``stack init``, ``up``, ``stack tag set``...)."""
        trace = []
        for argv in self.argvs():
            if stack in argv or f"--stack={stack}" in argv:
                words = [a for a in argv if not a.startswith("-")][:3]
                trace.append(" ".join(w for w in words if w in ("stack", "init", "select", "rm", "tag", "set", "ls",
                                                               "output", "history", "config", "set-all", "preview",
                                                               "up", "destroy", "refresh")))
        return trace


@dataclass
class Rig:
    project: Path
    bin: Path
    home: Path
    calls: Calls
    capsys: pytest.CaptureFixture
    monkeypatch: pytest.MonkeyPatch

    @property
    def state(self) -> Path:
        """The default project-local file backend."""
        return self.project / workspace.STATE_DIR

    @property
    def kubectl(self) -> str:
        return str(self.bin / "kubectl")

    def run(self, *argv: str) -> CliResult:
        self.capsys.readouterr()
        code = main(list(argv))
        captured = self.capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    def tags(self, stack: str) -> dict[str, str]:
        path = self.state / ".pulumi" / "stacks" / "llm-platform" / f"{stack}.pulumi-tags"
        return json.loads(path.read_text())["tags"] if path.exists() else {}

    def stacks(self) -> list[str]:
        folder = self.state / ".pulumi" / "stacks" / "llm-platform"
        return sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []


def make_project(folder: Path) -> Path:
    """The project's Pulumi.yaml and stack files, a program stub and a policy pack stub."""
    folder.mkdir(parents=True)
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.prod.yaml"):
        shutil.copyfile(ROOT / name, folder / name)
    (folder / "__main__.py").write_text("# the program runs only under the real CLI\n")
    (folder / "policies" / "config").mkdir(parents=True)
    (folder / "policies" / "PulumiPolicy.yaml").write_text("runtime: python\n")
    for stack in ("dev", "prod"):
        (folder / "policies" / "config" / f"{stack}.json").write_text(json.dumps(POLICY_CONFIG))
    return folder


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> Rig:
    cli_root = tmp_path / "cli"
    (cli_root / "bin").mkdir(parents=True)
    install(HERE / "pulumi_standin.py", cli_root / "bin" / "pulumi")
    install(HERE / "kubectl_standin.py", cli_root / "bin" / "kubectl")
    install(HERE / "aws_standin.py", cli_root / "bin" / "aws")
    project = make_project(tmp_path / "project")
    home = tmp_path / "pulumi-home"
    log = tmp_path / "calls.jsonl"
    monkeypatch.setattr(workspace, "PROJECT_ROOT", project)
    for name in ("PULUMI_BACKEND_URL", workspace.SECRETS_PROVIDER_ENV, "PULUMI_CONFIG_PASSPHRASE_FILE",
                 "STANDIN_FAIL", "STANDIN_POLICY", "STANDIN_INTERRUPT", "STANDIN_PULUMI_VERSION",
                 "STANDIN_KUBECTL", "STANDIN_SERVICES", "STANDIN_INGRESSES", "STANDIN_NODEPOOLS",
                 "STANDIN_STUCK", "STANDIN_STEP_SECONDS", "LLM_PLATFORM_CANCEL_GRACE", "STANDIN_AWS",
                 "STANDIN_GPU_SOFTWARE", "STANDIN_GPU_POOLS", "STANDIN_UNHEALTHY", "STANDIN_NODEGROUPS",
                 "STANDIN_IAM_POLICIES", "STANDIN_COLD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv(workspace.PULUMI_ROOT_ENV, str(cli_root))
    monkeypatch.setenv("PULUMI_HOME", str(home))
    monkeypatch.setenv("STANDIN_LOG", str(log))
    monkeypatch.setenv("PATH", f"{cli_root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")  # kubectl = stand-in
    monkeypatch.setenv("LOGNAME", "alice")
    monkeypatch.setenv("USER", "alice")
    return Rig(project, cli_root / "bin", home, Calls(log), capsys, monkeypatch)
