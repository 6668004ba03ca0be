"""The check's faster pipeline reports exactly what the one-call-at-a-time pipeline reported.

The pack starts before the program records and is fed resources as they register (StreamingAnalysis),
Analyze calls are pipelined, and the pack converts each request once instead of once per policy
(policies/lib/request_cache.py). Each is compared here with the plain sequential protocol on plans that
produce findings, so the order and content of every finding is covered, not only "no violations".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from pulumi.runtime.proto import analyzer_pb2

from automation.offline.pack.runner import (
    PolicyConfigError,
    PolicyPackError,
    PolicyPackRunner,
    _analyze_request,
    _analyze_stack_request,
    _options,
    _provider,
    _provider_urn,
    engine_value,
    to_struct,
)
from automation.offline.plan import ROOT, PlannedResource
from automation.offline.pack.streaming import StreamingAnalysis

CONFIG_DIR = ROOT / "policies" / "config"


def _strict(stack: str) -> dict:
    """The stack's config with every policy mandatory and caps low enough to produce findings."""
    config = json.loads((CONFIG_DIR / f"{stack}.json").read_text())
    config["all"] = "mandatory"
    config["gpu-capacity-cap"] = {**config["gpu-capacity-cap"], "maxGpus": 1}
    config["gpu-monthly-budget"] = {**config["gpu-monthly-budget"], "monthlyBudgetUsd": 1}
    return config


def _broken(plan) -> list[PlannedResource]:
    """The plan with GPU groups untainted and workloads stripped of tolerations: findings per resource."""
    resources = []
    for r in plan.resources:
        inputs = r.inputs
        if r.type == "eks:index:ManagedNodeGroup" and inputs.get("taints"):
            inputs = {**inputs, "taints": []}
        if r.type == "kubernetes:apps/v1:Deployment":
            spec = json.loads(json.dumps(inputs))
            spec.get("spec", {}).get("template", {}).get("spec", {}).pop("tolerations", None)
            inputs = spec
        resources.append(PlannedResource(**{**r.__dict__, "inputs": inputs}))
    return resources


def _sequential(runner: PolicyPackRunner, resources) -> list:
    """The protocol as the CLI drives it: one Analyze at a time, in order, then AnalyzeStack."""
    by_urn = {r.urn: r for r in resources}
    violations = []
    for r in resources:
        violations += runner.analyze(r, by_urn.get(_provider_urn(r.__dict__)))
    return violations + runner.analyze_stack(resources, by_urn)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_streaming_and_pipelined_equal_sequential(stack, dev_plan, prod_plan):
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    resources = _broken(plan)
    in_order = sorted(resources, key=lambda r: r.urn)
    with PolicyPackRunner() as runner:
        runner.configure(_strict(stack))
        named = runner.analyzed_types
        expected = _sequential(runner, in_order)
        pipelined = runner.analyze_plan(in_order, in_flight=8)
    assert len({v.policy_name for v in expected}) >= 4, "the comparison needs findings of several policies"
    assert any(v.urn for v in expected) and any(not v.urn for v in expected)
    assert pipelined == expected
    with StreamingAnalysis(_strict(stack)) as streaming:
        half = len(resources) // 2
        for r in resources[:half]:  # registration order, not the report's order; the feeder marshals
            streaming.submit(r)
        for r in resources[half:-1]:  # with the Struct the recording would hand over
            streaming.submit(r, to_struct(engine_value(r.inputs)))
        # The last is left for finish() to hand over, as a resource the recording never submitted.
        report = streaming.finish(in_order)
    assert report.violations == expected
    assert report.pack.startswith("llm-platform-gpu@")
    # Analyze went only to the types the pack named; the sequential run sent every resource.
    assert streaming.analyze_calls == sum(r.type in named for r in resources) < len(resources) / 2


CUSTOM = "kubernetes:serving.example.com/v1:InferenceGroup"


