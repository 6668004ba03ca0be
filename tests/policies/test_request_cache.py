"""The pack's request cache: what a policy reads is what pulumi_policy's own conversion gives.

Run in the pack's directory, as the CLI runs the pack (its modules import each other by plain names).
"""

from __future__ import annotations

import json
import subprocess
import sys

from automation.offline.plan import ROOT

_PROBE = r"""
import json, sys
from google.protobuf import json_format, struct_pb2
import pulumi_policy.policy as policy
from lib import request_cache, values

request_cache.install()
UNKNOWNS = sorted(values.UNKNOWN_SENTINELS)
SECRET = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "hidden"}
documents = [
    {"a": 1, "b": [1.5, "x", None, True, {"c": UNKNOWNS[0]}], "d": {}, "e": []},
    {"top": UNKNOWNS[1], "nested": {"deep": [UNKNOWNS[2], {"k": UNKNOWNS[3]}]}, "secret": SECRET},
    {"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}},
]
out = []
for document in documents:
    message = struct_pb2.Struct()
    message.update(document)
    sdk = values.plain(request_cache._sdk_unknown_checking_proxy(
        request_cache._sdk_deserialize_properties(json_format.MessageToDict(message))))
    request_cache._request.memo = {}  # as inside Analyze
    try:
        lazy = policy.unknown_checking_proxy(policy.deserialize_properties(policy.json_format.MessageToDict(message)))
        assert type(lazy) is request_cache.LazyProps
        fast = values.plain(lazy)
        as_mapping = values.plain(lazy._real())  # what a reader that is not plain() gets
        assert list(lazy) == list(lazy._real()) and len(lazy) == len(lazy._real())
    finally:
        request_cache._request.memo = None
    out.append([repr(sdk), repr(fast), repr(sdk) == repr(as_mapping) or repr(as_mapping)])
    assert request_cache.message_to_dict(message) == json_format.MessageToDict(message)

broken = struct_pb2.Struct()
broken.update({"n": float("nan")})
request_cache._request.memo = {}
lazy = policy.unknown_checking_proxy(policy.deserialize_properties(policy.json_format.MessageToDict(broken)))
try:
    values.plain(lazy)
    unreadable = "read"
except request_cache.PropertiesUnreadable as error:
    unreadable = str(error)
except Exception as error:
    unreadable = "caught as a policy error: " + repr(error)
print(json.dumps({"documents": out, "unreadable": unreadable}))
"""


def test_properties_read_lazily_equal_pulumi_policys_conversion():
    """plain() of the deferred properties equals plain() of pulumi_policy's own proxy, unknowns at
    every depth and secrets included; read as a mapping they are the proxy's too. Properties that
    cannot be converted fail the request (not a policy finding), as the eager conversion did."""
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT / "policies", capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for sdk, fast, as_mapping in result["documents"]:
        assert fast == sdk
        assert as_mapping is True, as_mapping
    assert "<unknown>" in result["documents"][1][1], "the unknowns were kept as UNKNOWN"
    assert result["unreadable"].startswith("ValueError: Fail to serialize NaN"), result["unreadable"]


_ACROSS_REQUESTS = r"""
import json
from google.protobuf import struct_pb2
import pulumi_policy.policy as policy
from lib import request_cache, values

request_cache.install()
calls = []

def counted(value):
    calls.append(1)
    return values.plain(value)

read = request_cache.shared_plain(counted)

def props(document):
    message = struct_pb2.Struct()
    message.update(document)
    return policy.unknown_checking_proxy(policy.deserialize_properties(policy.json_format.MessageToDict(message)))

def request(document, readers=1):
    request_cache._request.memo = {}
    try:
        lazy = props(document)
        return [read(lazy) for _ in range(readers)]
    finally:
        request_cache._request.memo = None

spec = {"replicas": 2, "template": {"containers": [{"name": "vllm", "args": ["--port", "8000"]}]}}
first, second = request({"kind": "Deployment", "spec": spec}, readers=2)     # two policies in Analyze
# The same properties again, built in another key order, as AnalyzeStack's copy of them.
(again,) = request({"spec": {"template": spec["template"], "replicas": 2}, "kind": "Deployment"})
calls_after_equal = len(calls)
again = json.loads(json.dumps(again))  # as it was read (the watch below changes the shared data)
(other,) = request({"kind": "Deployment", "spec": {**spec, "replicas": 3}})

request_cache.watch_handed_out()
(watched,) = request({"kind": "Deployment", "spec": spec})
untouched = request_cache.changed_since_handed_out()
request_cache.watch_handed_out()
(watched,) = request({"kind": "Deployment", "spec": spec})
watched["spec"]["replicas"] = 99                                              # a policy changing shared data
changed = request_cache.changed_since_handed_out()
print(json.dumps({"again": again, "same_object": first is second, "calls_after_equal": calls_after_equal,
                  "calls": len(calls), "other_replicas": other["spec"]["replicas"], "untouched": len(untouched),
                  "changed": len(changed)}))
"""


