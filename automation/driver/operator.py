"""A Pulumi Kubernetes Operator (v2) ``Stack`` for a self-service environment.

With ``env create --via operator`` the environment is run by the operator in a cluster instead of
on this machine: the manifest names the git source (repo, pinned commit or tracked branch), the
shared backend, the secrets provider, the environment's config and ``destroyOnFinalize: true``,
so deleting the Stack object destroys the environment. Field names follow the operator's
``pulumi.com/v1`` Stack CRD (``operator/api/pulumi/shared/stack_types.go``); structured config
values need operator v2.3.0+ and a v3.202.0+ CLI image.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

from automation.driver.environments import EnvMetadata, format_time
from automation.driver.workspace import WorkspaceError

API_VERSION = "pulumi.com/v1"
#: The workspace image runs the same CLI version as this driver's SDK (the installed distribution's).
WORKSPACE_IMAGE = f"pulumi/pulumi:{version('pulumi')}-nonroot"
MANAGED_BY = "llm-platform-automation"


@dataclass(frozen=True)
class GitSource:
    repo: str
    commit: str = ""
    branch: str = ""
    repo_dir: str = ""


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise WorkspaceError(f"git is needed to describe the source ({exc}); pass --repo and --commit") from None
    if done.returncode != 0:
        reason = done.stderr.strip().removeprefix("error: ")
        raise WorkspaceError(f"git {' '.join(args)} failed ({reason}); pass --repo and --commit/--branch")
    return done.stdout.strip()


def git_source(
    root: Path, *, repo: str | None = None, branch: str | None = None, commit: str | None = None
) -> GitSource:
    """The repository the operator clones: ``origin`` and ``HEAD`` unless given; a branch is tracked
    (new commits roll out), a commit is pinned (the default, reproducible)."""
    if branch and commit:
        raise WorkspaceError("--branch and --commit exclude each other")
    repo = repo or _git(root, "remote", "get-url", "origin")
    if not branch and not commit:
        commit = _git(root, "rev-parse", "HEAD")
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel"))
        repo_dir = "" if top.resolve() == root.resolve() else str(root.resolve().relative_to(top.resolve()))
    except (WorkspaceError, ValueError):
        repo_dir = ""
    return GitSource(repo=repo, commit=commit or "", branch=branch or "", repo_dir=repo_dir)


def stack_manifest(
    meta: EnvMetadata,
    config: dict[str, Any],
    *,
    source: GitSource,
    backend_url: str,
    secrets_provider: str,
    namespace: str,
    service_account: str,
    passphrase_secret: str = "",
    git_auth_secret: str = "",
) -> dict[str, Any]:
    """The ``Stack`` object; nothing is applied."""
    if backend_url.startswith("file://"):
        raise WorkspaceError(
            "--via operator needs a backend the operator's pods can reach: set PULUMI_BACKEND_URL=s3://BUCKET "
            f"(got {backend_url})"
        )
    env_refs: dict[str, Any] = {
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": {"type": "Literal", "literal": {"value": "true"}},
    }
    if secrets_provider == "passphrase":
        if not passphrase_secret:
            raise WorkspaceError(
                "the passphrase provider needs --passphrase-secret NAME (a Secret with key 'passphrase')"
            )
        env_refs["PULUMI_CONFIG_PASSPHRASE"] = {
            "type": "Secret",
            "secret": {"name": passphrase_secret, "key": "passphrase"},
        }
    spec: dict[str, Any] = {
        "serviceAccountName": service_account,
        "stack": meta.stack,
        "projectRepo": source.repo,
    }
    if source.commit:
        spec["commit"] = source.commit
    else:
        spec["branch"] = source.branch
    if source.repo_dir:
        spec["repoDir"] = source.repo_dir
    if git_auth_secret:
        spec["gitAuth"] = {"accessToken": {"type": "Secret", "secret": {"name": git_auth_secret, "key": "accessToken"}}}
    spec.update(
        {
            "backend": backend_url,
            "secretsProvider": secrets_provider,
            "envRefs": env_refs,
            "config": config,
            "destroyOnFinalize": True,
            "workspaceTemplate": {"spec": {"image": WORKSPACE_IMAGE}},
        }
    )
    annotations = {
        "llm-platform.io/owner": meta.owner,
        "llm-platform.io/created-at": format_time(meta.created_at),
        "llm-platform.io/expires-at": format_time(meta.expires_at),
        "llm-platform.io/template": meta.template,
    }
    if meta.purpose:
        annotations["llm-platform.io/purpose"] = meta.purpose
    return {
        "apiVersion": API_VERSION,
        "kind": "Stack",
        "metadata": {
            "name": meta.stack,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, "llm-platform.io/kind": meta.kind},
            "annotations": annotations,
        },
        "spec": spec,
    }


def to_yaml(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False)