def test_streaming_analyzes_the_custom_workload_kinds_the_config_adds(dev_plan):
    """A kind the config adds under customWorkloads is named by the pack, so the streamed check sends
    it to Analyze and reports its findings, as the one-call-at-a-time pipeline does."""
    group = PlannedResource(
        urn=f"urn:pulumi:dev::llm-platform::{CUSTOM}::group", type=CUSTOM, name="group", parent="", custom=True,
        inputs={"metadata": {"name": "group", "namespace": "serving"},
                "spec": {"groups": [{"name": "a", "template": {"spec": {"containers": [
                    {"name": "m", "image": "vllm/vllm-openai:latest", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}]}})
    resources = sorted([*dev_plan.resources, group], key=lambda r: r.urn)
    custom = {"customWorkloads": {CUSTOM: ["spec.groups[].template"]}}
    config = {**_strict("dev"), "gpu-workload-contract": custom, "container-image-pinned": custom}
    with PolicyPackRunner() as runner:
        runner.configure(config)
        expected = _sequential(runner, resources)
    assert {v.policy_name for v in expected if v.urn == group.urn} == {"gpu-workload-contract", "container-image-pinned"}
    with StreamingAnalysis(config) as streaming:
        for r in resources:
            streaming.submit(r)
        assert streaming.finish(resources).violations == expected


def test_a_pack_that_names_no_types_gets_every_resource(monkeypatch, dev_plan):
    """pulumi_policy's own loops answer Configure without naming types: every resource is analyzed."""
    monkeypatch.setenv("LLM_PLATFORM_PACK_SDK_LOOPS", "1")
    resources = sorted(_broken(dev_plan), key=lambda r: r.urn)
    with PolicyPackRunner() as runner:
        runner.configure(_strict("dev"))
        assert runner.analyzed_types is None
        expected = _sequential(runner, resources)
    with StreamingAnalysis(_strict("dev")) as streaming:
        for r in resources:
            streaming.submit(r)
        report = streaming.finish(resources)
    assert report.violations == expected and streaming.analyze_calls == len(resources)


def test_pack_without_request_cache_reports_the_same(tmp_path, dev_plan):
    """The pack as pulumi_policy serves it out of the box, against the pack with request_cache installed."""
    plain_pack = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", plain_pack, ignore=shutil.ignore_patterns("__pycache__"))
    main = plain_pack / "__main__.py"
    assert "request_cache.install()" in main.read_text()
    main.write_text(main.read_text().replace("request_cache.install()", ""))
    resources = sorted(_broken(dev_plan), key=lambda r: r.urn)
    reports = []
    for pack_dir in (ROOT / "policies", plain_pack):
        with PolicyPackRunner(pack_dir, python=sys.executable) as runner:
            runner.configure(_strict("dev"))
            reports.append(_sequential(runner, resources))
    assert reports[0] == reports[1] and len(reports[0]) >= 5


def test_streaming_raises_start_up_errors_at_finish_and_stops(tmp_path):
    (tmp_path / "__main__.py").write_text("raise SystemExit('broken pack')\n")
    with StreamingAnalysis(None, tmp_path) as streaming:
        streaming.submit({"urn": "urn:pulumi:s::p::t::n", "type": "t", "inputs": {}})
        with pytest.raises(PolicyPackError, match="broken pack"):
            streaming.finish([])


def _children_of(pid: int) -> set[int]:
    children = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listing:
            children |= {int(p) for p in listing.read().split()}
    return children


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie waiting for its parent counts as gone
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_streaming_raises_config_errors_at_finish_and_stops_the_pack(dev_plan):
    with StreamingAnalysis({"no-such-policy": "mandatory"}) as streaming:
        for r in dev_plan.resources[:5]:
            streaming.submit(r)
        with pytest.raises(PolicyConfigError, match="no-such-policy"):
            streaming.finish(dev_plan.resources[:5])
        feeder = streaming.pid
    assert streaming.pid is None and _gone(feeder)


def test_leaving_mid_run_stops_the_feeder_and_the_pack(dev_plan):
    """The check failed or was interrupted while the pack was at work: nothing is left running."""
    with StreamingAnalysis(CONFIG_DIR / "dev.json") as streaming:
        for r in dev_plan.resources:
            streaming.submit(r)
        feeder = streaming.pid
        deadline = time.monotonic() + 60
        while not _children_of(feeder):  # the feeder has started the pack
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (pack,) = _children_of(feeder)
    assert _gone(feeder) and _gone(pack)


def test_a_feeder_that_dies_is_a_pack_error(dev_plan):
    with StreamingAnalysis(CONFIG_DIR / "dev.json") as streaming:
        streaming.submit(dev_plan.resources[0])
        os.kill(streaming.pid, 9)
        with pytest.raises(PolicyPackError, match="stopped without a report"):
            streaming.finish(dev_plan.resources)


def _modules_after(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport json, sys, types\n"
                           "print(json.dumps([m for m, v in sys.modules.items() if type(v) is types.ModuleType]))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_cli_start_up_does_not_load_the_pack_client():
    """Verbs other than check (env, preview, ...) do not pay for gRPC stubs, jsonschema or the check."""
    loaded = _modules_after("from automation.cli import build_parser; build_parser()")
    assert not loaded & {"automation.offline.pack.runner", "automation.offline.check", "jsonschema", "orjson"}


def test_the_checks_process_leaves_the_pack_client_to_the_feeder():
    """The check's own process records and writes; the pack client (and its config validation) runs
    in the feeder."""
    loaded = _modules_after("import automation.offline.check")
    assert "automation.offline.check" in loaded
    assert not loaded & {"automation.offline.pack.runner", "jsonschema"}


def test_sdk_modules_follow_the_settings():
    """A stack that serves nothing never loads pulumi_random (model API keys and the gateway's master
    key are its only users); one that serves models does."""
    code = """
import copy, sys
from automation.offline.plan import record_plan
from automation.stacks import read_stack_config
from components.settings import config_strings, parse_settings
config = copy.deepcopy(read_stack_config("dev"))
config["llm-platform:serving"]["enabled"] = {enabled}
settings = parse_settings(config)
record_plan("dev", config_strings(config), region=settings.region)
"""
    assert "pulumi_random" not in _modules_after(code.format(enabled=False))
    assert "pulumi_random" in _modules_after(code.format(enabled=True))


def test_stack_request_is_written_as_the_message_would_be(prod_plan):
    """AnalyzeStack's request, serialized item by item, parses as the whole message, byte for byte
    (map entries may come in another order, so sizes are compared); each resource carries its
    inputs as the engine marshals them."""
    resources = sorted(prod_plan.resources, key=lambda r: r.urn)
    by_urn = {r.urn: {"urn": r.urn, "type": r.type, "inputs": r.inputs} for r in resources}
    raw = _analyze_stack_request(resources, by_urn, None)
    message = analyzer_pb2.AnalyzeStackRequest.FromString(raw)
    assert message.ByteSize() == len(raw)
    assert [item.urn for item in message.resources] == [r.urn for r in resources]
    for item, r in zip(message.resources, resources):
        assert item.properties == to_struct(r.inputs), r.urn
        assert item.provider.urn == _provider_urn({"provider": r.provider}) if r.provider else not item.HasField("provider")
    assert any(item.HasField("provider") for item in message.resources)


def test_stack_entries_are_those_of_the_message(prod_plan):
    """Each AnalyzeStack entry, its Analyze request followed by parent and dependencies, parses as
    the ``AnalyzerResource`` message built field by field and is as long: with and without a
    provider, parent, dependencies (an empty one included, which a repeated field still writes)
    and property dependencies (an empty list, which the engine leaves out, too)."""
    from automation.offline.pack.runner import _RESOURCES_TAG, _Structs, _stack_item, _varint

    resources = sorted(prod_plan.resources, key=lambda r: r.urn)
    by_urn = {r.urn: {"urn": r.urn, "type": r.type, "name": r.name, "inputs": r.inputs} for r in resources}
    plan_items = [{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "provider": r.provider,
                   "inputs": r.inputs, "dependencies": list(r.dependencies)} for r in resources]
    edge = [{"urn": "urn:pulumi:s::p::t::bare", "type": "t"},
            {"urn": "urn:pulumi:s::p::t::ünï", "type": "t", "name": "ünï" * 50, "parent": "urn:pulumi:s::p::c::p",
             "inputs": {"long": "x" * 300}, "dependencies": ["urn:a", "", "urn:ü" * 40],
             "propertyDependencies": {"spec": ["urn:a", "urn:b"], "none": [], "ü" * 70: ["urn:c" * 30]}}]
    assert sum(bool(r["dependencies"]) for r in plan_items) > 0
    structs = _Structs()
    for r in [*plan_items, *edge]:
        provider = by_urn.get(_provider_urn(r))
        message = analyzer_pb2.AnalyzerResource(
            urn=r["urn"], type=r["type"], name=r.get("name", ""), options=_options(r), parent=r.get("parent") or "",
            dependencies=r.get("dependencies") or [])
        message.properties.CopyFrom(to_struct(r.get("inputs") or {}))
        for key, urns in (r.get("propertyDependencies") or {}).items():
            if urns:
                message.propertyDependencies[key].urns.extend(urns)
        if provider is not None:
            message.provider.CopyFrom(_provider(provider))
        body = message.SerializeToString()
        for request in (None, _analyze_request(r, provider, structs)):  # made here, or the feeder's
            raw = _stack_item(r, by_urn, structs, request)
            assert raw.startswith(_RESOURCES_TAG + _varint(len(body))), r["urn"]
            item = analyzer_pb2.AnalyzerResource.FromString(raw[len(_RESOURCES_TAG + _varint(len(body))):])
            assert item == message and len(raw) == len(_RESOURCES_TAG + _varint(len(body))) + len(body), r["urn"]


def test_analyze_request_bytes_are_those_of_the_message(prod_plan):
    """Each Analyze request, put together from kept pieces, parses as the ``AnalyzeRequest`` message
    it stands for and is as long (map entries may come in another order): with and without a
    provider, parent, name or inputs."""
    resources = sorted(prod_plan.resources, key=lambda r: r.urn)
    by_urn = {r.urn: {"urn": r.urn, "type": r.type, "name": r.name, "inputs": r.inputs} for r in resources}
    edge = [{"urn": "urn:pulumi:s::p::t::bare", "type": "t"},
            {"urn": "urn:pulumi:s::p::t::ünï", "type": "t", "name": "ünï" * 50, "parent": "urn:pulumi:s::p::c::p",
             "inputs": {"long": "x" * 300}}]
    checked = 0
    for r in [*[{"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "provider": r.provider,
                 "inputs": r.inputs} for r in resources], *edge]:
        provider = by_urn.get(_provider_urn(r))
        message = analyzer_pb2.AnalyzeRequest(urn=r["urn"], type=r["type"], name=r.get("name", ""), options=_options(r))
        message.properties.CopyFrom(to_struct(r.get("inputs") or {}))
        if provider is not None:
            message.provider.CopyFrom(_provider(provider))
        raw = _analyze_request(r, provider)
        assert analyzer_pb2.AnalyzeRequest.FromString(raw) == message and len(raw) == message.ByteSize(), r["urn"]
        checked += provider is not None
    assert checked > 0


def test_the_pack_works_at_a_lower_priority_than_the_program(dev_plan):
    """The feeder, and the pack it starts, yield the processor to the recording."""
    from automation.offline.pack.feeder import NICENESS

    with StreamingAnalysis(CONFIG_DIR / "dev.json") as streaming:
        deadline = time.monotonic() + 60
        while not _children_of(streaming.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (pack,) = _children_of(streaming.pid)
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, streaming.pid) == os.getpriority(os.PRIO_PROCESS, pack) == \
            min(mine + NICENESS, 19)
        report = streaming.finish(dev_plan.resources)
    assert report.pack.startswith("llm-platform-gpu@")


@pytest.mark.parametrize("after", [0.05, 0.2, 0.35, 0.5, 0.7, 1.0])
def test_stopping_at_any_moment_leaves_no_pack_behind(dev_plan, after):
    """The check may stop while the feeder reads frames, starts the pack, waits for answers or is
    already stopping: in each case the feeder stops the pack before it goes (a stop raised in the
    middle of starting or stopping the pack used to leave the pack running on its own)."""
    before = _orphan_packs()
    streaming = StreamingAnalysis(CONFIG_DIR / "dev.json")
    try:
        for r in dev_plan.resources:
            streaming.submit(r)
        time.sleep(after)
        feeder = streaming.pid
        children = _children_of(feeder)
    finally:
        streaming.close()
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in children | {feeder}) or _orphan_packs() - before:
        assert time.monotonic() < deadline, f"left running: {_orphan_packs() - before or children}"
        time.sleep(0.05)


def _orphan_packs() -> set[int]:
    """Pack processes whose parent is gone (adopted by init)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if b"policies/__main__.py" not in cmdline.read():
                    continue
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == "1" and fields[0] != "Z":
            found.add(int(entry))
    return found


def test_a_pack_ends_with_the_process_that_started_it(tmp_path):
    """Killed outright (SIGKILL), the process that started a pack cannot stop it; the kernel does."""
    starter = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from automation.offline.pack.runner import PolicyPackRunner\n"
         "runner = PolicyPackRunner(); runner.start(); print(runner.pid, flush=True); time.sleep(600)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        pack = int(starter.stdout.readline())
        assert not _gone(pack)
        with open(f"/proc/{pack}/cmdline", "rb") as cmdline:
            assert cmdline.read().split(b"\0")[1:3] == [b"-u", str(ROOT / "policies" / "__main__.py").encode()]
    finally:
        starter.kill()
        starter.wait()
    deadline = time.monotonic() + 10
    while not _gone(pack):
        assert time.monotonic() < deadline, "the pack outlived its starter"
        time.sleep(0.05)


def test_frames_are_read_whole_however_the_pipe_splits_them():
    """The feeder takes frames as reads deliver them: a frame split over reads, or many in one
    read, arrives whole and in order, and nothing after ``end`` is taken."""
    import pickle
    import random

    from automation.offline.frames import HEADER, FrameReader

    sent = [("start", {"a": 1}, None)] + [("resource", {"urn": f"u{i}", "x": "y" * i}, bytes(i)) for i in range(200)] \
        + [("end", ["u1"]), ("resource", {"urn": "after end"}, None)]
    stream = b"".join(HEADER.pack(len(p)) + p for p in (pickle.dumps(m) for m in sent))
    rng = random.Random(5)
    for _ in range(50):
        got: list = []
        frames = FrameReader(lambda kind, fields: got.append((kind, *fields)))
        position, more = 0, True
        while more and position < len(stream):
            step = rng.choice([1, 2, 3, 7, 64, 4096, len(stream)])
            more = frames.feed(stream[position:position + step])
            position += step
        assert got == sent[:-1] and not more


def test_a_frame_of_an_unknown_kind_ends_the_run_with_an_error():
    import asyncio
    import pickle

    from automation.offline.frames import HEADER
    from automation.offline.pack.feeder import _serve

    read, write = os.pipe()
    payload = pickle.dumps(("nonsense",))
    os.write(write, HEADER.pack(len(payload)) + payload)
    os.close(write)
    try:
        with pytest.raises(ValueError, match="unknown frame 'nonsense'"):
            asyncio.run(_serve(read))
    finally:
        os.close(read)
