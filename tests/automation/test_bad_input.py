"""Malformed settings for every key, through the two doors a user has: ``check`` with a stack file and
``env create --set``. Each must exit 2 naming the key, with no traceback and no secret echoed.

The cases are generated from the settings models themselves (every field of every model, found at
its place in the dev or prod stack file): a wrong type, a value out of range, terminal markup, an
infinite or NaN number, then the cross-field, secret and file-level cases the issue found by hand.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from pydantic import BaseModel, SecretStr

from automation import exit_codes
from automation.cli import main
from automation.offline.plan import ROOT
from automation.stacks import read_stack_config
from components.settings import Settings
from tests.automation.conftest import Rig
from tests.support.config_changes import with_changes

CANARY = "hf_CANARYsecret0123456789"
MARKUP = "[/x][bold]boom[/bold]"
BASES = {"dev": read_stack_config("dev"), "prod": read_stack_config("prod")}


# --- generation -----------------------------------------------------------------------------------------

def _inner(annotation: Any) -> tuple[str, Any]:
    """('model'|'list'|'dict'|'scalar', inner type) of a field annotation, Optional unwrapped."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _inner(args[0]) if len(args) == 1 else ("scalar", annotation)
    if origin is list:
        return "list", typing.get_args(annotation)[0]
    if origin is dict:
        return "dict", typing.get_args(annotation)[1]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model", annotation
    return "scalar", annotation


