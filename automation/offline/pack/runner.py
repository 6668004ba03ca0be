"""Drive a policy pack over its gRPC protocol as the Pulumi CLI does, without the CLI.

The CLI starts a Python pack as ``python -u __main__.py`` in the pack directory, with the stack's
configuration in its environment (``PULUMI_CONFIG``, ``PULUMI_PROJECT``, ``PULUMI_STACK``,
``PULUMI_DRY_RUN``: ``constructEnv`` in pulumi/pulumi sdk/go/common/resource/plugin/
analyzer_plugin.go), reads the port the pack prints on its first stdout line, and talks to it
through the ``Analyzer`` service with the generated stubs: ``GetAnalyzerInfo``, ``Configure`` (the
``--policy-pack-config`` file reconciled with each policy's schema defaults, an ``all`` level
applied to every policy that names none, validated against each schema), ``Analyze`` per resource
and ``AnalyzeStack`` once with every resource. Inputs are marshalled as the engine marshals them
for analyzers: unknowns and secrets kept in wire form, resource references downgraded to their ID
(or URN: the engine does not ask for ``KeepResources``), internal ``__`` keys dropped. One
difference is unavoidable: for ``AnalyzeStack`` the engine sends each resource's outputs, while a
plan holds inputs, so inputs are sent (a custom resource's preview outputs echo its inputs).

Typical use::

    report = run_pack(load_plan("build/prod/plan.json"), "policies/config/prod.json")
    if report.has_mandatory: ...

or, to reuse one pack process::

    with PolicyPackRunner() as pack:
        pack.configure("policies/config/dev.json")
        violations = pack.analyze(resource) + pack.analyze_stack(resources)
"""

from __future__ import annotations

import collections
import copy
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc
import jsonschema
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from automation.offline.pack.findings import (  # noqa: F401 - the pack's findings, re-exported
    PackInfo,
    PackReport,
    PolicyConfigError,
    PolicyInfo,
    PolicyPackError,
    Violation,
    resource_dict,
    urn_of,
)
from automation.offline.wire import OUTPUT_VALUE_SIG, RESOURCE_REF_SIG, SECRET_SIG, SIG_KEY, UNKNOWN_STRING
from policies.capacity import bounded_json

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PACK_DIR = ROOT / "policies"


LEVELS = {
    "advisory": analyzer_pb2.ADVISORY,
    "mandatory": analyzer_pb2.MANDATORY,
    "remediate": analyzer_pb2.REMEDIATE,
    "disabled": analyzer_pb2.DISABLED,
}
LEVEL_NAMES = {v: k for k, v in LEVELS.items()}
#: Same limit the pack's server and the CLI use (400 MiB), so large stacks fit one AnalyzeStack.
MAX_MESSAGE = 400 * 1024 * 1024
GRPC_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]


# --- engine marshalling ---------------------------------------------------------------------------


