"""The Pulumi Kubernetes Operator Stack manifest and its git source."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from automation.driver import operator
from automation.driver.environments import KIND_ENV, new_metadata
from automation.driver.workspace import WorkspaceError

META = new_metadata("env-alice", kind=KIND_ENV, owner="alice@example.com", ttl=timedelta(hours=8), template="dev",
                    purpose="demo", now=datetime(2026, 11, 21, 12, 0, tzinfo=UTC))
CONFIG = {"llm-platform:environment": "alice", "llm-platform:gpuPools": [{"name": "inference"}]}
SOURCE = operator.GitSource(repo="https://github.com/example/llm-platform.git", commit="0123abc")


def manifest(**overrides):
    args = dict(source=SOURCE, backend_url="s3://state", secrets_provider="passphrase", namespace="envs",
                service_account="pulumi", passphrase_secret="pulumi-passphrase")
    return operator.stack_manifest(META, CONFIG, **{**args, **overrides})


def test_manifest_has_the_operator_fields():
    stack = manifest()
    assert stack["apiVersion"] == "pulumi.com/v1" and stack["kind"] == "Stack"
    assert stack["metadata"]["name"] == "env-alice" and stack["metadata"]["namespace"] == "envs"
    spec = stack["spec"]
    assert list(spec) == ["serviceAccountName", "stack", "projectRepo", "commit", "backend", "secretsProvider",
                          "envRefs", "config", "destroyOnFinalize", "workspaceTemplate"]
    assert spec["destroyOnFinalize"] is True
    assert spec["config"] == CONFIG
    assert spec["envRefs"]["PULUMI_CONFIG_PASSPHRASE"]["secret"] == {"name": "pulumi-passphrase", "key": "passphrase"}
    assert spec["workspaceTemplate"]["spec"]["image"].startswith("pulumi/pulumi:3.")
    annotations = stack["metadata"]["annotations"]
    assert annotations["llm-platform.io/owner"] == "alice@example.com", "owners with @ go in annotations, not labels"
    assert annotations["llm-platform.io/expires-at"] == "2026-11-21T20:00:00Z"
    assert yaml.safe_load(operator.to_yaml(stack)) == stack


def test_branch_kms_and_repo_dir_variants():
    spec = manifest(source=operator.GitSource(repo="r", branch="main", repo_dir="infra"),
                    secrets_provider="awskms://alias/llm", passphrase_secret="", git_auth_secret="gh-token")["spec"]
    assert spec["branch"] == "main" and "commit" not in spec and spec["repoDir"] == "infra"
    assert "PULUMI_CONFIG_PASSPHRASE" not in spec["envRefs"]
    assert spec["gitAuth"]["accessToken"]["secret"] == {"name": "gh-token", "key": "accessToken"}


def test_unusable_settings_are_refused():
    with pytest.raises(WorkspaceError, match="PULUMI_BACKEND_URL=s3://"):
        manifest(backend_url="file:///home/alice/.pulumi-state")
    with pytest.raises(WorkspaceError, match="--passphrase-secret"):
        manifest(passphrase_secret="")
    with pytest.raises(WorkspaceError, match="exclude each other"):
        operator.git_source(Path("."), repo="r", branch="main", commit="abc")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_git_source_reads_origin_head_and_the_project_directory(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / "infra").mkdir(parents=True)
    (repo / "infra" / "Pulumi.yaml").write_text("name: llm-platform\n")
    git(repo, "init", "-q")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    git(repo, "remote", "add", "origin", "https://github.com/example/llm-platform.git")

    source = operator.git_source(repo / "infra")
    assert source.repo == "https://github.com/example/llm-platform.git"
    assert source.commit == git(repo, "rev-parse", "HEAD") and not source.branch
    assert source.repo_dir == "infra"
    assert operator.git_source(repo, branch="main") == operator.GitSource(
        repo="https://github.com/example/llm-platform.git", branch="main")


def test_git_source_without_origin_says_what_to_pass(tmp_path: Path):
    git_dir = tmp_path / "bare"
    git_dir.mkdir()
    git(git_dir, "init", "-q")
    with pytest.raises(WorkspaceError, match="pass --repo"):
        operator.git_source(git_dir)