def fields(model: type[BaseModel], node: Any, path: tuple) -> Iterator[tuple[tuple, Any, Any]]:
    """(path, field info, current value) of every field of ``model`` present or settable in ``node``."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        if not isinstance(node, dict):
            return
        yield path + (key,), info, node.get(key)
        kind, inner = _inner(info.annotation)
        value = node.get(key)
        if kind == "model":
            # an absent block is reached too: its leaves are set on an empty mapping
            yield from fields(inner, value if isinstance(value, dict) else {}, path + (key,))
        elif kind == "list" and isinstance(value, list):
            sub_kind, sub = _inner(inner)
            if sub_kind == "model":
                for i, item in enumerate(value):
                    yield from fields(sub, item, path + (key, i))


#: Every bounded numeric key's documented range (lowest, highest accepted; None: unbounded), as numbers:
#: the out-of-range cases are built from these, so moving a bound in the code fails a case here instead of
#: moving the case with it. A ``gt`` bound is listed as its excluded edge (0 for "above 0").
RANGES: dict[tuple[str, ...], tuple[float | None, float | None]] = {
    ('gpuBudget', 'maxGpus'): (0, 100_000),
    ('gpuBudget', 'monthlyBudgetUsd'): (0, 1_000_000_000),
    ('gpuHoursMonthlyBudget',): (1, 10_000_000),
    ('gpuPools', 'diskSizeGib'): (50, 4000),
    ('gpuPools', 'reservation', 'instanceCount'): (1, 1000),
    ('gpuPools', 'scaling', 'desiredSize'): (0, 1000),
    ('gpuPools', 'scaling', 'maxSize'): (1, 1000),
    ('gpuPools', 'scaling', 'minSize'): (0, 1000),
    ('karpenter', 'nodeClasses', 'kubelet', 'imageGcHighThresholdPercent'): (1, 100),
    ('karpenter', 'nodeClasses', 'kubelet', 'imageGcLowThresholdPercent'): (0, 99),
    ('karpenter', 'nodeClasses', 'kubelet', 'maxPods'): (1, 737),
    ('karpenter', 'nodeClasses', 'rootVolume', 'iops'): (3000, 16_000),
    ('karpenter', 'nodeClasses', 'rootVolume', 'sizeGib'): (20, 16_384),
    ('karpenter', 'nodeClasses', 'rootVolume', 'throughputMibps'): (125, 1000),
    ('karpenter', 'nodePools', 'gpuLimit'): (1, 10_000),
    ('karpenter', 'nodePools', 'weight'): (1, 100),
    ('karpenter', 'replicas'): (1, 5),
    ('kmsDeletionWindowDays',): (7, 30),
    ('network', 'azCount'): (2, 6),
    ('observability', 'prometheus', 'replicas'): (1, 5),
    ('observability', 'prometheus', 'retentionDays'): (1, 400),
    ('observability', 'prometheus', 'volumeSizeGib'): (10, 16_384),
    ('serving', 'gateway', 'numRetries'): (0, 5),
    ('serving', 'gateway', 'replicas'): (1, 20),
    ('serving', 'gateway', 'timeoutSeconds'): (5, 600),
    ('serving', 'tiers', 'models', 'architecture', 'attentionHeads'): (1, 4096),
    ('serving', 'tiers', 'models', 'architecture', 'headDim'): (1, 1024),
    ('serving', 'tiers', 'models', 'architecture', 'hiddenSize'): (1, None),
    ('serving', 'tiers', 'models', 'architecture', 'kvHeads'): (1, 1024),
    ('serving', 'tiers', 'models', 'architecture', 'layers'): (1, 1000),
    ('serving', 'tiers', 'models', 'architecture', 'maxPositionEmbeddings'): (1, None),
    ('serving', 'tiers', 'models', 'architecture', 'mlaKvDim'): (1, 65536),
    ('serving', 'tiers', 'models', 'architecture', 'parameters'): (1_000_000, 10_000_000_000_000),
    ('serving', 'tiers', 'models', 'architecture', 'unquantizedParameters'): (0, None),
    ('serving', 'tiers', 'models', 'architecture', 'vocabSize'): (1, None),
    ('serving', 'tiers', 'models', 'cacheSizeGib'): (10, 4000),
    ('serving', 'tiers', 'models', 'gpuMemoryUtilization'): (0.5, 0.98),
    ('serving', 'tiers', 'models', 'gpusPerReplica'): (1, 8),
    ('serving', 'tiers', 'models', 'maxModelLen'): (256, 1_048_576),
    ('serving', 'tiers', 'models', 'nodesPerReplica'): (1, 16),
    ('serving', 'tiers', 'models', 'replicas', 'max'): (1, 100),
    ('serving', 'tiers', 'models', 'replicas', 'min'): (0, 100),
    ('serving', 'tiers', 'models', 'streaming', 'concurrency'): (1, 64),
    ('serving', 'tiers', 'models', 'streaming', 'memoryLimitGib'): (1, 64),
    ('serving', 'tiers', 'coldStartBudgetSeconds'): (30, 7200),
    ('serving', 'tiers', 'priority'): (0, 1_000_000_000),
    ('serving', 'tiers', 'quota', 'gpus'): (0, 10_000),
    ('serving', 'tiers', 'scaling', 'activationRequests'): (0, 10_000),
    ('serving', 'tiers', 'scaling', 'cooldownSeconds'): (30, 86_400),
    ('serving', 'tiers', 'scaling', 'gatewayRequestsPerSecond'): (0, 100_000),
    ('serving', 'tiers', 'scaling', 'kvCacheUsage'): (0, 1),
    ('serving', 'tiers', 'scaling', 'pollingSeconds'): (5, 300),
    ('serving', 'tiers', 'scaling', 'servingWindowSeconds'): (60, 86_400),
    ('serving', 'tiers', 'scaling', 'ttftP95Seconds'): (0, 600),
    ('serving', 'tiers', 'scaling', 'waitingRequests'): (0, 10_000),
    ('systemPool', 'diskSizeGib'): (20, 1000),
    ('systemPool', 'scaling', 'desiredSize'): (0, 1000),
    ('systemPool', 'scaling', 'maxSize'): (1, 1000),
    ('systemPool', 'scaling', 'minSize'): (0, 1000),
}


def _code_bounds(info) -> tuple[float | None, float | None]:
    """The bounds a field declares (only to check RANGES against; cases never use them)."""
    low = high = None
    for meta in info.metadata:
        if isinstance(meta, annotated_types.Ge):
            low = meta.ge
        elif isinstance(meta, annotated_types.Gt):
            low = meta.gt
        elif isinstance(meta, annotated_types.Le):
            high = meta.le
        elif isinstance(meta, annotated_types.Lt):
            high = meta.lt
    return low, high


def mutations(info, value: Any, key: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """Bad values for one field (``key``: its path without list indices): wrong type, out of range, markup,
    inf/NaN."""
    kind, inner = _inner(info.annotation)
    if kind in ("model", "dict"):
        yield "type", 17
        yield "markup", MARKUP
        return
    if kind == "list":
        yield "type", {"not": "a list"}
        sub_kind, sub = _inner(inner)
        if sub_kind == "scalar" and sub in (str,) or typing.get_origin(sub) is typing.Literal:
            yield "markup", [MARKUP]
        return
    annotation = inner
    if annotation is bool:
        yield "type", "maybe"
    elif annotation in (int, float):
        yield "type", "many"
        low, high = RANGES.get(key, (None, None))
        if low is not None:
            yield "below-range", low - 1
        if high is not None:
            yield "above-range", high + 1 if annotation is int else high * 2 + 1
        if annotation is float:
            yield "infinite", math.inf
            yield "nan", math.nan
    elif annotation is SecretStr:
        yield "type", ["x"]
        yield "secret-malformed", f"has space {CANARY}"
    else:  # str or Literal
        yield "type", {"bad": [1]}
        yield "markup", MARKUP


def cases() -> Iterator[tuple[str, str, tuple, Any]]:
    """(id, base stack, key path, bad value) for every field of every settings model."""
    seen: set[tuple] = set()
    for stack, config in BASES.items():
        raw = {k.removeprefix("llm-platform:"): v for k, v in config.items()}
        for path, info, current in fields(Settings, raw, ()):
            if _parent(raw, path) is None:
                continue
            for kind, bad in mutations(info, current, tuple(p for p in path if not isinstance(p, int))):
                ident = (tuple(p for p in path if not isinstance(p, int)), kind)
                if ident in seen:
                    continue
                seen.add(ident)
                yield f"{stack}:{_key(path)}:{kind}", stack, path, bad


def _parent(raw: dict, path: tuple) -> Any:
    """The mapping that holds ``path``'s last key (absent mappings count as empty), or None."""
    node: Any = raw
    for part in path[:-1]:
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return None
            node = node[part]
        elif isinstance(node, dict):
            node = node.get(part, {})
        else:
            return None
    return node if isinstance(node, dict) else None


