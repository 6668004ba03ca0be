"""The recording: the real program on the SDK's public mock runtime records the plan it should, every
recording stands alone, and nothing reaches into the SDK's private names.

``recorded/`` holds the dev, prod and 100-model plans in canonical form (``plan_canon``: resources
sorted by URN, each resource's dependencies sorted; the engine treats both as sets). They were first
stored from the check's previous recorder (its own eager event loop and SDK shortcuts, since
removed), and the new recording equalled them field for field (type, name, parent, custom, inputs,
provider, dependencies) before that recorder was deleted; the one difference the SDK's runtime makes
is the order resources register in, which the canonical form leaves out. Since then they are the
reviewed plans of the program as it is: a change meant to change a plan records them again
(``python -m tests.automation.offline.plan_canon``) and the diff shows what changed.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from automation.offline.plan import ROOT, Plan, record_plan
from automation.stacks import read_stack_config
from components.settings import config_strings
from tests.automation.offline import plan_canon
from tests.conftest import plan_with
from tests.support.python_source import parse

RECORDED = Path(__file__).parent / "recorded"
#: The Pulumi property protocol's markers (pulumi/pulumi sdk/go/common/resource/sig/sig.go).
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def _stored(stack: str) -> tuple[dict, list[dict]]:
    header, *resources = [json.loads(line) for line in (RECORDED / f"{stack}.jsonl").read_text().splitlines()]
    return header, resources


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_plan_equals_the_previous_recordings(stack, stack_plan, dev_plan, prod_plan):
    plan = {"dev": dev_plan, "prod": prod_plan}[stack]
    header, resources = _stored(stack)
    content = plan.to_json()
    new = plan_canon.redacted(plan_canon.canonical(content))["resources"]
    assert len(new) == len(resources) == {"dev": 185, "prod": 237}[stack]
    for ours, theirs in zip(new, resources):
        assert ours == theirs, ours["urn"]
    # The stored resources hide secret values; the digest covers them too.
    assert plan_canon.digest(content) == header["digest"]


def test_the_100_model_plan_equals_the_previous_recording():
    """A generated 100-model stack (``recorded/Pulumi.bench100.yaml``, as benchmarks/generated_stack.py
    wrote it then), its plan stored as its digest and its count per type (the whole plan is 2.6 MB)."""
    config = read_stack_config("bench100", path=RECORDED / "Pulumi.bench100.yaml")
    plan = record_plan("bench100", config_strings(config), region="us-east-1")
    expected = json.loads((RECORDED / "bench100.json").read_text())
    summary = plan_canon.summary(plan.to_json())
    assert summary["resources"] == expected["resources"] == 1110
    assert summary["types"] == expected["types"]
    assert summary["digest"] == expected["digest"]


def test_recorded_plans_are_sorted_by_urn_with_sorted_dependencies(dev_plan):
    urns = [r.urn for r in dev_plan.resources]
    assert urns == sorted(urns) and len(set(urns)) == len(urns)
    assert all(r.dependencies == sorted(r.dependencies) for r in dev_plan.resources)


def test_inputs_are_in_engine_form(prod_plan):
    """Whole numbers as integers (a Struct holds doubles), secrets and resource references in wire
    form, as the engine receives them."""
    group = next(r for r in prod_plan.of_type("eks:index:ManagedNodeGroup") if r.name == "system")
    assert group.inputs["scalingConfig"]["minSize"] == 3 and type(group.inputs["scalingConfig"]["minSize"]) is int
    assert group.inputs["cluster"][SIG_KEY] == "5cf8f73096256a8f31e491e813e4eb8e"
    secret = prod_plan.named("kubernetes:core/v1:Secret", "gateway-master-key").inputs["stringData"]
    assert secret[SIG_KEY] == SECRET_SIG


def test_component_outputs_are_recorded(dev_plan):
    (platform,) = dev_plan.of_type("llm-platform:index:Platform")
    assert dev_plan.outputs[platform.urn]["cluster_name"] == "llm-platform-dev"


def test_recordings_in_one_process_stand_alone(dev_plan):
    """The SDK keeps the root stack in a context variable; a dev recording made after a prod one
    still parents its resources to the dev stack."""
    plan_with("prod")
    again = plan_with("dev")
    assert [(r.urn, r.parent) for r in again.resources] == [(r.urn, r.parent) for r in dev_plan.resources]
    assert all(r.parent.startswith("urn:pulumi:dev::") for r in again.resources if r.parent)


_FAILING_PROGRAM = """
import pulumi_random