def engine_value(value: Any) -> Any:
    """One input value as the engine sends it to analyzers (KeepUnknowns, KeepSecrets, no resources)."""
    if isinstance(value, Mapping):
        sig = value.get(SIG_KEY)
        if sig == RESOURCE_REF_SIG:
            if "id" in value:
                return value["id"] if value["id"] != "" else UNKNOWN_STRING
            return value.get("urn", "")
        if sig == OUTPUT_VALUE_SIG:
            if "value" not in value:
                return UNKNOWN_STRING
            inner = engine_value(value["value"])
            return {SIG_KEY: SECRET_SIG, "value": inner} if value.get("secret") else inner
        if sig == SECRET_SIG:
            return {SIG_KEY: SECRET_SIG, "value": engine_value(value.get("value"))}
        if sig is not None:
            return dict(value)
        return {k: engine_value(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, (list, tuple)):
        return [engine_value(v) for v in value]
    return value


def to_struct(inputs: Mapping[str, Any]) -> struct_pb2.Struct:
    """The inputs' Struct as the engine sends it to analyzers."""
    struct = struct_pb2.Struct()
    struct.update(engine_value(dict(inputs or {})))
    return struct


def load_plan(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Resources of a plan file: ``{"resources": [...]}`` (the offline check's output) or a bare list."""
    data = json.loads(Path(path).read_text())
    resources = data["resources"] if isinstance(data, dict) else data
    if not isinstance(resources, list):
        raise ValueError(f"{path}: expected a list of resources")
    return resources


#: The longest ``NAME=value`` string (its NUL included) Linux takes in a new process's environment:
#: MAX_ARG_STRLEN, 32 pages of 4 KiB (include/uapi/linux/binfmts.h). A longer one fails the exec with
#: E2BIG, "argument list too long", whatever the total size.
MAX_ENVIRONMENT_STRING = 32 * 4096


def environment_string_bytes(name: str, value: str) -> int:
    """What ``name=value`` takes of :data:`MAX_ENVIRONMENT_STRING`."""
    return len(name.encode()) + 1 + len(value.encode()) + 1


def pack_environment(project: str, stack: str, config: Mapping[str, str], *, dry_run: bool = True) -> dict[str, str]:
    """The variables the engine adds to a policy pack's environment (``constructEnv``): the stack's
    configuration as ``PULUMI_CONFIG`` (``namespace:key`` -> string value, as ``json.Marshal``
    writes a Go map: keys sorted, no spaces), then project, stack and whether it is a preview.
    Empty values are left out, as the engine's ``maybeAppendEnv`` does."""
    values = {
        "PULUMI_CONFIG": json.dumps(dict(config), sort_keys=True, separators=(",", ":")) if config else "",
        "PULUMI_PROJECT": project,
        "PULUMI_STACK": stack,
        "PULUMI_DRY_RUN": "true" if dry_run else "false",
    }
    return {key: value for key, value in values.items() if value}


# --- config, as the CLI reconciles it ---------------------------------------------------------------


def parse_policy_config(raw: Mapping[str, Any]) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """``--policy-pack-config`` JSON: ``"all"`` or a policy name -> level string or ``{enforcementLevel, ...}``."""
    parsed: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for name, value in raw.items():
        if isinstance(value, str):
            if value not in LEVELS:
                raise PolicyConfigError(f"{name}: {value!r} is not a valid enforcement level ({', '.join(LEVELS)})")
            parsed[name] = (value, {})
        elif isinstance(value, Mapping):
            props = dict(value)
            level = props.pop("enforcementLevel", None)
            if level is not None and level not in LEVELS:
                raise PolicyConfigError(f"{name}: enforcementLevel {level!r} is not one of {', '.join(LEVELS)}")
            if level is None and not props:
                continue
            parsed[name] = (level, props)
        else:
            raise PolicyConfigError(f"{name}: {value!r} is not a valid value; must be a string or object")
    return parsed


def reconcile_policy_config(
    info: PackInfo, raw: Mapping[str, Any], *, strict: bool = True
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Schema defaults, then the pack's initial config, then ``raw``; validated per policy schema.

    Mirrors the CLI (pkg/resource/analyzer/config.go): a layer's ``all`` level goes to every policy,
    then a policy's own level in that layer replaces it. ``strict`` also rejects config for policies
    the pack does not have and properties a policy's schema does not declare, which the CLI ignores
    silently; a typo there would otherwise switch nothing on.
    """
    result: dict[str, tuple[str, dict[str, Any]]] = {}
    for policy in info.policies.values():
        defaults = {k: copy.deepcopy(v["default"]) for k, v in policy.config_schema.items() if "default" in v}
        result[policy.name] = (policy.enforcement_level, defaults)
    layers = [parse_policy_config(info.initial_config), parse_policy_config(raw)]
    errors: list[str] = []
    for layer in layers:
        if "all" in layer and layer["all"][0]:
            result = {name: (layer["all"][0], props) for name, (_, props) in result.items()}
        for name, (level, props) in layer.items():
            if name == "all":
                continue
            if strict and layer is layers[-1]:
                if name not in info.policies:
                    errors.append(f"{name}: no such policy in pack {info.name}")
                    continue
                unknown = sorted(set(props) - set(info.policies[name].config_schema))
                if unknown:
                    errors.append(f"{name}: unknown propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}")
            current_level, current_props = result.get(name, ("advisory", {}))
            result[name] = (level or current_level, {**current_props, **props})
    for policy in info.policies.values():
        schema: dict[str, Any] = {"type": "object", "properties": policy.config_schema}
        if policy.required:
            schema["required"] = list(policy.required)
        for error in jsonschema.Draft7Validator(schema).iter_errors(result[policy.name][1]):
            path = ".".join(str(p) for p in error.absolute_path)
            errors.append(f"{policy.name}: {path + ': ' if path else ''}{error.message}")
    if errors:
        raise PolicyConfigError("invalid policy pack config:\n  " + "\n  ".join(errors))
    return result


def read_policy_config(config: str | os.PathLike[str] | Mapping[str, Any] | None) -> tuple[Mapping[str, Any], str | None]:
    """A policy-pack config given as a file or parsed JSON: (its content, where it came from)."""
    if config is None:
        return {}, None
    if isinstance(config, Mapping):
        return config, "<dict>"
    path = Path(config)
    try:
        raw = bounded_json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise PolicyConfigError(f"cannot read policy pack config {path}: {error}") from error
    if not isinstance(raw, dict):
        raise PolicyConfigError(f"{path}: the policy pack config must be a JSON object")
    return raw, str(path)


# --- the pack process -------------------------------------------------------------------------------


def pack_project(pack_dir: Path) -> dict[str, Any]:
    """``PulumiPolicy.yaml`` of the pack, ``{}`` if it has none."""
    project = pack_dir / "PulumiPolicy.yaml"
    return (yaml.safe_load(project.read_text()) or {}) if project.exists() else {}


def pack_python(pack_dir: Path) -> str:
    """The interpreter PulumiPolicy.yaml names (``runtime.options.virtualenv``), else this one."""
    runtime = pack_project(pack_dir).get("runtime")
    if runtime is not None:
        venv = runtime.get("options", {}).get("virtualenv") if isinstance(runtime, dict) else None
        if venv:
            # No resolve(): a venv's python is a symlink, and following it would leave the venv.
            candidate = os.path.abspath(pack_dir / venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
            if os.path.exists(candidate):
                return candidate
    return sys.executable


#: Run as ``python -c _LAUNCH STARTER_PID COMMAND...``: ask Linux to send this process SIGTERM when
#: the thread that started it ends (PR_SET_PDEATHSIG, kept across exec), then become COMMAND.
_LAUNCH = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(0)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _with_parent_death_signal(command: list[str]) -> list[str]:
    """``command``, made to end with the thread that starts it (Linux).

    A pack serves until it is stopped; whoever started it stops it on every way out but one,
    being killed outright (SIGKILL, the OOM killer), which would leave the pack running on its own.
    The kernel ends it then. The pack must be started from a thread that lives as long as it
    should (the caller's main thread, in every use here).
    """
    if not sys.platform.startswith("linux"):
        return command
    return [command[0], "-c", _LAUNCH, str(os.getpid()), *command]


class PolicyPackRunner:
    """One running pack process and a gRPC channel to it; use as a context manager.

    ``launch`` starts the process and returns at once; ``connect`` waits for its port (``start``
    does both), so a caller can do other work while the pack imports its policies.
    """

    def __init__(
        self,
        pack_dir: str | os.PathLike[str] | None = None,
        *,
        python: str | None = None,
        startup_timeout: float = 60.0,
        call_timeout: float = 120.0,
        strict: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.pack_dir = Path(pack_dir or DEFAULT_PACK_DIR).resolve()
        self.python = python or pack_python(self.pack_dir)
        self.startup_timeout = startup_timeout
        self.call_timeout = call_timeout
        self.strict = strict
        self.env = {**os.environ, **(env or {})}
        self.port: int | None = None
        self.config_source: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes] | None = None
        self._started = 0.0
        self._channel: grpc.Channel | None = None
        self._stub: analyzer_pb2_grpc.AnalyzerStub | None = None
        self._stderr: Any = None
        self._info: PackInfo | None = None
        #: Seconds from process start until the port was printed and until the channel was ready.
        self.timings: dict[str, float] = {}

    # lifecycle

    def __enter__(self) -> PolicyPackRunner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self.launch()
        self.connect()

    def launch(self) -> None:
        """Start the pack's process (``python -u __main__.py`` in the pack directory)."""
        main = self.pack_dir / "__main__.py"
        if not main.exists():
            raise PolicyPackError(f"no policy pack at {self.pack_dir} (missing __main__.py)")
        self._stderr = tempfile.TemporaryFile()
        self._started = time.perf_counter()
        try:
            self._process = subprocess.Popen(
                _with_parent_death_signal([self.python, "-u", str(main)]),
                cwd=self.pack_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=self.env,
            )
            self._lines = queue.Queue()
            stdout, lines = self._process.stdout, self._lines
            assert stdout is not None

            def pump() -> None:
                for line in iter(stdout.readline, b""):
                    lines.put(line)
                lines.put(b"")

            threading.Thread(target=pump, name="policy-pack-stdout", daemon=True).start()
        except BaseException:
            self.close()
            raise

    def connect(self) -> None:
        """Wait for the launched pack's port and open a channel to it."""
        if self._process is None:
            self.launch()
        try:
            self.port = self._read_port()
            self.timings["port_printed"] = time.perf_counter() - self._started
            self._channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=GRPC_OPTIONS)
            grpc.channel_ready_future(self._channel).result(timeout=self.startup_timeout)
            self.timings["channel_ready"] = time.perf_counter() - self._started
            self._stub = analyzer_pb2_grpc.AnalyzerStub(self._channel)
        except BaseException:
            self.close()
            raise

    def _read_port(self) -> int:
        assert self._process is not None and self._lines is not None
        try:
            first = self._lines.get(timeout=self.startup_timeout)
        except queue.Empty:
            raise PolicyPackError(
                f"policy pack at {self.pack_dir} printed no port within {self.startup_timeout:.0f}s{self._stderr_tail()}"
            ) from None
        text = first.decode(errors="replace").strip()
        if not text.isdigit():
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            raise PolicyPackError(
                f"policy pack at {self.pack_dir} did not start (exit code {self._process.returncode}, first line "
                f"{text!r}){self._stderr_tail()}"
            )
        return int(text)

    def _stderr_tail(self) -> str:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace")[-4000:].strip()
        return f"; stderr:\n{tail}" if tail else ""

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        process, self._process = self._process, None
        if process is not None:
            try:
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(timeout=5)
            finally:
                if process.stdout is not None:
                    process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._stub = None

    @property
    def pid(self) -> int | None:
        """The pack process id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def stub(self) -> analyzer_pb2_grpc.AnalyzerStub:
        if self._stub is None:
            raise PolicyPackError("the policy pack is not running; use PolicyPackRunner as a context manager")
        return self._stub

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self.stub, method)(request, timeout=self.call_timeout)
        except grpc.RpcError as error:
            raise _call_failed(method, error) from error

    # the Analyzer protocol

    def info(self) -> PackInfo:
        if self._info is None:
            reply = self._call("GetAnalyzerInfo", empty_pb2.Empty())
            policies = {}
            for p in reply.policies:
                policies[p.name] = PolicyInfo(
                    name=p.name,
                    description=p.description,
                    enforcement_level=LEVEL_NAMES[p.enforcementLevel],
                    kind="stack" if p.policy_type == analyzer_pb2.POLICY_TYPE_STACK else "resource",
                    config_schema=json_format.MessageToDict(p.configSchema.properties),
                    required=tuple(p.configSchema.required),
                )
            initial = {
                k: {"enforcementLevel": LEVEL_NAMES[v.enforcementLevel], **json_format.MessageToDict(v.properties)}
                for k, v in reply.initialConfig.items()
            }
            # Like the CLI, PulumiPolicy.yaml's version wins over the one the pack reports.
            version = str(pack_project(self.pack_dir).get("version") or reply.version)
            self._info = PackInfo(reply.name, version, policies, initial)
        return self._info

    def configure(self, config: str | os.PathLike[str] | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send a policy-pack config (file path or parsed JSON); returns the effective config per policy."""
        raw, self.config_source = read_policy_config(config)
        reconciled = reconcile_policy_config(self.info(), raw, strict=self.strict)
        request = analyzer_pb2.ConfigureAnalyzerRequest()
        for name, (level, props) in reconciled.items():
            entry = request.policyConfig[name]
            entry.enforcementLevel = LEVELS[level]
            if props:
                entry.properties.update(props)
        self._call("Configure", request)
        return {name: {"enforcementLevel": level, **props} for name, (level, props) in reconciled.items()}

    def analyze(self, resource: Any, provider: Any = None) -> list[Violation]:
        """``Analyze`` one plan resource; ``provider`` is its provider's plan resource, if known."""
        r = resource_dict(resource)
        return self.violations_of(self.analyze_async(r, provider), r["urn"])

    def analyze_async(self, resource: Any, provider: Any = None, *, structs: Structs | None = None) -> grpc.Future:
        """Send ``Analyze`` for one plan resource without waiting; ``violations_of`` reads the answer."""
        request = analyze_request(resource_dict(resource), provider, structs if structs is not None else Structs())
        return self.stub.Analyze.future(request, timeout=self.call_timeout)

    def violations_of(self, future: grpc.Future, urn: str) -> list[Violation]:
        """Findings of an ``analyze_async`` (``urn`` its resource) or ``analyze_stack_async`` (``""``) call."""
        try:
            reply = future.result()
        except grpc.RpcError as error:
            raise _call_failed("Analyze" if urn else "AnalyzeStack", error) from error
        return [_violation(d, urn) for d in reply.diagnostics]

    def analyze_stack(
        self, resources: Iterable[Any], providers: Mapping[str, Any] | None = None, *, structs: Structs | None = None
    ) -> list[Violation]:
        return self.violations_of(self.analyze_stack_async(resources, providers, structs=structs), "")

    def analyze_stack_async(
        self, resources: Iterable[Any], providers: Mapping[str, Any] | None = None, *, structs: Structs | None = None
    ) -> grpc.Future:
        """Send ``AnalyzeStack`` without waiting; ``violations_of(future, "")`` reads the answer."""
        structs = structs if structs is not None else Structs()
        items = [resource_dict(r) for r in resources]
        # Each entry is filled in place in the request, its inputs marshalled straight into it (only
        # providers' are kept in ``structs``), so the request is the only copy of the inputs.
        request = analyzer_pb2.AnalyzeStackRequest()
        for r in items:
            fill_stack_resource(request.resources.add(), r, providers, structs)
        return self.stub.AnalyzeStack.future(request, timeout=self.call_timeout)

    def analyze_plan(self, resources: Iterable[Any], *, in_flight: int = 32) -> list[Violation]:
        """``Analyze`` every resource then ``AnalyzeStack`` once, providers resolved from the plan.

        Analyze calls are pipelined (up to ``in_flight`` unanswered), as the engine makes them
        concurrently; findings keep the resources' order.
        """
        items = [resource_dict(r) for r in resources]
        by_urn = {r["urn"]: r for r in items}
        structs = Structs()
        pending: collections.deque[tuple[str, grpc.Future]] = collections.deque()
        violations: list[Violation] = []
        for r in items:
            if len(pending) >= in_flight:
                urn, future = pending.popleft()
                violations += self.violations_of(future, urn)
            pending.append((r["urn"], self.analyze_async(r, by_urn.get(provider_urn(r)), structs=structs)))
        while pending:
            urn, future = pending.popleft()
            violations += self.violations_of(future, urn)
        return violations + self.analyze_stack(items, by_urn, structs=structs)


class Structs:
    """Inputs kept marshalled by URN for a run: a provider's (:meth:`of`), sent with every resource it
    provides. Any other resource's inputs are marshalled straight into its request (:meth:`into`)."""

    def __init__(self) -> None:
        self._by_urn: dict[str, struct_pb2.Struct] = {}

    def of(self, r: Mapping[str, Any]) -> struct_pb2.Struct:
        struct = self._by_urn.get(r["urn"])
        if struct is None:
            struct = self._by_urn[r["urn"]] = to_struct(r.get("inputs") or {})
        return struct

    def into(self, target: struct_pb2.Struct, r: Mapping[str, Any]) -> None:
        """``r``'s inputs marshalled into ``target`` (a field of a request): copied when kept here,
        else written straight into it, so no second Struct of them is made."""
        struct = self._by_urn.get(r["urn"])
        if struct is None:
            target.update(engine_value(dict(r.get("inputs") or {})))
        else:
            target.CopyFrom(struct)

    def __contains__(self, urn: object) -> bool:
        return urn in self._by_urn

    def __len__(self) -> int:
        return len(self._by_urn)



def _call_failed(method: str, error: grpc.RpcError) -> PolicyPackError:
    return PolicyPackError(f"{method} failed: {error.code().name}: {error.details()}")


def provider_urn(r: Mapping[str, Any]) -> str:
    """A provider reference is ``<provider urn>::<provider id>``."""
    ref = r.get("provider") or ""
    return ref.rsplit("::", 1)[0] if "::" in ref else ref


def _options(r: Mapping[str, Any]) -> analyzer_pb2.AnalyzerResourceOptions:
    options = analyzer_pb2.AnalyzerResourceOptions(parent=r.get("parent") or "")
    options.customTimeouts.SetInParent()
    return options


def _provider(provider: Any, structs: Structs) -> analyzer_pb2.AnalyzerProviderResource:
    p = resource_dict(provider)
    return analyzer_pb2.AnalyzerProviderResource(urn=p["urn"], type=p["type"], name=p.get("name", ""),
                                                 properties=structs.of(p))


def analyze_request(r: Mapping[str, Any], provider: Any, structs: Structs) -> analyzer_pb2.AnalyzeRequest:
    """The ``AnalyzeRequest`` the engine sends for plan resource ``r``."""
    request = analyzer_pb2.AnalyzeRequest(type=r["type"], urn=r["urn"], name=r.get("name", ""), options=_options(r))
    structs.into(request.properties, r)
    if provider is not None:
        request.provider.CopyFrom(_provider(provider, structs))
    return request


def stack_resource(r: Mapping[str, Any], providers: Mapping[str, Any] | None,
                   structs: Structs) -> analyzer_pb2.AnalyzerResource:
    """``r``'s entry of the ``AnalyzeStackRequest``."""
    return fill_stack_resource(analyzer_pb2.AnalyzerResource(), r, providers, structs)


def fill_stack_resource(resource: analyzer_pb2.AnalyzerResource, r: Mapping[str, Any],
                        providers: Mapping[str, Any] | None, structs: Structs) -> analyzer_pb2.AnalyzerResource:
    """Fill an empty ``AnalyzerResource`` (an entry added to a request) as ``r``'s entry."""
    resource.type, resource.urn, resource.name, resource.parent = (
        r["type"], r["urn"], r.get("name", ""), r.get("parent") or "")
    structs.into(resource.properties, r)
    resource.options.CopyFrom(_options(r))
    resource.dependencies.extend(r.get("dependencies") or ())
    provider = (providers or {}).get(provider_urn(r))
    if provider is not None:
        resource.provider.CopyFrom(_provider(provider, structs))
    for key, urns in (r.get("propertyDependencies") or {}).items():
        if urns:
            resource.propertyDependencies[key].urns.extend(urns)
    return resource


def _violation(diagnostic: Any, default_urn: str) -> Violation:
    return Violation(
        policy_name=diagnostic.policyName,
        enforcement_level=LEVEL_NAMES.get(diagnostic.enforcementLevel, "advisory"),
        message=diagnostic.message,
        description=diagnostic.description,
        urn=diagnostic.urn or default_urn,
    )


def run_pack(
    resources: Iterable[Any],
    config_path: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    pack_dir: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> PackReport:
    """Start the pack (``env`` added to its environment), configure it, analyze every resource and
    the stack, stop it."""
    with PolicyPackRunner(pack_dir, env=env) as pack:
        return analyze_with(pack, resources, config_path)


def analyze_with(pack: PolicyPackRunner, resources: Iterable[Any],
                 config: str | os.PathLike[str] | Mapping[str, Any] | None) -> PackReport:
    """Configure a started pack and analyze ``resources``: the report."""
    pack.configure(config)
    violations = pack.analyze_plan(resources)
    info = pack.info()
    return PackReport(pack=f"{info.name}@{info.version}", config=pack.config_source, violations=violations)
