"""Backend, secrets provider and isolated workspaces, without running any stack operation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from automation.driver.workspace import Project, WorkspaceError, isolated_workspace, pulumi_command, resolve_backend
from tests.automation.conftest import Rig


def test_default_backend_is_project_local_and_created(tmp_path: Path):
    project = Project(tmp_path)
    backend = resolve_backend(project, environ={"PULUMI_CONFIG_PASSPHRASE": ""})
    assert backend.url == (tmp_path / ".pulumi-state").as_uri()
    assert backend.is_local and (tmp_path / ".pulumi-state").is_dir()
    assert backend.secrets_provider == "passphrase"
    assert backend.env["PULUMI_BACKEND_URL"] == backend.url
    assert backend.env["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] == "true"


def test_backend_url_and_secrets_provider_from_the_environment(tmp_path: Path):
    environ = {"PULUMI_BACKEND_URL": "s3://team-state?region=us-east-1",
               "LLM_PLATFORM_SECRETS_PROVIDER": "awskms://alias/llm-platform"}
    backend = resolve_backend(Project(tmp_path), environ=environ)
    assert backend.url == "s3://team-state?region=us-east-1" and not backend.is_local
    assert backend.secrets_provider == "awskms://alias/llm-platform"
    flag = resolve_backend(Project(tmp_path), secrets_provider="passphrase", environ={**environ,
                           "PULUMI_CONFIG_PASSPHRASE_FILE": "/run/secrets/pass"})
    assert flag.secrets_provider == "passphrase"


def test_relative_and_home_file_backends_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    secrets = {"PULUMI_CONFIG_PASSPHRASE": ""}
    relative = resolve_backend(Project(tmp_path), environ={**secrets, "PULUMI_BACKEND_URL": "file://./my state"})
    assert relative.url == (tmp_path / "my state").as_uri() and (tmp_path / "my state").is_dir()
    home = resolve_backend(Project(tmp_path), environ={**secrets, "PULUMI_BACKEND_URL": "file://~/.pulumi-state"})
    assert home.url == (tmp_path / "home" / ".pulumi-state").as_uri()
    assert home.env["PULUMI_BACKEND_URL"] == home.url


def test_secrets_provider_errors(tmp_path: Path):
    with pytest.raises(WorkspaceError, match="PULUMI_CONFIG_PASSPHRASE"):
        resolve_backend(Project(tmp_path), environ={})
    with pytest.raises(WorkspaceError, match="unknown secrets provider 'vault'"):
        resolve_backend(Project(tmp_path), secrets_provider="vault", environ={})
    listing = resolve_backend(Project(tmp_path), needs_secrets=False, environ={})
    assert listing.secrets_provider == "passphrase"


def test_isolated_workspace_runs_the_project_program_from_a_private_directory(rig: Rig):
    project = Project(rig.project)
    backend = resolve_backend(project)
    with isolated_workspace(project, backend, pulumi_command(), stack_files={"dev": project.stack_file("dev")}) as ws:
        work_dir = Path(ws.work_dir)
        settings = yaml.safe_load((work_dir / "Pulumi.yaml").read_text())
        assert settings["name"] == "llm-platform"
        assert (work_dir / settings["main"]).resolve() == rig.project.resolve()
        virtualenv = settings["runtime"]["options"]["virtualenv"]
        assert os.path.isabs(virtualenv) and Path(virtualenv) == rig.project / ".venv"
        assert (work_dir / "Pulumi.dev.yaml").read_text() == project.stack_file("dev").read_text()
        assert ws.env_vars["PULUMI_BACKEND_URL"] == backend.url
        assert ws.secrets_provider == "passphrase"
    assert not work_dir.exists()


def test_two_workspaces_never_share_a_directory(rig: Rig):
    project = Project(rig.project)
    backend = resolve_backend(project)
    command = pulumi_command()
    with isolated_workspace(project, backend, command) as first:
        with isolated_workspace(project, backend, command) as second:
            assert first.work_dir != second.work_dir


def test_missing_policy_pack_is_named(tmp_path: Path):
    with pytest.raises(WorkspaceError, match="no policy pack"):
        Project(tmp_path).policy_args("dev")