def test_equal_properties_are_converted_once_and_a_change_to_them_is_caught():
    """The engine sends a resource's properties in Analyze and again in AnalyzeStack: every reader
    gets the one conversion (equal Structs, whatever their key order), equal to a fresh one; other
    properties are converted anew; and what a reader changes in the shared data is found."""
    done = subprocess.run([sys.executable, "-c", _ACROSS_REQUESTS], cwd=ROOT / "policies", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["again"] == {"kind": "Deployment", "spec": {"replicas": 2.0, "template": {
        "containers": [{"name": "vllm", "args": ["--port", "8000"]}]}}}
    assert result["same_object"] and result["calls_after_equal"] == 1
    assert result["calls"] == 2 and result["other_replicas"] == 3
    assert result["untouched"] == 0 and result["changed"] == 1


_MUTATING_POLICY = r"""
import json, os
os.environ["LLM_PLATFORM_POLICY_STRICT"] = "1"
from lib import kit
from lib.resources import Resource

def changes(resource, config):
    resource.props["spec"]["replicas"] = 0    # a check that changes what it reads
    yield from ()

def reads(resource, config):
    yield from ()

for check in (reads, changes):
    try:
        kit._run(check.__name__, lambda: list(check(resource, {})), [resource.props], lambda *a: None) \
            if (resource := Resource("t", "n", "u", {"spec": {"replicas": 2}})) else None
        print(json.dumps({check.__name__: "passed"}))
    except AssertionError as error:
        print(json.dumps({check.__name__: str(error)}))

# Through a resource policy: every call gets the one config object, and a check that changes it fails.
seen = []

def keeps_config(resource, config):
    seen.append(config)
    yield from ()

def changes_config(resource, config):
    config["maxGpus"] = 0
    yield from ()

class Args:
    resource_type, name, urn, props = "t", "n", "u", {"spec": {}}
    opts = type("Opts", (), {"parent": None})()
    def get_config(self):
        return {"maxGpus": 4}

params = {"maxGpus": {"type": "integer", "default": 8}}
for check in (keeps_config, keeps_config, changes_config):
    policy = kit.resource_policy(name=check.__name__, description="d", types=["t"], check=check, params=params) \
        if check is changes_config or not seen else policy
    try:
        policy.validate(Args(), lambda *a: None)
        print(json.dumps({check.__name__: "passed"}))
    except AssertionError as error:
        print(json.dumps({check.__name__: str(error)}))
print(json.dumps({"one config": len(seen) == 2 and seen[0] is seen[1] and seen[0] == {"maxGpus": 4}}))
"""


def test_strict_mode_fails_a_check_that_changes_the_shared_properties_or_config():
    """Policies share each resource's plain properties, and every call of a resource policy its
    config; the pack's tests run in strict mode, where a check that changes either fails with a
    message that says to copy first."""
    done = subprocess.run([sys.executable, "-c", _MUTATING_POLICY], cwd=ROOT / "policies", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert results[0] == {"reads": "passed"}
    assert "policy changes changed resource properties or config it was handed (1)" in results[1]["changes"]
    assert "copy_plain" in results[1]["changes"]
    # The config a resource policy's check gets is one object for every call, watched the same way.
    assert results[2] == results[3] == {"keeps_config": "passed"}
    assert "policy changes_config changed resource properties or config it was handed (1)" in \
        results[4]["changes_config"]
    assert results[5] == {"one config": True}


def test_properties_that_cannot_be_converted_fail_the_call_at_once_instead_of_leaving_it_unanswered():
    """A property the SDK cannot unmarshal (an unknown signature) is the request's error, answered
    as pulumi_policy answers it; it once escaped the gRPC handler as a BaseException and the call
    stayed unanswered until the caller's deadline (the engine sets none)."""
    import time

    from automation.offline.pack.runner import PolicyPackError, PolicyPackRunner

    broken = {"urn": "urn:pulumi:dev::p::kubernetes:apps/v1:Deployment::d", "type": "kubernetes:apps/v1:Deployment",
              "name": "d", "inputs": {"metadata": {"4dabf18193072939515e22adb298388d": "not-a-signature"}}}
    with PolicyPackRunner(env={"LLM_PLATFORM_POLICY_STRICT": "1"}, call_timeout=60) as pack:
        pack.configure({"all": "mandatory"})
        for call in (lambda: pack.analyze(broken), lambda: pack.analyze_stack([broken])):
            started = time.monotonic()
            try:
                call()
                raise AssertionError("the broken properties were accepted")
            except PolicyPackError as error:
                assert "UNKNOWN: Exception calling application: Unrecognized signature 'not-a-signature'" in str(error)
            assert time.monotonic() - started < 30, "answered, not left to the deadline"


_UNKNOWN_FREE_PROBE = r"""
import json, random
from google.protobuf import struct_pb2
from lib import request_cache, values

rng = random.Random(11)
UNKNOWNS = sorted(values.UNKNOWN_SENTINELS)
SECRET_SIG = "4dabf18193072939515e22adb298388d"

def scalar():
    roll = rng.random()
    if roll < 0.04:
        return rng.choice(UNKNOWNS)
    if roll < 0.06:
        return "prefix-" + rng.choice(UNKNOWNS)  # a sentinel's bytes inside a longer string: not unknown
    if roll < 0.08:
        return {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "value": scalar()}
    return rng.choice(["x", "é", 1.5, 3, True, None, ""])

def value(depth):
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return scalar()
    if roll < 0.75:
        return {rng.choice(["a", "b", "c", UNKNOWNS[0]]) + str(i): value(depth + 1) for i in range(rng.randrange(4))}
    return [value(depth + 1) for _ in range(rng.randrange(4))]

counts = {"free": 0, "walked": 0}
for _ in range(3000):
    message = struct_pb2.Struct()
    message.update({"spec": value(0)})
    lazy = request_cache.lazy_props(message)
    holds = values.contains_unknown(values.plain(lazy))
    free = values.free_of_unknowns(lazy)
    assert not (free and holds), message
    assert free or holds or any(s in message.SerializeToString() for s in values._SENTINEL_BYTES), message
    counts["free" if free else "walked"] += 1
assert not values.free_of_unknowns({"a": 1}), "plain data: walk"
print(json.dumps(counts))
"""


def test_properties_free_of_unknowns_by_their_wire_form_agree_with_the_walk():
    """``free_of_unknowns`` (sentinel bytes absent from the properties' wire form) never says "free"
    of properties whose plain form holds an unknown, secrets and keys included, and says it of all
    whose wire form has no sentinel."""
    done = subprocess.run([sys.executable, "-c", _UNKNOWN_FREE_PROBE], cwd=ROOT / "policies", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout)
    assert counts["free"] > 500 and counts["walked"] > 500, counts


_DERIVED = r"""
import json
from lib import kit, request_cache
from lib.pools import stack_pools
from lib.resources import Resource

deployment = lambda name: Resource("kubernetes:apps/v1:Deployment", name, f"urn:{name}", {
    "metadata": {"namespace": "serving"}, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})
made = [deployment("a"), deployment("b")]
calls = []
request_cache._request.memo = {}  # as inside AnalyzeStack
first, second = kit.Stack(list(made)), kit.Stack(list(made))  # two stack policies' Stacks of the same resources
one = first.derived("probe", None, lambda: calls.append(1) or ["figure"])
two = second.derived("probe", None, lambda: calls.append(1) or ["figure"])
in_request = len(calls)
templates = [kit.stack_workloads(s, {}) for s in (first, second)]
custom = kit.stack_workloads(first, {"customWorkloads": {"kubernetes:example.com/v1:Group": ["spec.template"]}})
others = kit.Stack([deployment("a"), deployment("b")])  # other objects, the same key
three = others.derived("probe", None, lambda: calls.append(1) or ["other figure"])
with_others = len(calls)
request_cache._request.memo = None
outside = [first.derived("probe", None, lambda: calls.append(1) or ["figure"]) for _ in range(2)]
print(json.dumps({
    "calls": [in_request, with_others, len(calls)],
    "same": one is two, "templates": [[t.resource.name for t in ts] for ts in templates],
    "templates shared": all(a is b for a, b in zip(*templates)), "fresh lists": templates[0] is not templates[1],
    "custom kinds keyed apart": custom is not templates[0] and len(custom) == 2,
    "other resources": three, "outside": outside, "pools": stack_pools(first),
}))
"""


def test_a_figure_derived_from_the_stack_is_worked_out_once_per_request_for_the_same_resources():
    """Stack policies of one AnalyzeStack each get a Stack of the same resource objects; what they
    derive alike (pod templates, pools) is worked out once and shared, keyed by what else it depends
    on (the config's workload kinds); a Stack of other resources, or a call outside a request, works
    it out anew."""
    done = subprocess.run([sys.executable, "-c", _DERIVED], cwd=ROOT / "policies", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["calls"] == [1, 2, 4]
    assert result["same"] and result["templates shared"] and result["fresh lists"]
    assert result["templates"] == [["a", "b"], ["a", "b"]]
    assert result["custom kinds keyed apart"]
    assert result["other resources"] == ["other figure"]
    assert result["outside"] == [["figure"], ["figure"]]
    assert result["pools"] == []
