"""The pack's plain form of a resource's properties, read from the wire in one walk, is what
pulumi_policy's three steps give (``MessageToDict``, ``deserialize_properties``, then ``plain``):
value by value and type by type, on every resource of the dev and prod plans and on generated
properties with unknowns, secrets, assets, archives and values the steps refuse.

Run in the pack's directory, as the CLI runs the pack (its modules import each other by plain names).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

from automation.offline.pack.runner import to_struct
from automation.offline.plan import ROOT

_PROBE = r"""
import json, math, pickle, random, sys
from google.protobuf import struct_pb2
import pulumi_policy.policy as policy
from lib import request_cache, values

request_cache.install()
SIG = "4dabf18193072939515e22adb298388d"
SECRET, ASSET, ARCHIVE = ("1b47061264138c4ac30d75fd1eb44270", "c44067f5952c0a294b673a41bacd8c17",
                          "0def7320c3a5731c473e5ecbe6d01bc7")
UNKNOWNS = sorted(values.UNKNOWN_SENTINELS)


def typed(value):
    # Values with their types, so that 1 and 1.0, or True and 1, differ.
    if value is values.UNKNOWN:
        return "UNKNOWN"
    if type(value) is dict:
        return ["dict", [[key, typed(item)] for key, item in value.items()]]
    if type(value) is list:
        return ["list", [typed(item) for item in value]]
    if value is None or type(value) in (str, bool, int, float):
        return [type(value).__name__, repr(value)]
    return [type(value).__name__, typed({k: v for k, v in vars(value).items()})]


def three_steps(message):
    try:
        return typed(values._plain_raw(request_cache._sdk_deserialize_properties(request_cache.message_to_dict(message))))
    except Exception as error:
        return ["raised", f"{type(error).__name__}: {error}"]


def read_by_the_pack(message):
    request_cache._request.memo = {}  # as inside Analyze
    try:
        lazy = policy.unknown_checking_proxy(policy.deserialize_properties(policy.json_format.MessageToDict(message)))
        assert type(lazy) is request_cache.LazyProps and lazy.source() is message
        return typed(values.plain(lazy))
    except request_cache.PropertiesUnreadable as error:
        return ["raised", str(error)]
    finally:
        request_cache._request.memo = None


rng = random.Random(15)


def leaf():
    return rng.choice([
        lambda: rng.randint(-10**6, 10**6), lambda: rng.random() * 10 ** rng.randint(-5, 300), lambda: 2.0,
        lambda: -0.0, lambda: rng.choice([True, False]), lambda: None, lambda: "", lambda: "plain text",
        lambda: rng.choice(UNKNOWNS), lambda: "x" + rng.choice(UNKNOWNS), lambda: "ünïcödé \u2603",
        lambda: SIG, lambda: SECRET,
    ])()


def wrapped(depth):
    kind = rng.randrange(9)
    if kind == 0:
        return {SIG: SECRET, "value": tree(depth + 1)}
    if kind == 1:
        return {SIG: SECRET}  # a secret without its value: refused
    if kind == 2:
        return {SIG: ASSET, rng.choice(["path", "text", "uri"]): "a/b.txt"}
    if kind == 3:
        return {SIG: ARCHIVE, "assets": {"f": {SIG: ASSET, "text": "t"}}}
    if kind == 4:
        return {SIG: "not-a-signature"}  # refused
    if kind == 5:
        return {SIG: SECRET, "value": float(rng.choice(["inf", "-inf", "nan"]))}  # refused
    return {"__internal": leaf(), SIG + "x": leaf()}


def tree(depth=0):
    roll = rng.random()
    if depth >= 4 or roll < 0.45:
        return leaf()
    if roll < 0.55:
        return wrapped(depth)
    if roll < 0.75:
        return [tree(depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "b", "spec", "ü", "", "__x", SIG]) + str(i): tree(depth + 1) for i in range(rng.randrange(5))}


def message_of(document):
    message = struct_pb2.Struct()
    message.update(document)
    return message


messages = [struct_pb2.Struct.FromString(raw) for raw in pickle.load(open(sys.argv[1], "rb"))]
plan_count = len(messages)
for _ in range(3000):
    document = {"k%d" % i: tree(1) for i in range(rng.randrange(1, 5))}
    if rng.random() < 0.05:
        document[SIG] = SECRET  # at the top the signature key means nothing
    messages.append(message_of(document))
messages.append(message_of({"n": float("nan")}))
messages.append(message_of({"deep": {"n": [float("inf")]}}))

differ, raised = [], 0
for index, message in enumerate(messages):
    expected, got = three_steps(message), read_by_the_pack(message)
    raised += expected[0] == "raised"
    if got != expected:
        differ.append([index, expected, got])
print(json.dumps({"plans": plan_count, "all": len(messages), "raised": raised, "differ": differ[:3],
                  "differ_count": len(differ)}))
"""


def test_one_walk_from_the_wire_gives_pulumi_policys_plain_properties(tmp_path, dev_plan, prod_plan):
    structs = [to_struct(r.inputs).SerializeToString() for plan in (dev_plan, prod_plan) for r in plan.resources]
    (tmp_path / "structs.pickle").write_bytes(pickle.dumps(structs))
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "structs.pickle")], cwd=ROOT / "policies",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["differ_count"] == 0, result["differ"]
    assert result["plans"] == len(structs) > 100
    # The generated values reach the steps' refusals (unreadable properties fail the request).
    assert 100 < result["raised"] < result["all"] - result["plans"]
