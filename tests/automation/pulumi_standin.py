"""A recording stand-in for the Pulumi CLI, installed as ``<root>/bin/pulumi`` for ``PulumiCommand(root=...)``.

It appends every invocation (argv, cwd, selected environment) to the JSON-lines log named by
``STANDIN_LOG`` and answers like the real CLI (v3.272) on a self-managed file backend: stacks,
config in the workspace's ``Pulumi.<stack>.yaml``, stack tags in ``<stack>.pulumi-tags`` files,
outputs, history, locks, and engine events streamed to the ``--event-log`` the Automation API
passes (a gRPC ``tcp://`` address, as for every CLI after 3.205; the driver needs 3.211+). Error
messages match the ones ``pulumi.automation.errors`` classifies.

Signals, as the real CLI handles them (``pkg/backend/cancellation_scope.go``): the first SIGINT or
SIGTERM during an update cancels it: the step in flight finishes, the checkpoint is written, the
lock is released and the CLI exits with "update canceled"; a second one terminates at once,
leaving the lock and the checkpoint as they were. Each signal received is logged
(``"tool": "pulumi-signal"``). Locks are written like the DIY backend's
(``.pulumi/locks/organization/<project>/<stack>/<id>.json`` with pid, username, hostname,
timestamp) and ``pulumi cancel`` deletes them all, as ``diyBackend.CancelCurrentUpdate`` does.

Failure simulation, through the environment:
  STANDIN_FAIL=up,destroy        those operations fail after some resources (a resource error)
  STANDIN_POLICY=mandatory|advisory  preview/up report a policy violation (mandatory fails them)
  STANDIN_INTERRUPT=up           that operation sends SIGINT to its parent (a Ctrl-C the driver
                                 forwards) halfway through, then carries on until cancelled
  STANDIN_STEP_SECONDS=0.5       each resource step takes this long (time to send a signal)
  STANDIN_PULUMI_VERSION=3.200.0 the version reported by ``pulumi version``
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

VERSION = os.environ.get("STANDIN_PULUMI_VERSION", "3.272.0")
RECORDED_ENV = (
    "PULUMI_BACKEND_URL",
    "PULUMI_HOME",
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER",
    "PULUMI_SKIP_UPDATE_CHECK",
    "PULUMI_AUTOMATION_API",
)
VALUE_FLAGS = {
    "--stack", "-s", "--policy-pack", "--policy-pack-config", "--event-log", "--exec-kind", "--secrets-provider",
    "--message", "-m", "--color", "--page-size", "--page", "--plaintext", "--secret", "--client", "--config-file",
    "--parallel", "--target", "--exclude", "--replace", "--tag-filter",
}
MULTI_FLAGS = {"--policy-pack", "--policy-pack-config", "--plaintext", "--secret", "--target", "--exclude"}
TAG_NAME = re.compile(r"^[a-zA-Z0-9\-_.:]{1,40}$")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.000Z"


class Fail(Exception):
    def __init__(self, message: str, code: int = 255, stdout: str = ""):
        super().__init__(message)
        self.code, self.stdout = code, stdout


def now() -> str:
    return datetime.now(UTC).strftime(TIME_FORMAT)


def record(argv: list[str], stdin: str | None = None) -> None:
    entry = {
        "tool": "pulumi",
        "argv": argv,
        "cwd": os.getcwd(),
        "env": {k: ("<set>" if "PASSPHRASE" in k else os.environ[k]) for k in RECORDED_ENV if k in os.environ},
        "pid": os.getpid(),
        "time": time.time(),
    }
    with open(os.environ["STANDIN_LOG"], "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps(entry) + "\n")


def parse(args: list[str]) -> tuple[list[str], dict[str, object]]:
    positionals: list[str] = []
    flags: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            positionals.extend(args[i + 1:])
            break
        if arg.startswith("-"):
            name, eq, inline = arg.partition("=")
            if name in VALUE_FLAGS and not eq:
                i += 1
                value: object = args[i]
            else:
                value = inline if eq else True
            if name in MULTI_FLAGS:
                flags.setdefault(name, []).append((name, value))  # type: ignore[union-attr]
            else:
                flags[name] = value
        else:
            positionals.append(arg)
        i += 1
    return positionals, flags


def load_yaml(path: Path) -> dict:
    """Stack files this stand-in wrote are JSON (which is YAML); others need the YAML parser."""
    if not path.is_file():
        return {}
    text = path.read_text()
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # slow to import: only for stack files copied from the repository

        return yaml.safe_load(text) or {}


def dump_yaml(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2))


def read_project(path: Path) -> dict:
    """The top-level ``name`` and ``main`` of Pulumi.yaml, without a YAML parser (start-up time)."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^(name|main):\s*(.+?)\s*$", line)
        if match:
            found[match.group(1)] = match.group(2).strip("'\"")
    return found