def _key(path: tuple) -> str:
    out = str(path[0])
    for part in path[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _named(stack: str, path: tuple) -> str:
    """``serving.tiers[0].models[1]...`` as ``serving.tiers[interactive].models[name]...``."""
    node: Any = BASES[stack].get(f"llm-platform:{path[0]}")
    out = str(path[0])
    for part in path[1:]:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            out += f"[{name if isinstance(name, str) else part}]"
            node = item
        else:
            out += f".{part}"
            node = node.get(part) if isinstance(node, dict) else None
    return out


def with_value(stack: str, path: tuple, value: Any) -> dict[str, Any]:
    config = copy.deepcopy(BASES[stack])
    node: Any = config
    parts = (f"llm-platform:{path[0]}",) + tuple(path[1:])
    for part in parts[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    node[parts[-1]] = value
    return config


CASES = list(cases())


# --- the two doors ----------------------------------------------------------------------------------------

def run_check(capsys, tmp_path: Path, stack: str, config: dict[str, Any] | None = None, text: bytes | None = None):
    stack_file = tmp_path / f"Pulumi.{stack}.yaml"
    stack_file.write_bytes(text if text is not None else yaml.safe_dump({"config": config}, allow_unicode=True).encode())
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["check", "--stack", stack, "--stack-file", str(stack_file), "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err, out


def judge(code: int, output: str, key: str, out: Path | None = None, named: str | None = None) -> str | None:
    """Why an outcome is wrong, or None: exit 2, a problem line naming the key (by index, or ``named``
    with tiers and models by name, as rules between keys report them), no traceback, no secret."""
    if "Traceback" in output:
        return "traceback"
    if CANARY in output:
        return "secret echoed"
    if code != exit_codes.USAGE:
        return f"exit {code}"
    if out is not None and out.exists():
        return "output written for a rejected stack"
    lines = [line.strip().removeprefix("error: ") for line in output.splitlines()]
    keys = (key,) if named is None else (key, named)
    if not any(line.startswith(f"llm-platform:{k}") for line in lines for k in keys):
        return f"key not named: {output.strip()[-300:]}"
    if any(len(line) > 2000 for line in lines):
        return "a problem line dumps a whole block"
    return None


def test_generated_cases_cover_every_settings_key():
    """Every field of every settings model is reached (in dev or prod), so a new key gets cases too."""
    reached = {tuple(p for p in path if not isinstance(p, int)) for _, _, path, _ in CASES}
    for must in [("region",), ("gpuPools", "scaling", "maxSize"), ("serving", "tiers", "scaling", "kvCacheUsage"),
                 ("karpenter", "nodePools", "budgets", "schedule"), ("huggingFaceToken",),
                 ("observability", "alerting", "receivers", "pagerDuty", "routingKey"), ("tags",)]:
        assert must in reached, must
    assert len(CASES) > 250, len(CASES)


def test_the_ranges_are_the_bounds_every_numeric_key_declares():
    """RANGES lists each bounded key once, with the bounds the models declare: a new bounded key, or a
    bound moved either way, fails here (the out-of-range cases below catch a bound moved outward too)."""
    declared = {}
    for config in BASES.values():
        raw = {k.removeprefix("llm-platform:"): v for k, v in config.items()}
        for path, info, _ in fields(Settings, raw, ()):
            low, high = _code_bounds(info)
            if low is not None or high is not None:
                declared[tuple(p for p in path if not isinstance(p, int))] = (low, high)
    assert declared == RANGES


def test_every_generated_case_is_refused_by_check(capsys, tmp_path):
    wrong = {}
    for ident, stack, path, bad in CASES:
        config = with_value(stack, path, bad)
        if path == ("huggingFaceToken",) or "secret" in ident:
            config["llm-platform:huggingFaceToken"] = config.get("llm-platform:huggingFaceToken", CANARY)
        code, output, out = run_check(capsys, tmp_path, stack, config)
        reason = judge(code, output, _key(path), out, _named(stack, path))
        if reason:
            wrong[ident] = reason
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_every_generated_case_is_refused_by_env_create(rig: Rig):
    wrong = {}
    for ident, stack, path, bad in CASES:
        if path in {("environment",), ("huggingFaceToken",)} or "receivers" in path:
            continue  # environment is NAME; secrets are refused by --set itself (below)
        value = yaml.safe_dump(bad, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
        result = rig.run("env", "create", "fuzz", "--from", stack, "--set", f"{_key(path)}={value}")
        reason = judge(result.code, result.out + result.err, _key(path), named=_named(stack, path))
        if reason:
            wrong[ident] = reason
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())
    assert rig.calls.entries() == [], "nothing reached the Pulumi CLI"


# --- cross-field, secrets, files: the shapes the review found ------------------------------------------------

TIER = "serving.tiers[interactive]"
MODEL = f"{TIER}.models[llama-3-1-8b-instruct]"
CROSS_FIELD = {
    # id: (stack, {path: value}, key named)
    "cpu-quota-below-models": ("dev", {"serving.tiers.0.quota.cpu": "2"}, f"{TIER}.quota.cpu"),
    "memory-quota-below-models": ("dev", {"serving.tiers.0.quota.memory": "8Gi"}, f"{TIER}.quota.memory"),
    "model-cpu-above-any-instance": ("dev", {"serving.tiers.0.models.0.cpu": "500"}, f"{MODEL}.cpu"),
    "model-memory-above-any-instance": ("dev", {"serving.tiers.0.models.0.memory": "4000Gi"}, f"{MODEL}.memory"),
    "pool-max-below-gpus-needed": ("dev", {"gpuPools.0.scaling.maxSize": 1}, f"{MODEL}.replicas.max"),
    "managed-and-karpenter-same-name": ("dev", {"gpuPools.0.name": "gpu-inference"}, "karpenter.nodePools[0].name"),
    "infinite-scaling-threshold": ("dev", {"serving.tiers.0.scaling.waitingRequests": math.inf},
                                   "serving.tiers[0].scaling.waitingRequests"),
    "desired-above-max": ("dev", {"systemPool.scaling.desiredSize": 9}, "systemPool.scaling.desiredSize"),
    "hybrid-overlaps-vpc": ("dev", {"hybridNodes": {"remotePodNetworks": ["10.40.8.0/24"]}},
                            "hybridNodes.remotePodNetworks[0]"),
    "cron-out-of-range": ("dev", {"karpenter.nodePools.0.budgets.0.schedule": "0 25 * * *"},
                          "karpenter.nodePools[0].budgets[0].schedule"),
    "duration-overflow": ("dev", {"karpenter.nodePools.0.consolidation.after": "99999999999h"},
                          "karpenter.nodePools[0].consolidation.after"),
    "duration-garbage": ("dev", {"karpenter.nodePools.0.expireAfter": "forever"}, "karpenter.nodePools[0].expireAfter"),
    "unknown-instance-type": ("dev", {"gpuPools.0.instanceTypes": ["g9.huge"]}, "gpuPools[0].instanceTypes"),
    "tier-name-not-dns": ("dev", {"serving.tiers.0.name": "Inter_Active"}, "serving.tiers[0].name"),
    "repeated-tier-priority": ("dev", {"serving.tiers.1.priority": 100000}, "serving.tiers[1].priority"),
    "route-to-unknown-tier": ("prod", {"observability.alerting.routes.0.tiers": ["vip"]},
                              "observability.alerting.routes[0].tiers"),
    "tag-value-markup": ("dev", {"tags": {"team": MARKUP}}, "tags.team"),
    "production-open-endpoint": ("prod", {"endpoint": {"publicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}},
                                 "endpoint.publicAccessCidrs"),
}


def _apply(stack: str, changes: dict[str, Any]) -> dict[str, Any]:
    return with_changes(BASES[stack], changes, separator=".")


@pytest.mark.parametrize("case", sorted(CROSS_FIELD))
def test_cross_field_rules_name_the_key_to_edit(case, capsys, tmp_path):
    stack, changes, key = CROSS_FIELD[case]
    code, output, out = run_check(capsys, tmp_path, stack, _apply(stack, changes))
    assert judge(code, output, key, out) is None, output
    assert "llm-platform: got" not in output, "no problem at the root key with the whole configuration"


def test_field_and_cross_field_problems_come_in_one_round(capsys, tmp_path):
    config = _apply("dev", {"region": "nowhere", "gpuPools.0.name": "gpu-inference"})
    code, output, _ = run_check(capsys, tmp_path, "dev", config)
    assert code == exit_codes.USAGE
    assert "llm-platform:region: got" in output and "llm-platform:karpenter.nodePools[0].name: got" in output, output


def test_a_secret_is_never_echoed_whatever_else_is_wrong(capsys, tmp_path):
    for token in (CANARY, f"{CANARY} with spaces", {"secure": f"v1:{CANARY}"}):
        config = _apply("prod", {"region": "nowhere", "huggingFaceToken": token})
        config["llm-platform:observability"]["alerting"]["receivers"] += [
            {"name": "pager", "pagerDuty": {"routingKey": f"bad {CANARY}"}},
            {"name": "chat", "slack": {"apiUrl": f"http://{CANARY}", "channel": MARKUP}},
            {"name": "hook", "webhook": {"url": {"secure": f"v1:{CANARY}"}}},
        ]
        code, output, _ = run_check(capsys, tmp_path, "prod", config)
        assert code == exit_codes.USAGE and CANARY not in output, output
        assert "llm-platform:region" in output


def test_secure_token_accepted_and_plain_token_warned_never_shown(tmp_path):
    """In a real process (the program's warning goes through pulumi.log as under the engine)."""
    source = {"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}
    for token, warned in (({"secure": "v1:AAAABBBBCCCC"}, False), (CANARY, True)):
        config = _apply("dev", {"serving.tiers.0.models.0.source": source, "huggingFaceToken": token})
        stack_file, out = tmp_path / "Pulumi.dev.yaml", tmp_path / f"out-{warned}"
        stack_file.write_text(yaml.safe_dump({"config": config}))
        done = subprocess.run([sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file",
                               str(stack_file), "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        code, output = done.returncode, done.stdout + done.stderr
        assert code == exit_codes.OK, output[-2000:]
        assert ("warning: llm-platform:huggingFaceToken is stored in plain text" in output) == warned, output[:500]
        written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
        assert "plan.json" in {p.name for p in out.iterdir()}
        assert CANARY not in output and CANARY not in written, "the token stays out of every output and file"


def test_env_create_refuses_secrets_on_the_command_line_without_echoing(rig: Rig):
    for key in ("huggingFaceToken", "observability.alerting.receivers[0].slack.apiUrl"):
        result = rig.run("env", "create", "fuzz", "--from", "dev", "--set", f"{key}={CANARY}")
        assert result.code == exit_codes.USAGE and key in result.err and CANARY not in result.out + result.err
    assert rig.calls.entries() == []


FILES = {
    "not-utf8": (b"config:\n  llm-platform:region: \xff\xfe\n", "line 2 is not UTF-8"),
    "duplicate-key": (b"config:\n  llm-platform:production: false\n  llm-platform:production: true\n",
                      "duplicate key 'llm-platform:production'"),
    "not-yaml": (b"config: [\n", "is not valid YAML"),
    "no-config": (b"encryptionsalt: x\n", "has no 'config:' mapping"),
    "markup-in-key": (f"config:\n  llm-platform:{MARKUP}: 1\n".encode(), "llm-platform:[/x][bold]boom[/bold]"),
}


@pytest.mark.parametrize("case", sorted(FILES))
def test_bad_stack_files_are_one_line_errors(case, tmp_path):
    """In a real process: the file-level failures used to end in a traceback."""
    text, message = FILES[case]
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_bytes(text)
    done = subprocess.run([sys.executable, "-m", "automation", "check", "--stack", "dev", "--stack-file",
                           str(stack_file), "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == exit_codes.USAGE, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("argv", [
    ["env", "create", "x", "--from", "dev", "--ttl", "9999999999d"],
    ["env", "create", MARKUP, "--from", "dev"],
    ["env", "create", "ok", "--from", "dev", "--set", f"gpuPools[0].name={MARKUP}"],
    ["env", "create", "ok", "--from", "dev", "--set", f"{MARKUP}=1"],
    ["env", "create", "ok", "--from", "dev", "--set", "gpuPools[0].scaling={minSize: 0, minSize: 1}"],
    ["env", "create", "ok", "--from", MARKUP],
    ["env", "create", "ok", "--from", "../../etc/passwd"],
    ["check", "--stack", MARKUP],
    ["check", "--stack", ""],
    ["preview", "--stack", "-x"],
    ["verify", "--stack", "a b"],
    ["unlock", "--stack", MARKUP],
    ["up", "--stack", "dev", "--secrets-provider", ""],
    ["up", "--stack", "dev", "--secrets-provider", "awskms://"],
    ["env", "create", "ok", "--from", "dev", "--owner", ""],
    ["env", "create", "ok", "--from", "dev", "--via", "operator", "--namespace", MARKUP],
    ["env", "create", "ok", "--from", "dev", "--via", "operator", "--git-auth-secret", "Bad_Name"],
    ["destroy", "--stack", "dev", "--kubectl", ""],
])
def test_hostile_flags_exit_2_with_one_line(argv, rig: Rig):
    result = rig.run(*argv)
    assert result.code == exit_codes.USAGE, result.err
    assert "Traceback" not in result.err and result.err.startswith("error:"), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    bad_name = argv[:2] == ["env", "create"] and argv[2] not in ("ok", "x")
    flag = "environment name" if bad_name else argv[-2]
    assert flag in result.err, result.err
    assert rig.calls.entries() == [], "nothing reached the Pulumi CLI"


def test_unset_of_a_key_never_set_is_refused():
    from automation.driver.environments import EnvRequestError, combine_overrides

    assert combine_overrides(["region=us-west-2"], [], ["region"]) == []
    with pytest.raises(EnvRequestError, match="--unset 'regoin': no stored --set override"):
        combine_overrides(["region=us-west-2"], [], ["regoin"])
