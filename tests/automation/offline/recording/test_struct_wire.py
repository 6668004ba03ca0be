"""Structs written as wire bytes equal the ones Struct.update builds, value kinds included."""

from __future__ import annotations

import copy
import math
import random

import pytest
from google.protobuf import struct_pb2

from automation.offline.recording.struct_wire import Unencodable, merge_into, struct_bytes, to_struct


def _updated(mapping) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(mapping)
    return message


def _kinds(value: struct_pb2.Value):
    """The value's oneof, all the way down (equality alone would not tell 0.0 from False)."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {k: _kinds(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_kinds(v) for v in value.list_value.values]
    return kind, getattr(value, kind)


def _same(ours: struct_pb2.Struct, theirs: struct_pb2.Struct) -> bool:
    return ours == theirs and {k: _kinds(v) for k, v in ours.fields.items()} == \
        {k: _kinds(v) for k, v in theirs.fields.items()}


EDGES = {
    "empty": {},
    "scalars": {"none": None, "true": True, "false": False, "zero": 0, "float zero": 0.0, "int": 7, "float": 2.5,
                "negative": -3, "big": 2**53 + 1, "tiny": 1e-300, "empty string": "", "unicode": "näh ✓ 日本"},
    "nested": {"a": {"b": {"c": [1, [2, [3, {}]], {"d": []}]}}, "tuple": (1, "two", None)},
    "special floats": {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
    "long text": {"script": "#!/bin/sh\n" + "echo line\n" * 2000, "key" * 100: "v"},
    "wire markers": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "s"},
}


@pytest.mark.parametrize("name", EDGES)
def test_edges_equal_update(name):
    mapping = EDGES[name]
    ours, theirs = to_struct(mapping), _updated(mapping)
    if name == "special floats":  # NaN is not equal to itself; compare the bits
        assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)
        return
    assert _same(ours, theirs)


def _random_value(rng: random.Random, depth: int):
    choice = rng.randrange(9 if depth < 4 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.randint(-10**12, 10**12)
    if choice == 3:
        return rng.uniform(-1e6, 1e6)
    if choice in (4, 5):
        return "".join(rng.choice("abc xyz-_/:\n\té✓") for _ in range(rng.randrange(0, 300)))
    if choice in (6, 7):
        return {f"k{rng.randrange(50)}": _random_value(rng, depth + 1) for _ in range(rng.randrange(0, 6))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 6))]


def test_random_documents_equal_update():
    rng = random.Random(20261125)
    for _ in range(300):
        mapping = {f"field{i}": _random_value(rng, 0) for i in range(rng.randrange(0, 12))}
        assert _same(to_struct(mapping), _updated(mapping)), mapping


@pytest.mark.parametrize("mapping", [
    {1: "non-string key"},
    {"object": object()},
    {"set": {1, 2}},
    {"surrogate": "\ud800"},
    {"huge": 10**400},
    {"struct": _updated({"a": 1})},
])
def test_what_update_treats_its_own_way_is_left_to_update(mapping):
    with pytest.raises(Unencodable):
        struct_bytes(mapping)
    try:
        theirs = _updated(mapping)
    except Exception as error:  # noqa: BLE001 - the same error from both
        with pytest.raises(type(error)):
            to_struct(mapping)
    else:
        assert _same(to_struct(mapping), theirs)


def test_remembered_scalars_keep_their_kind():
    """Entries and list items are remembered by value and type: True, 1 and 1.0 are equal keys of a
    dict, but a bool and two numbers on the wire, in any order of first use."""
    for order in ([True, 1, 1.0, None, "1"], ["1", 1.0, 1, True, None]):
        for value in order:
            for mapping in ({"k": value}, {"k": [value, value]}, {"k": {"k": value}}):
                expected = struct_pb2.Struct()
                expected.update(mapping)
                assert to_struct(mapping) == expected, (mapping, order)
                assert to_struct(mapping).fields["k"].WhichOneof("kind") == expected.fields["k"].WhichOneof("kind")


def test_merge_into_an_empty_message():
    message = struct_pb2.Struct()
    merge_into(message, {"a": [1, {"b": None}]})
    assert _same(message, _updated({"a": [1, {"b": None}]}))


def test_merge_into_replaces_values_whole_as_update_does():
    before = {"a": {"x": 1, "y": [1, 2]}, "b": "kept", "c": [1, 2, 3]}
    change = {"a": {"y": 2}, "c": [], "d": None}
    ours, theirs = _updated(before), _updated(before)
    merge_into(ours, change)
    theirs.update(change)
    assert _same(ours, theirs)


def _plain_cases():
    import copy
    import enum

    class Mode(str, enum.Enum):
        API = "API"

    class Count(enum.IntEnum):
        TWO = 2

    rng = random.Random(7)
    cases = [
        {"enum": Mode.API, "int enum": Count.TWO, "tuple": (1, 2.0, "x"), "big": 2**60 + 1, "float": 3.0,
         "half": 0.5, "bool": True, "none": None},
        {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e", "urn": "u"},
        {"a": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "s"}},
        {"__internal": 1},
        {"a": [{"4dabf18193072939515e22adb298388d": "d0e6a833031e9bbcd3f4e8bde6ca49a4"}]},
    ]
    cases += [{f"k{i}": _random_value(rng, 0) for i in range(rng.randrange(0, 10))} for _ in range(200)]
    return [copy.deepcopy(case) for case in cases]


def test_a_stand_in_gives_the_plain_form_and_the_struct_it_stands_for():
    """What the recording keeps for a Struct it stood in for is what the monitor's walk over that
    Struct gives (values, number kinds, whether it holds references or engine-only markers), and the
    Struct built from it is that Struct."""
    from automation.offline.recording.struct_wire import STAND_IN_KEY, SentStructs, plain_of

    sent = SentStructs()
    for tree in _plain_cases():
        message = to_struct(copy.deepcopy(tree))
        expected = plain_of(message)
        stand_in = sent.stand_in(tree)
        assert list(stand_in.fields) == [STAND_IN_KEY] and stand_in.ByteSize() < 50
        kept = sent.take(stand_in)
        assert kept == expected, tree
        assert {k: type(v) for k, v in kept.value.items()} == {k: type(v) for k, v in expected.value.items()}
        assert sent.real(stand_in) == message and sent.take(stand_in) == kept, "taken as often as asked"
    assert sent.take(message) is None and sent.real(message) is message, "a Struct of its own is itself"
    sent.clear()
    assert sent.take(stand_in) is None


def test_a_stand_in_for_an_answer_builds_the_struct_of_the_state():
    from automation.offline.recording.struct_wire import SentStructs

    sent = SentStructs()
    for state in _plain_cases()[:50]:
        assert sent.real(sent.answer(state)) == to_struct(state)


def test_a_number_the_walk_refuses_is_not_stood_in_for():
    from automation.offline.recording.struct_wire import SentStructs

    sent = SentStructs()
    message = sent.stand_in({"bad": math.inf})
    assert message == to_struct({"bad": math.inf}) and sent.take(message) is None


def test_inputs_the_serializer_finds_plain_are_kept_as_the_walk_over_the_sdks_struct_gives_them(monkeypatch):
    """``serialize_properties`` keeps inputs without the walk only where they are already what the
    monitor's walk over the SDK's own Struct of them gives (values, number kinds, references and
    engine keys); a float, a large integer, an enum, a tuple's numbers or an engine key sends them
    through the walk. Both ways, the result is the SDK's."""
    import asyncio

    from automation.offline.recording import sdk_serialize
    from automation.offline.recording.struct_wire import SENT, SentStructs, plain_of

    calls: list[bool] = []
    real_stand_in = SentStructs.stand_in

    def spy(self, tree, *, plain=False):
        calls.append(plain)
        return real_stand_in(self, tree, plain=plain)

    monkeypatch.setattr(SentStructs, "stand_in", spy)
    cases = _plain_cases() + [
        {"name": "x", "labels": {"app": "a", "tier": "b"}, "ports": [80, 443], "on": True, "none": None},
        {"nested": [{"a": [1, 2, {"b": "c"}]}], "edge": 2**53, "negative": -(2**53)},
        {"over": 2**53 + 1}, {"float in a list": [1, 2.5]}, {"engine key deep": {"x": {"__meta": 1}}},
    ]
    for tree in cases:
        theirs = plain_of(asyncio.run(sdk_serialize._sdk_serialize_properties(copy.deepcopy(tree), {})))
        calls.clear()
        ours = SENT.take(asyncio.run(sdk_serialize.serialize_properties(copy.deepcopy(tree), {})))
        assert ours == theirs, tree
        assert _kinds(ours.value) == _kinds(theirs.value), tree
        assert calls == [calls[0]] and calls[0] == _all_plain(tree), tree
    SENT.clear()
    assert calls  # the spy saw the calls


def _kinds(value):
    if isinstance(value, dict):
        return {k: _kinds(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_kinds(v) for v in value]
    return type(value)


def _all_plain(value) -> bool:
    """What the serializer should find already plain: exact str, bool, None, ints within a double's
    range, in dicts and lists, keys plain strings."""
    if isinstance(value, dict) and type(value) is dict:
        return all(type(k) is str and not k.startswith("__") and k != "4dabf18193072939515e22adb298388d"
                   and _all_plain(v) for k, v in value.items())
    if type(value) is list:
        return all(_all_plain(v) for v in value)
    if type(value) is int:
        return -(2**53) <= value <= 2**53
    return type(value) in (str, bool, type(None))