class Backend:
    """The file backend named by PULUMI_BACKEND_URL, laid out like the real DIY backend."""

    def __init__(self, project: str):
        url = os.environ.get("PULUMI_BACKEND_URL")
        if not url:
            raise Fail("error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions")
        if not url.startswith("file://"):
            raise Fail(f"error: the stand-in supports file:// backends only, got {url}")
        self.url = url
        self.root = Path(unquote(url[len("file://"):].partition("?")[0])) / ".pulumi"
        self.project = project
        self.stacks = self.root / "stacks" / project
        self.stacks.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def locked(self):
        with open(self.root / ".standin.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def state_path(self, stack: str) -> Path:
        return self.stacks / f"{stack}.json"

    def tags_path(self, stack: str) -> Path:
        return self.stacks / f"{stack}.pulumi-tags"

    def lock_dir(self, stack: str) -> Path:
        return self.root / "locks" / "organization" / self.project / stack

    def exists(self, stack: str) -> bool:
        return self.state_path(stack).is_file()

    def require(self, stack: str) -> dict:
        if not self.exists(stack):
            raise Fail(f"error: no stack named '{stack}' found")
        return json.loads(self.state_path(stack).read_text())

    def save(self, stack: str, state: dict) -> None:
        tmp = self.state_path(stack).with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path(stack))

    def tags(self, stack: str) -> dict[str, str]:
        path = self.tags_path(stack)
        tags = json.loads(path.read_text())["tags"] if path.is_file() else {}
        return {"pulumi:project": self.project, **tags}

    def save_tags(self, stack: str, tags: dict[str, str]) -> None:
        self.tags_path(stack).write_text(json.dumps({"version": 1, "tags": tags}, indent=4))

    def locks(self, stack: str) -> list[Path]:
        directory = self.lock_dir(stack)
        return sorted(directory.glob("*.json")) if directory.is_dir() else []


