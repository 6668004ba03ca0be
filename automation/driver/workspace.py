"""Where stacks run: the state backend, the secrets provider, the Pulumi CLI and one isolated
workspace per run.

Every run gets its own temporary work directory holding a generated ``Pulumi.yaml`` (whose
``main`` points back at the project) and the stack's ``Pulumi.<stack>.yaml``. Two runs, even two
runs of the same stack, therefore never share a config file or a "current stack" selection, and
nothing a run writes lands in the repository. What must outlive a run lives in the backend: state,
history, stack tags and the secrets provider (``PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER`` makes
the CLI reuse the provider recorded in state when the generated stack file has none).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import CalledProcessError
from urllib.parse import unquote

import yaml
from pulumi.automation import LocalWorkspace, PulumiCommand
from pulumi.automation.errors import InvalidVersionError
from semver import VersionInfo

from automation.offline.plan import ROOT

#: Stack tags on self-managed (DIY) backends arrived in Pulumi CLI v3.211.0; env metadata needs them.
MIN_CLI_VERSION = VersionInfo.parse("3.211.0")
#: Directory whose ``bin/pulumi`` is the CLI to run (default: ``pulumi`` on PATH).
PULUMI_ROOT_ENV = "LLM_PLATFORM_PULUMI_ROOT"
#: Default for ``--secrets-provider`` so a team sets its KMS key once.
SECRETS_PROVIDER_ENV = "LLM_PLATFORM_SECRETS_PROVIDER"
#: Project-local state directory of the default file backend (ignored by git).
STATE_DIR = ".pulumi-state"
SECRETS_PROVIDER_SCHEMES = ("awskms://", "azurekeyvault://", "gcpkms://", "hashivault://")
INSTALL_URL = "https://www.pulumi.com/docs/iac/download-install/"
#: The project the verbs run (tests point it at a copy).
PROJECT_ROOT = ROOT


class WorkspaceError(Exception):
    """A set-up problem found before any stack operation: no CLI, no passphrase, a missing file."""


@dataclass(frozen=True)
class Project:
    """The Pulumi project on disk: program, stack files and the policy pack."""

    root: Path = field(default_factory=lambda: PROJECT_ROOT)

    @property
    def name(self) -> str:
        return str(self.settings()["name"])

    def settings(self) -> dict:
        return yaml.safe_load((self.root / "Pulumi.yaml").read_text())

    def stack_file(self, stack: str) -> Path:
        return self.root / f"Pulumi.{stack}.yaml"

    @property
    def policy_pack(self) -> Path:
        return self.root / "policies"

    def policy_config(self, stack: str) -> Path:
        return self.policy_pack / "config" / f"{stack}.json"

    def policy_args(self, stack: str) -> tuple[Path, Path]:
        """The pack and its config for ``stack``; raises WorkspaceError naming what is missing."""
        if not (self.policy_pack / "PulumiPolicy.yaml").is_file():
            raise WorkspaceError(f"no policy pack at {self.policy_pack} (PulumiPolicy.yaml missing)")
        config = self.policy_config(stack)
        if not config.is_file():
            known = sorted(p.stem for p in config.parent.glob("*.json")) or ["none"]
            raise WorkspaceError(f"no policy config {config.relative_to(self.root)}; configs here: {', '.join(known)}")
        return self.policy_pack, config


@dataclass(frozen=True)
class Backend:
    """Where state lives and how secrets are encrypted, plus the CLI environment that says so."""

    url: str
    secrets_provider: str
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.url.startswith("file://")


def default_backend_url(project: Project) -> str:
    return (project.root / STATE_DIR).resolve().as_uri()


def resolve_backend(
    project: Project,
    *,
    secrets_provider: str | None = None,
    needs_secrets: bool = True,
    environ: Mapping[str, str] = os.environ,
) -> Backend:
    """``PULUMI_BACKEND_URL`` or the project-local file backend, and a checked secrets provider.

    The passphrase provider needs ``PULUMI_CONFIG_PASSPHRASE`` (or ``..._FILE``) in the environment;
    ``needs_secrets=False`` skips that for read-only listings.
    """
    url = environ.get("PULUMI_BACKEND_URL") or default_backend_url(project)
    if url.startswith("file://"):
        url = _absolute_file_url(url)
    provider = secrets_provider or environ.get(SECRETS_PROVIDER_ENV) or "passphrase"
    if provider != "passphrase" and not provider.startswith(SECRETS_PROVIDER_SCHEMES):
        raise WorkspaceError(
            f"unknown secrets provider {provider!r}; use passphrase or a key URL such as awskms://alias/llm-platform"
        )
    if needs_secrets and provider == "passphrase":
        if "PULUMI_CONFIG_PASSPHRASE" not in environ and "PULUMI_CONFIG_PASSPHRASE_FILE" not in environ:
            raise WorkspaceError(
                "the passphrase secrets provider needs PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE "
                "(or pass --secrets-provider awskms://alias/NAME)"
            )
    env = {
        "PULUMI_BACKEND_URL": url,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
    }
    return Backend(url=url, secrets_provider=provider, env=env)


def _absolute_file_url(url: str) -> str:
    """``file://~/state`` or ``file://./state`` made absolute (the CLI runs in a temporary directory,
    where a relative path would put state in a directory that is deleted), and the directory created."""
    location, sep, query = url[len("file://"):].partition("?")
    path = Path(os.path.expanduser(unquote(location)))
    if not path.is_absolute():
        path = Path.cwd() / path
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve().as_uri() + sep + query


def pulumi_command(environ: Mapping[str, str] = os.environ) -> PulumiCommand:
    """The Pulumi CLI to drive, checked to be at least :data:`MIN_CLI_VERSION`; each of its runs gets
    its own process group so that signals reach it once, through the driver (``interrupts``)."""
    root = environ.get(PULUMI_ROOT_ENV) or None
    where = f"{root}/bin/pulumi" if root else "pulumi on PATH"
    from automation.driver.interrupts import GroupedPulumiCommand

    try:
        return GroupedPulumiCommand(root=root, version=MIN_CLI_VERSION)
    except (OSError, CalledProcessError) as exc:
        raise WorkspaceError(f"cannot run the Pulumi CLI ({where}): {exc}; install it from {INSTALL_URL}") from None
    except InvalidVersionError as exc:
        raise WorkspaceError(
            f"{exc} (environment metadata uses stack tags, which self-managed backends support "
            f"from v{MIN_CLI_VERSION})"
        ) from None


def _workspace_project_file(project: Project, work_dir: Path) -> dict:
    """The project's Pulumi.yaml, rewritten to run the project's program from ``work_dir``."""
    settings = project.settings()
    settings.pop("stackConfigDir", None)
    main = project.root / settings.get("main", ".")
    settings["main"] = os.path.relpath(main, work_dir)
    runtime = settings.get("runtime")
    if isinstance(runtime, dict):
        options = runtime.get("options") or {}
        if "virtualenv" in options and not os.path.isabs(options["virtualenv"]):
            options["virtualenv"] = str(project.root / options["virtualenv"])
    return settings


@contextmanager
def isolated_workspace(
    project: Project,
    backend: Backend,
    command: PulumiCommand,
    *,
    stack_files: Mapping[str, Path] | None = None,
) -> Iterator[LocalWorkspace]:
    """A LocalWorkspace in a fresh temporary directory, removed afterwards.

    ``stack_files`` copies existing ``Pulumi.<stack>.yaml`` files in (repository stacks); stacks
    created by the driver get their config through ``pulumi config set-all`` instead.
    """
    work_dir = Path(tempfile.mkdtemp(prefix=f"{project.name}-ws-"))
    try:
        project_file = _workspace_project_file(project, work_dir)
        (work_dir / "Pulumi.yaml").write_text(yaml.safe_dump(project_file, sort_keys=False))
        for stack, source in (stack_files or {}).items():
            shutil.copyfile(source, work_dir / f"Pulumi.{stack}.yaml")
        yield LocalWorkspace(
            work_dir=str(work_dir),
            env_vars=dict(backend.env),
            secrets_provider=backend.secrets_provider,
            pulumi_command=command,
        )
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
