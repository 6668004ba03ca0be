"""The cron and systemd examples in docs/examples run as written: a bare environment with only what
the file sets, the file's command line, against the stand-ins. Only site paths are substituted."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from automation import exit_codes
from automation.driver import environments
from automation.offline.plan import ROOT
from tests.automation.conftest import Rig

EXAMPLES = ROOT / "docs" / "examples"
SITE = "/srv/llm-platform"


def expire(rig: Rig, stack: str) -> None:
    path = rig.state / ".pulumi" / "stacks" / "llm-platform" / f"{stack}.pulumi-tags"
    document = json.loads(path.read_text())
    past = environments.utcnow() - timedelta(hours=1)
    document["tags"][environments.TAG_EXPIRES] = environments.format_time(past)
    path.write_text(json.dumps(document))


@pytest.fixture
def expired_env(rig: Rig, tmp_path: Path) -> dict[str, str]:
    kms = "awskms://alias/llm-platform?region=us-east-1"  # the examples' team key
    assert rig.run("env", "create", "old", "--from", "dev", "--ttl", "1h", "--secrets-provider", kms).code == exit_codes.OK
    expire(rig, "env-old")
    site = tmp_path / "site"
    site.symlink_to(ROOT)
    return {"site": str(site), "bin": str(rig.bin), "backend": rig.state.resolve().as_uri()}


def site_env(assignments: dict[str, str], where: dict[str, str]) -> dict[str, str]:
    """The file's variables with site values swapped for the rig's: tools on PATH, the file backend."""
    env = dict(assignments)
    env["PATH"] = f"{where['bin']}:/usr/bin:/bin"
    env["PULUMI_BACKEND_URL"] = where["backend"]
    for name in ("STANDIN_LOG", "PULUMI_HOME", "LOGNAME", "USER"):  # the stand-ins' own switches
        env[name] = os.environ[name]
    return env


def test_cron_example_runs_as_written(rig: Rig, expired_env: dict[str, str], tmp_path: Path):
    lines = [line for line in (EXAMPLES / "llm-platform-reap.cron").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assignments = dict(line.split("=", 1) for line in lines if re.match(r"^[A-Z_]+=", line))
    (job,) = [line for line in lines if not re.match(r"^[A-Z_]+=", line)]
    minute, hour, day, month, weekday, user, command = job.split(None, 6)
    assert (minute, user) == ("*/30", "platform")
    assert assignments["SHELL"] == "/bin/sh" and "PATH" in assignments, "cron's own PATH has no pulumi or aws"
    log = tmp_path / "reap.log"
    command = command.replace(SITE, expired_env["site"]).replace("/var/log/llm-platform/reap.log", str(log))

    done = subprocess.run([assignments["SHELL"], "-c", command], env=site_env(assignments, expired_env),
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr + log.read_text()
    report = json.loads(log.read_text()[log.read_text().index("{"):log.read_text().rindex("}") + 1])
    assert [(r["stack"], r["outcome"]) for r in report["reaped"]] == [("env-old", "destroyed")]
    kms = [e["argv"] for e in rig.calls.entries("aws") if e["argv"][:2] == ["kms", "describe-key"]]
    assert kms and kms[0][3] == "alias/llm-platform", "preflight checked the file's KMS key"


def test_systemd_example_runs_as_written(rig: Rig, expired_env: dict[str, str]):
    text = (EXAMPLES / "llm-platform-reap.service").read_text()
    assignments = dict(value.split("=", 1) for value in re.findall(r"^Environment=(.+)$", text, re.MULTILINE))
    (exec_start,) = re.findall(r"^ExecStart=(.+)$", text, re.MULTILINE)
    (work_dir,) = re.findall(r"^WorkingDirectory=(.+)$", text, re.MULTILINE)
    assert re.search(r"^KillMode=mixed$", text, re.MULTILINE), "SIGTERM to the driver alone, which forwards it"
    argv = shlex.split(exec_start.replace(SITE, expired_env["site"]))

    done = subprocess.run(argv, cwd=work_dir.replace(SITE, expired_env["site"]),
                          env=site_env(assignments, expired_env), capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["reaped"][0]["outcome"] == "destroyed"
    assert "OnCalendar=*:0/30" in (EXAMPLES / "llm-platform-reap.timer").read_text()