class Cli:
    def __init__(self, args: list[str]):
        self.positionals, self.flags = parse(args)
        self.cwd = Path.cwd()
        project_file = self.cwd / "Pulumi.yaml"
        if not project_file.is_file():
            raise Fail("error: no Pulumi.yaml project file found (searching upwards from " + str(self.cwd) + ")")
        self.project_settings = read_project(project_file)
        self.backend = Backend(self.project_settings["name"])

    # --- helpers --------------------------------------------------------------------------------

    def stack_name(self) -> str:
        name = self.flags.get("--stack") or self.flags.get("-s")
        if not name:
            raise Fail("error: no stack selected; please use `pulumi stack select`")
        return str(name).rsplit("/", 1)[-1]

    def stack_file(self, stack: str) -> Path:
        return self.cwd / f"Pulumi.{stack}.yaml"

    def require_passphrase(self, provider: str) -> None:
        if provider == "passphrase" and not (
            "PULUMI_CONFIG_PASSPHRASE" in os.environ or "PULUMI_CONFIG_PASSPHRASE_FILE" in os.environ
        ):
            raise Fail(
                "error: getting secrets manager: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or "
                "PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
            )

    def config(self, stack: str) -> dict:
        return dict(load_yaml(self.stack_file(stack)).get("config") or {})

    # --- dispatch -------------------------------------------------------------------------------

    def run(self) -> int:
        words = self.positionals
        table = {
            ("stack", "select"): self.stack_select,
            ("stack", "init"): self.stack_init,
            ("stack", "rm"): self.stack_rm,
            ("stack", "ls"): self.stack_ls,
            ("stack", "output"): self.stack_output,
            ("stack", "history"): self.stack_history,
            ("stack", "tag"): self.stack_tag,
            ("cancel",): self.cancel,
            ("config", "set-all"): self.config_set_all,
            ("config",): self.config_show,
            ("preview",): lambda: self.operation("preview"),
            ("up",): lambda: self.operation("update"),
            ("destroy",): lambda: self.operation("destroy"),
            ("refresh",): lambda: self.operation("refresh"),
        }
        for length in (2, 1):
            handler = table.get(tuple(words[:length]))
            if handler:
                return handler()
        raise Fail(f"error: unknown command {' '.join(words)!r} for the stand-in", code=1)

    # --- stacks ---------------------------------------------------------------------------------

    def stack_select(self) -> int:
        self.backend.require(self.stack_name())
        return 0

    def stack_init(self) -> int:
        stack = self.positionals[2] if len(self.positionals) > 2 else self.stack_name()
        provider = str(self.flags.get("--secrets-provider", "passphrase"))
        self.require_passphrase(provider)
        with self.backend.locked():
            if self.backend.exists(stack):
                raise Fail(f"error: stack '{stack}' already exists")
            self.backend.save(stack, {"secretsProvider": provider, "resources": [], "outputs": {}, "history": []})
        settings = load_yaml(self.stack_file(stack))
        if provider == "passphrase":
            settings.setdefault("encryptionsalt", f"v1:{secrets.token_urlsafe(12)}:v1:{secrets.token_urlsafe(16)}")
        else:
            settings["secretsprovider"] = provider
            settings["encryptedkey"] = secrets.token_urlsafe(32)
        dump_yaml(self.stack_file(stack), settings)
        print(f"Created stack '{stack}'")
        return 0

    def stack_rm(self) -> int:
        stack = self.positionals[2] if len(self.positionals) > 2 else self.stack_name()
        with self.backend.locked():
            state = self.backend.require(stack)
            if state["resources"] and "--force" not in self.flags:
                raise Fail(
                    f"error: '{stack}' still has resources; removal rejected. Possible actions:\n"
                    "- Make sure that '" + stack + "' is the stack that you want to destroy\n"
                    "- Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`\n"
                    "- Run `pulumi stack rm --force` to override this error"
                )
            self.backend.state_path(stack).unlink()
            self.backend.tags_path(stack).unlink(missing_ok=True)
        if "--preserve-config" not in self.flags:
            self.stack_file(stack).unlink(missing_ok=True)
        print(f"Stack '{stack}' has been removed!")
        return 0

    def stack_ls(self) -> int:
        rows = []
        with self.backend.locked():
            for path in sorted(self.backend.stacks.glob("*.json")):
                state = json.loads(path.read_text())
                row = {"name": path.stem, "current": False, "updateInProgress": bool(self.backend.locks(path.stem))}
                if state["history"]:
                    row["lastUpdate"] = state["history"][-1]["endTime"]
                    row["resourceCount"] = len(state["resources"])
                rows.append(row)
        print(json.dumps(rows, indent=4))
        return 0

    def stack_output(self) -> int:
        state = self.backend.require(self.stack_name())
        show = "--show-secrets" in self.flags
        if show:
            self.require_passphrase(state["secretsProvider"])
        outputs = {k: (v["value"] if show or not v["secret"] else "[secret]") for k, v in state["outputs"].items()}
        print(json.dumps(outputs, indent=4))
        return 0

    def stack_history(self) -> int:
        state = self.backend.require(self.stack_name())
        entries = list(reversed(state["history"]))
        if "--page-size" in self.flags:
            size, page = int(self.flags["--page-size"]), int(self.flags.get("--page", 1))
            entries = entries[(page - 1) * size: page * size]
        print(json.dumps(entries, indent=4))
        return 0

    def stack_tag(self) -> int:
        action = self.positionals[2] if len(self.positionals) > 2 else "ls"
        stack = self.stack_name()
        with self.backend.locked():
            self.backend.require(stack)
            tags = self.backend.tags(stack)
            if action == "ls":
                print(json.dumps(tags, indent=4))
            elif action == "get":
                name = self.positionals[3]
                if name not in tags:
                    raise Fail(f"error: stack tag '{name}' not found for stack '{stack}'")
                print(tags[name])
            elif action == "set":
                name, value = self.positionals[3], self.positionals[4]
                if not TAG_NAME.match(name):
                    raise Fail(f"error: invalid stack tag {name!r}: tag names may only contain alphanumerics, "
                               "hyphens, underscores, periods, or colons and be at most 40 characters")
                if len(value) > 256:
                    raise Fail(f"error: stack tag {name!r} value is too long (max length 256 characters)")
                tags[name] = value
                self.backend.save_tags(stack, {k: v for k, v in tags.items() if k != "pulumi:project"})
            elif action == "rm":
                tags.pop(self.positionals[3], None)
                self.backend.save_tags(stack, {k: v for k, v in tags.items() if k != "pulumi:project"})
            else:
                raise Fail(f"error: unknown stack tag command {action}", code=1)
        return 0

    def cancel(self) -> int:
        stack = self.stack_name()
        with self.backend.locked():
            self.backend.require(stack)
            for path in self.backend.locks(stack):
                path.unlink(missing_ok=True)
        print(f"The currently running update for '{stack}' has been canceled!")
        return 0

    # --- config ---------------------------------------------------------------------------------

    def config_set_all(self) -> int:
        stack = self.stack_name()
        self.backend.require(stack)
        settings = load_yaml(self.stack_file(stack))
        config = settings.setdefault("config", {})
        for name, pair in self.flags.get("--plaintext", []) + self.flags.get("--secret", []):  # type: ignore[operator]
            key, sep, value = str(pair).partition("=")
            if not sep:
                raise Fail(f"error: could not parse {pair!r} as a configuration key/value pair", code=1)
            if ":" not in key:
                key = f"{self.backend.project}:{key}"
            config[key] = {"secure": "v1:" + secrets.token_urlsafe(24)} if name == "--secret" else value
        dump_yaml(self.stack_file(stack), settings)
        return 0

    def config_show(self) -> int:
        stack = self.stack_name()
        self.backend.require(stack)
        out = {}
        for key, value in self.config(stack).items():
            secret = isinstance(value, dict) and "secure" in value
            out[key] = {"value": "[secret]" if secret else value, "secret": secret}
        print(json.dumps(out, indent=4))
        return 0

    # --- operations -----------------------------------------------------------------------------

    def check_program(self) -> None:
        main = self.cwd / self.project_settings.get("main", ".")
        if not (main / "__main__.py").is_file():
            raise Fail(f"error: failed to find a Python program: {main}/__main__.py does not exist")

    def check_policy_packs(self) -> None:
        packs = [str(v) for _, v in self.flags.get("--policy-pack", [])]  # type: ignore[union-attr]
        configs = [str(v) for _, v in self.flags.get("--policy-pack-config", [])]  # type: ignore[union-attr]
        if configs and len(configs) != len(packs):
            raise Fail("error: the number of --policy-pack-config flags must match the number of --policy-pack flags")
        for pack in packs:
            if not (Path(pack) / "PulumiPolicy.yaml").is_file():
                raise Fail(f"error: no PulumiPolicy.yaml found in {pack}")
        for config in configs:
            try:
                json.loads(Path(config).read_text())
            except (OSError, ValueError) as exc:
                raise Fail(f"error: loading policy pack config {config}: {exc}") from None

    def planned(self, stack: str) -> list[tuple[str, str]]:
        config = self.config(stack)
        pools = config.get(f"{self.backend.project}:gpuPools") or []
        if isinstance(pools, str):
            pools = json.loads(pools)
        resources = [
            ("pulumi:pulumi:Stack", f"{self.backend.project}-{stack}"),
            ("llm-platform:index:Platform", "llm-platform"),
            ("llm-platform:index:Network", "network"),
            ("llm-platform:index:Cluster", "cluster"),
            ("llm-platform:index:SystemNodePool", "system"),
        ]
        resources += [("llm-platform:index:GpuNodePool", str(p.get("name", f"gpu{i}"))) for i, p in enumerate(pools)]
        resources.append(("llm-platform:index:GpuDevicePlugin", "nvidia-device-plugin"))
        return resources

    def urn(self, stack: str, type_: str, name: str) -> str:
        return f"urn:pulumi:{stack}::{self.backend.project}::{type_}::{name}"

    def outputs(self, stack: str) -> dict:
        config = self.config(stack)
        environment = config.get(f"{self.backend.project}:environment", stack)
        cluster = f"{self.backend.project}-{environment}"
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": f"https://{cluster}.eks.example"}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "aws"}}],
            "current-context": cluster,
            "users": [{"name": "aws", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}}],
        }
        return {
            "clusterName": {"value": cluster, "secret": False},
            "kubeconfig": {"value": json.dumps(kubeconfig), "secret": True},
            "oidcProviderArn": {"value": f"arn:aws:iam::123456789012:oidc-provider/{cluster}", "secret": False},
            "nodeRoleArns": {"value": [f"arn:aws:iam::123456789012:role/{cluster}-node"], "secret": False},
            "gatewayRoleArn": {"value": f"arn:aws:iam::123456789012:role/{cluster}-gateway-bedrock", "secret": False},
        }

    def operation(self, kind: str) -> int:
        stack = self.stack_name()
        state = self.backend.require(stack)
        self.require_passphrase(state["secretsProvider"])
        if kind in ("preview", "update"):
            self.check_policy_packs()
        if kind != "destroy":
            self.check_program()
        mutating = kind != "preview"
        lock = None
        if mutating:
            with self.backend.locked():
                held = self.backend.locks(stack)
                if held:
                    lines = []
                    for path in held:
                        info = json.loads(path.read_text())
                        where = f"{self.backend.url}/{path.relative_to(self.backend.root.parent)}"
                        lines.append(f"\n  {where}: created by {info['username']}@{info['hostname']} "
                                     f"(pid {info['pid']}) at {info['timestamp']}")
                    raise Fail(
                        f"error: the stack is currently locked by {len(held)} lock(s). Either wait for the other "
                        "process(es) to end or delete the lock file with `pulumi cancel`." + "".join(lines)
                    )
                lock = self.backend.lock_dir(stack) / f"{secrets.token_hex(8)}.json"
                lock.parent.mkdir(parents=True, exist_ok=True)
                lock.write_text(json.dumps({"pid": os.getpid(), "username": os.environ.get("USER", "standin"),
                                            "hostname": socket.gethostname(),
                                            "timestamp": datetime.now(UTC).isoformat()}))
        self.lock = lock
        try:
            return self.run_operation(kind, stack, state)
        finally:
            self.release()

    def checkpoint(self, kind: str, stack: str, state: dict, existing: list[str], done: list[tuple[str, str]],
                   save: bool = True) -> None:
        """The state after the steps done so far (the real CLI journals every step)."""
        if kind == "update":
            applied = [urn for op, urn in done]
            state["resources"] = applied + [urn for urn in existing if urn not in applied]
        elif kind == "destroy":
            state["resources"] = [urn for urn in existing if urn not in {u for _, u in done}]
            if not state["resources"]:
                state["outputs"] = {}
        if save:
            with self.backend.locked():
                self.backend.save(stack, state)

    def release(self) -> None:
        if getattr(self, "lock", None) is not None:
            self.lock.unlink(missing_ok=True)
            self.lock = None

    def run_operation(self, kind: str, stack: str, state: dict) -> int:
        events = EventSink(self.flags.get("--event-log"))
        started = now()
        verb = {"preview": "Previewing update", "update": "Updating", "destroy": "Destroying", "refresh": "Refreshing"}
        print(f"{verb[kind]} ({stack}):\n")
        events.emit(preludeEvent={"config": {}})
        existing = list(state["resources"])
        if kind == "destroy":
            steps = [("delete", urn) for urn in reversed(existing)]
        elif kind == "refresh":
            steps = [("refresh", urn) for urn in existing]
        else:
            urns = [self.urn(stack, t, n) for t, n in self.planned(stack)]
            steps = [("same" if urn in existing else "create", urn) for urn in urns]
        failing = kind.replace("update", "up") in os.environ.get("STANDIN_FAIL", "").split(",")
        interrupt = kind.replace("update", "up") in os.environ.get("STANDIN_INTERRUPT", "").split(",")
        policy = os.environ.get("STANDIN_POLICY", "") if kind in ("preview", "update") else ""
        done: list[tuple[str, str]] = []
        step_seconds = float(os.environ.get("STANDIN_STEP_SECONDS", "0") or 0)
        cancel = Cancellation(self)
        for index, (op, urn) in enumerate(steps):
            if cancel.requested:
                break  # cancelled: no new step starts
            if failing and index == max(1, len(steps) // 2):
                break
            if interrupt and index == max(1, len(steps) // 2):
                os.kill(os.getppid(), signal.SIGINT)  # a Ctrl-C at the driver, which forwards it here
                cancel.wait(5.0)
            type_ = urn.split("::")[2]
            events.emit(resourcePreEvent={"metadata": {"op": op, "urn": urn, "type": type_, "provider": ""},
                                          "planning": kind == "preview"})
            if step_seconds:
                time.sleep(step_seconds)  # the step in flight finishes even when a cancel arrives meanwhile
            events.emit(resOutputsEvent={"metadata": {"op": op, "urn": urn, "type": type_, "provider": ""},
                                         "planning": kind == "preview"})
            sign, past = {"create": ("+", "created"), "delete": ("-", "deleted"), "same": (" ", ""),
                          "refresh": ("~", "refreshed")}[op]
            past = op if kind == "preview" and op != "same" else past
            print(f" {sign}  {type_} {urn.rsplit('::', 1)[-1]} {past}".rstrip(), flush=True)
            done.append((op, urn))
            if kind != "preview":
                self.checkpoint(kind, stack, state, existing, done)
        cancelled = cancel.requested
        changes: dict[str, int] = {}
        for op, _ in done:
            changes[op] = changes.get(op, 0) + 1
        self.checkpoint(kind, stack, state, existing, done, save=False)
        violations = []
        if policy in ("mandatory", "advisory"):
            target = next((u for _, u in steps if "GpuNodePool" in u), steps[0][1] if steps else "")
            violations.append(target)
            events.emit(policyEvent={
                "resourceUrn": target,
                "message": "GPU pool has no nvidia.com/gpu NoSchedule taint: CPU pods will land on GPU nodes.\n"
                           "Add the contract's GPU taint to the pool.",
                "color": "raw",
                "policyName": "gpu-pool-tainted",
                "policyPackName": "llm-platform-gpu",
                "policyPackVersion": "0.1.0",
                "policyPackVersionTag": "0.1.0",
                "enforcementLevel": policy,
            })
        failed = failing or cancelled or policy == "mandatory"
        if failing:
            urn = steps[len(done)][1] if len(done) < len(steps) else (steps[-1][1] if steps else "")
            type_ = urn.split("::")[2] if urn else ""
            events.emit(resOpFailedEvent={"metadata": {"op": "create", "urn": urn, "type": type_, "provider": ""},
                                          "status": 1, "steps": 1})
            message = ("error: deleting EC2 VPC: DependencyViolation: the vpc has dependencies and cannot be deleted"
                       if kind == "destroy" else
                       "error: creating EKS Node Group (inference): InvalidRequestException: insufficient Spot capacity")
            events.emit(diagnosticEvent={"urn": urn, "message": message + "\n", "color": "raw", "severity": "error"})
        if kind != "preview":
            if kind == "update" and not failed:
                state["outputs"] = self.outputs(stack)
            config = {k: {"value": v if isinstance(v, str) else json.dumps(v), "secret": False}
                      for k, v in self.config(stack).items()}
            state["history"].append({
                "kind": kind, "startTime": started, "endTime": now(), "message": "",
                "environment": {"exec.kind": str(self.flags.get("--exec-kind", "cli"))}, "config": config,
                "result": "failed" if failed else "succeeded", "version": len(state["history"]) + 1,
                "resourceChanges": changes,
            })
            with self.backend.locked():
                self.backend.save(stack, state)
        events.emit(summaryEvent={"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": changes,
                                  "PolicyPacks": {"llm-platform-gpu": "0.1.0"} if policy else {}})
        if cancelled:
            events.close()
            self.release()
            raise Fail("error: update canceled")
        events.emit(cancelEvent={})
        events.close()
        if violations:
            print("\nPolicies:")
            print(f"    llm-platform-gpu@v0.1.0\n        - [{policy}]  gpu-pool-tainted  ({violations[0]})")
        print("\nResources:")
        for op, n in sorted(changes.items()):
            print(f"    {n} {op}")
        print("\nDuration: 1s")
        if policy == "mandatory":
            raise Fail("error: preview failed" if kind == "preview" else "error: update failed")
        if failing:
            raise Fail("error: update failed")
        return 0


def log_signal(signum: int) -> None:
    entry = {"tool": "pulumi-signal", "signal": signal.Signals(signum).name, "pid": os.getpid(), "time": time.time()}
    with open(os.environ["STANDIN_LOG"], "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps(entry) + "\n")


class Cancellation:
    """SIGINT/SIGTERM during an operation: the first cancels, the second terminates at once."""

    def __init__(self, cli: Cli):
        self.cli, self.count = cli, 0
        signal.signal(signal.SIGINT, self.handle)
        signal.signal(signal.SIGTERM, self.handle)

    @property
    def requested(self) -> bool:
        return self.count > 0

    def handle(self, signum: int, frame) -> None:
        log_signal(signum)
        self.count += 1
        name = "^C" if signum == signal.SIGINT else "SIGTERM"
        if self.count == 1:
            print(f"{name} received; cancelling. If you would like to terminate immediately, press ^C again.",
                  flush=True)
            return
        print(f"{name} received; terminating", flush=True)
        os._exit(255)  # lock and checkpoint stay as they were

    def wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.requested and time.monotonic() < deadline:
            time.sleep(0.02)


class EventSink:
    """Engine events, JSON-encoded like the CLI's, streamed live over the Automation API's gRPC event
    stream (as the CLI does, so a driver can show progress while the operation runs)."""

    def __init__(self, target: object):
        self.target = str(target) if target else ""
        if self.target and not self.target.startswith("tcp://"):
            raise Fail(f"error: the stand-in streams engine events over gRPC only, got --event-log {self.target}")
        self.sequence = 0
        self.thread = None
        if self.target:
            import queue
            import threading

            self.queue: queue.Queue = queue.Queue()
            self.thread = threading.Thread(target=self._stream, daemon=True)
            self.thread.start()

    def _stream(self) -> None:
        import grpc

        def encode(text: str) -> bytes:  # pulumirpc.EventRequest{string event = 1}
            data, size, prefix = text.encode(), len(text.encode()), b""
            while True:
                byte, size = size & 0x7F, size >> 7
                prefix += bytes([byte | (0x80 if size else 0)])
                if not size:
                    break
            return b"\x0a" + prefix + data

        with grpc.insecure_channel(self.target[len("tcp://"):]) as channel:
            send = channel.stream_unary("/pulumirpc.Events/StreamEvents", request_serializer=encode,
                                        response_deserializer=lambda raw: raw)
            try:
                send(iter(self.queue.get, None), timeout=600)
            except grpc.RpcError:
                pass

    def emit(self, **payload: object) -> None:
        self.sequence += 1
        if self.thread is not None:
            self.queue.put(json.dumps({"sequence": self.sequence, "timestamp": int(time.time()), **payload}))

    def close(self) -> None:
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join(10)
            self.thread = None


def main(argv: list[str]) -> int:
    record(argv)
    args = [a for a in argv if a != "--non-interactive"]
    if args == ["version"]:
        print(f"v{VERSION}")
        return 0
    try:
        return Cli(args).run()
    except Fail as failure:
        sys.stdout.write(failure.stdout)
        sys.stderr.write(str(failure) + "\n")
        return failure.code


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        code = main(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        code = 255
    sys.exit(code)