password = pulumi_random.RandomPassword("password", length=16)
password.result.apply(lambda _: 1 / 0)
for i in range(3):
    pulumi_random.RandomPassword(f"broken-{i}", length=password.length.apply(lambda _: 1 / 0))
"""


def test_a_failed_program_raises_its_error_and_leaves_nothing_for_the_next_recording(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(_FAILING_PROGRAM)
    partial = Plan("llm-platform", "probe")
    with pytest.raises(ZeroDivisionError):
        record_plan("probe", {}, region="us-east-1", program=program, into=partial)
    assert [r.name for r in partial.resources] == ["password"], "what was registered before the failure is kept"
    again = record_plan("dev", config_strings(read_stack_config("dev")), region="us-east-1")
    assert len(again.resources) == 185


def test_each_resource_is_handed_over_as_it_is_registered(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text("import pulumi_random\nfor i in range(20):\n"
                       "    pulumi_random.RandomPassword(f'password-{i}', length=16)\n")
    handed: list = []
    plan = record_plan("probe", {}, region="us-east-1", program=program, on_record=handed.append)
    assert sorted(handed, key=lambda r: r.urn) == plan.resources and len(handed) == 20


#: Packages whose private names the check may not use, nor assign attributes on.
THIRD_PARTY = ("pulumi", "pulumi_policy", "pulumi_aws", "pulumi_eks", "pulumi_kubernetes", "pulumi_random",
               "google", "grpc", "yaml", "asyncio", "jsonschema")


def _third_party_root(module: str | None) -> str | None:
    root = (module or "").split(".")[0]
    return root if root in THIRD_PARTY else None


def forbidden_uses(directory: Path) -> list[str]:
    """Each ``from <package> import _x``, ``<package>...._x`` read, and attribute assigned onto a
    third-party module (or ``setattr`` on one) in the Python files under ``directory``."""
    problems = []
    for path in sorted(directory.rglob("*.py")):
        tree = parse(path)
        aliases: dict[str, str] = {}  # local name -> third-party module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if _third_party_root(alias.name):
                        aliases[(alias.asname or alias.name).split(".")[0]] = alias.name
            elif isinstance(node, ast.ImportFrom) and _third_party_root(node.module):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        problems.append(f"{path.name}:{node.lineno}: from {node.module} import {alias.name}")
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                base = node
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in aliases:
                    if node.attr.startswith("_") and not node.attr.startswith("__"):
                        problems.append(f"{path.name}:{node.lineno}: {base.id}...{node.attr}")
                    if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
                        problems.append(f"{path.name}:{node.lineno}: assigns {ast.unparse(node)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"setattr", "delattr"}:
                target = node.args[0] if node.args else None
                if isinstance(target, ast.Name) and target.id in aliases:
                    problems.append(f"{path.name}:{node.lineno}: {node.func.id} on {target.id}")
    return problems


def test_the_check_uses_only_public_names_of_the_sdk_and_other_packages():
    """Nothing private of the SDK or another package, nothing replaced on them, in the check's code."""
    assert forbidden_uses(ROOT / "automation" / "offline") == []


def test_the_source_walk_finds_what_it_forbids(tmp_path):
    """The walk above on code that does each forbidden thing."""
    (tmp_path / "bad.py").write_text(
        "import asyncio\nimport pulumi.runtime.mocks as mocks\nfrom pulumi.runtime.mocks import _resolve_callbacks\n"
        "from pulumi.runtime import rpc\nrpc.serialize_property = None\nasyncio.gather = None\n"
        "mocks._sync_await(None)\nsetattr(rpc, 'x', 1)\n")
    assert sorted(forbidden_uses(tmp_path)) == [
        "bad.py:3: from pulumi.runtime.mocks import _resolve_callbacks",
        "bad.py:5: assigns rpc.serialize_property",
        "bad.py:6: assigns asyncio.gather",
        "bad.py:7: mocks..._sync_await",
        "bad.py:8: setattr on rpc",
    ]
