"""The check's files come out of the C emitters byte-for-byte as the pure-Python emitters write them."""

from __future__ import annotations

import json
import math
import random

import pytest
import yaml

from automation.offline import emit
from automation.offline.check import run_check
from automation.offline.manifests import kubernetes_documents, redact_secrets
from automation.offline.plan import ROOT


@pytest.fixture(scope="module", params=["dev", "prod"])
def checked(request, tmp_path_factory):
    return run_check(request.param, tmp_path_factory.mktemp(request.param))


def test_c_emitters_are_available():
    """Otherwise every file silently takes the slow path."""
    assert emit.orjson is not None and emit._YAML_CSAFE is not None


def test_plan_and_report_json_identical(checked):
    plan = redact_secrets(checked.plan.to_json())
    assert emit.dumps_json(plan) == json.dumps(plan, indent=2)
    assert checked.plan_path.read_text() == json.dumps(plan, indent=2) + "\n"
    report = checked.policies.to_json()
    assert (checked.plan_path.parent / "policy-report.json").read_text() == json.dumps(report, indent=2) + "\n"


def python_yaml(document):
    """The reference text: PyYAML's pure-Python emitter."""
    return yaml.dump(document, Dumper=emit.ManifestDumper, sort_keys=False)


def test_manifests_yaml_identical(checked):
    documents = kubernetes_documents(checked.plan)
    multi_line = [name for name, d in documents.items() if "\\n" in json.dumps(d)]
    assert multi_line, "no document holds multi-line text"
    assert not any(emit._needs_python_emitter(documents[name]) for name in multi_line), "scripts took the slow path"
    for name, document in documents.items():
        expected = python_yaml(document)
        assert emit.dumps_yaml(document) == expected, name
        assert (checked.plan_path.parent / "manifests" / name).read_text() == expected, name
        assert yaml.safe_load(expected) == document, name


def test_multi_line_text_is_a_literal_block():
    """A script in a manifest reads as the script, not as one escaped line."""
    script = '#!/bin/sh\nset -eu\n  aws s3 sync "$1" "$2"\n'
    text = emit.dumps_yaml({"command": ["/bin/sh", "-c", script]})
    assert text == 'command:\n- /bin/sh\n- -c\n- |\n  #!/bin/sh\n  set -eu\n    aws s3 sync "$1" "$2"\n'
    # Where a block cannot hold the text exactly, it is quoted, by both emitters alike.
    for awkward in ("trailing \nspace", "tab\there\n", "ends with space\n "):
        assert '"' in emit.dumps_yaml({"k": awkward})
        assert emit.dumps_yaml({"k": awkward}) == python_yaml({"k": awkward})
        assert yaml.safe_load(emit.dumps_yaml({"k": awkward})) == {"k": awkward}


def test_random_text_identical_on_both_paths():
    """Multi-line text of every shape: literal blocks (libyaml) and quoted fallbacks agree."""
    rng = random.Random(7)
    alphabets = ["ab -:#'\"\\/\n  z0|>", "abcdefgh \n", "word word word \n\t"]
    fast = 0
    for _ in range(3000):
        alphabet = rng.choice(alphabets)
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(300)))
        for document in ({"k": text}, [text], {"a": {"b": [text, {"c": text}]}}):
            fast += not emit._needs_python_emitter(document)
            assert emit.dumps_yaml(document) == python_yaml(document), repr(text)
            assert yaml.safe_load(emit.dumps_yaml(document)) == document
    assert fast > 1000, "the random texts never reached libyaml"


AWKWARD_SCALARS = [
    1e-5, -1e-5, 1.5e-7, 0.0001, 0.00011, 1e16, 1e22, 123456789012345680.0, -0.0, 3.0, 0.92,
    math.nan, math.inf, -math.inf, 2**63, 2**70, -(2**64),
    "é", "\x7f", "\x01", "\t", "\u2028", "a/b", "</script>", "line\nbreak", " lead", "trail ", "'q'", '"dq"',
    "- dash", "key: value", "#hash", "yes", "null", "~", "0x1F", "1e3", "", " ", "a" * 200,
    "word " * 40, "a\nb " * 60, True, False, None,
]


@pytest.mark.parametrize("value", AWKWARD_SCALARS, ids=repr)
def test_awkward_scalars_identical(value):
    for document in (value, [value], {"key": value}, {"outer": {"inner": [value, {"k": value}]}}):
        assert emit.dumps_json(document) == json.dumps(document, indent=2)
        if not (isinstance(value, float) and not math.isfinite(value)):
            assert emit.dumps_yaml(document) == python_yaml(document)


def test_json_of_every_character_and_float_identical():
    """orjson's text is taken without json's when it has no float, non-ASCII, DEL or null: every
    character below U+3000 as key and value, and floats of every magnitude, decide it right."""
    for code in range(0x3000):
        document = {chr(code): [chr(code), f"a{chr(code)}b"]}
        assert emit.dumps_json(document) == json.dumps(document, indent=2), code
    rng = random.Random(7)
    for _ in range(2000):
        number = rng.choice([rng.uniform(-1, 1), 10.0 ** rng.randint(-320, 308), float(rng.randint(0, 10**18))])
        document = {"n": [number, {"m": -number}], "s": "x:1.5"}
        assert emit.dumps_json(document) == json.dumps(document, indent=2), number


def test_plain_json_skips_the_comparison(monkeypatch):
    """A document of ASCII strings, integers, booleans and containers does not pay json's encoding
    to be checked; one with a float or a null does."""
    compared = []
    real_dumps = json.dumps
    monkeypatch.setattr(emit.json, "dumps", lambda *a, **k: ("separators" in k and compared.append(a[0])) or real_dumps(*a, **k))
    assert emit.dumps_json({"a": [1, True, "v1.2:3"], "b": {}}) == real_dumps({"a": [1, True, "v1.2:3"], "b": {}}, indent=2)
    assert compared == []
    for document in ({"a": 1.5}, {"a": None}, {"a": "é"}, {"a": "\x7f"}):
        assert emit.dumps_json(document) == real_dumps(document, indent=2)
    assert compared == [{"a": 1.5}, {"a": None}, {"a": "é"}, {"a": "\x7f"}]


def test_non_string_keys_and_containers_identical():
    for document in ({1: "a", 2: [{}]}, {"a": {}, "b": [], "c": [{}, []]}, [], {}, (1, 2)):
        assert emit.dumps_json(document) == json.dumps(document, indent=2)


def test_random_documents_identical():
    rng = random.Random(15)
    alphabet = "abc -:#'\"\\/\n\tz0123é"

    def value(depth: int):
        kind = rng.randrange(7 if depth < 4 else 4)
        if kind == 0:
            return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        if kind == 1:
            return rng.choice([rng.randint(-(10**20), 10**20), rng.randint(-5, 5)])
        if kind == 2:
            return rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1e-4, 1e-4), 10.0 ** rng.randint(-30, 30)])
        if kind == 3:
            return rng.choice([True, False, None])
        if kind in (4, 5):
            return {f"k{i}-{rng.choice(alphabet)}": value(depth + 1) for i in range(rng.randrange(0, 5))}
        return [value(depth + 1) for _ in range(rng.randrange(0, 5))]

    for _ in range(300):
        document = value(0)
        assert emit.dumps_json(document) == json.dumps(document, indent=2)
        assert emit.dumps_yaml(document) == python_yaml(document)


def test_stack_files_read_back_as_written():
    """The bench and the tests rely on manifests parsing back to the same objects."""
    for stack in ("dev", "prod"):
        document = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
        assert yaml.safe_load(emit.dumps_yaml(document)) == document


def test_json_files_written_piece_by_piece_identical(tmp_path):
    """write_json streams a top-level object and its lists; the file is json.dumps(indent=2)'s."""
    rng = random.Random(3)
    documents = [
        {}, [], {"a": []}, {"a": {}}, {"a": [1]}, {"a": [[], {}, [1, [2, {"x": "y\nz"}]]], "b": None},
        {"project": "p", "stack": "s", "resources": [{"urn": "u", "inputs": {"k": ["v", {"n": 1.5}]}}] * 3},
        {1: "non-string key"}, "scalar", [{"a": 1}, {"b": [2]}],
    ]
    for _ in range(200):
        documents.append({f"k{i}": rng.choice([[], [{"x": [i] * rng.randrange(3)}] * rng.randrange(4), "é\t", {"n": {}}, 10**20])
                          for i in range(rng.randrange(5))})
    for document in documents:
        path = tmp_path / "out.json"
        emit.write_json(path, document)
        assert path.read_text() == json.dumps(document, indent=2) + "\n", document


def test_plain_documents_take_the_block_writer_and_the_rest_libyaml_or_pyyaml(monkeypatch):
    """The manifests above were written by the block writer (so the comparisons cover it); shared
    objects (anchors and aliases) and floats go to libyaml through the fast representation, and
    other types take PyYAML's own path."""
    calls = []
    real_writer, real_representation = emit._BlockWriter.dumps, emit._FastRepresentation.represent_data

    def writer(self, document):
        calls.append("block writer")
        return real_writer(self, document)

    def representation(self, data):
        calls.append("libyaml")
        return real_representation(self, data)

    monkeypatch.setattr(emit._BlockWriter, "dumps", writer)
    monkeypatch.setattr(emit._FastRepresentation, "represent_data", representation)
    assert emit.dumps_yaml({"a": [1, "x", None, True]}) == python_yaml({"a": [1, "x", None, True]})
    assert calls == ["block writer"]
    shared = {"x": [1, 2]}
    for document in ({"one": shared, "two": shared}, [shared, shared, {"deeper": shared["x"]}], {"f": 0.5}):
        calls.clear()
        assert emit.dumps_yaml(document) == python_yaml(document)
        assert calls[0] == "block writer" and "libyaml" in calls
    assert "&id001" in emit.dumps_yaml({"one": shared, "two": shared})
    for document in ({"t": (1, 2)}, {"f": 0.5, "g": -1e-30, "h": math.inf}, {"nested": {"tuple": ("a",)}}):
        assert emit.dumps_yaml(document) == python_yaml(document)


def test_random_documents_identical_to_pyyaml():
    """Nested mappings and lists of every shape (empty ones, lists in lists, mappings in lists),
    with keys and values that are plain, quoted, folded past column 80, literal blocks, or need
    escapes, at every depth: the block writer's text is PyYAML's."""
    rng = random.Random(11)
    words = ["a", "model-0001", "8000", "true", "null", "", " x", "x ", "a: b", "#c", "- d", "it's", "é", "1e3",
             "vllm:num_requests_waiting{namespace=\"x\"}", "word " * 30, "line\nbreak\n", "\n", "tab\there",
             "2001-12-14", "~", "-", ".", "...", "---", "x" * 130, "{\"json\": [1, 2]}"]

    def value(depth):
        roll = rng.random()
        if depth < 4 and roll < 0.25:
            return {rng.choice(words) if rng.random() < 0.7 else f"k{rng.randrange(9)}": value(depth + 1)
                    for _ in range(rng.randrange(4))}
        if depth < 4 and roll < 0.45:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return rng.choice([*words, rng.randrange(-5, 10**6), True, False, None, " ".join(rng.choices(words, k=12))])

    written = 0
    for _ in range(1500):
        document = {f"top{i}": value(0) for i in range(rng.randrange(1, 4))} if rng.random() < 0.8 else [value(0)]
        assert emit.dumps_yaml(document) == python_yaml(document), document
        written += 1
    assert written == 1500


def test_redaction_skips_only_what_holds_no_secret(checked):
    """The shortcut (no walk where the JSON text holds no secret marker) redacts what the walk
    redacts: the plan resource by resource, each manifest, and values orjson cannot write."""
    from automation.offline.manifests import _redacted, redact_plan

    whole = checked.plan.to_json()
    assert redact_plan(checked.plan) == _redacted(whole, True) == redact_secrets(whole)
    assert "[secret]" in json.dumps(redact_plan(checked.plan)), "the stack holds secrets to redact"
    for resource in checked.plan.resources:
        assert redact_secrets(resource.inputs, wire=False) == _redacted(resource.inputs, False), resource.urn
    marker = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": {"k": "plain"}}
    for value in ({"a": [1, {"b": marker}]}, {1: marker}, {"big": 2**70, "s": marker},
                  {"text": "1b47061264138c4ac30d75fd1eb44270"}, [marker], {"none": None}):
        assert redact_secrets(value) == _redacted(value, True)
        assert redact_secrets(value, wire=False) == _redacted(value, False)
    untouched = {"a": {"b": [1, 2]}}
    assert redact_secrets(untouched) is untouched


def test_one_line_text_gets_the_style_pyyamls_emitter_chooses():
    """The block writer's shortcut for one line of printable ASCII (plain unless PyYAML's analysis
    refuses it or the resolver reads it as another type, else single-quoted) chooses what PyYAML's
    ``analyze_scalar`` and ``choose_scalar_style`` choose, as a key and as a value."""
    import string

    writer = emit._BlockWriter()
    rng = random.Random(3)
    indicators = " :#-?.'\"[]{},&*!|>%@`"
    compared = 0
    for _ in range(20000):
        text = "".join(rng.choice(indicators if rng.random() < 0.5 else string.printable[:95])
                       for _ in range(rng.randrange(1, 10)))
        for key in (False, True):
            writer._styles.clear()
            assert writer._style(text, key) == writer._style_by_pyyaml(text, key), (text, key)
            compared += 1
    assert compared == 40000


def test_text_over_lines_gets_the_literal_block_pyyamls_emitter_writes():
    """The block writer's shortcut for text over several lines of printable ASCII (a literal block,
    its chomping hint, each line at the indent) chooses the style PyYAML's ``analyze_scalar`` and
    ``choose_scalar_style`` choose and writes the text its ``write_literal`` writes, at every
    indent, after ``:`` and after ``-``: leading, trailing and doubled breaks, spaces before and
    after breaks, indicators and document markers included."""
    writer = emit._BlockWriter()
    rng = random.Random(5)
    pieces = ["\n", "\n", "\n\n", " ", "  ", "a", "key: value", "- item", "# note", "---", "...", "'q'", '"d"',
              "x" * 90, "{[]}", "|", ">", "\t", "é"]
    compared = written = 0
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 8)))
        if "\n" not in text:
            continue
        writer._styles.clear()
        style, shown = writer._style(text, False)
        assert (style, shown) == writer._style_by_pyyaml(text, False), repr(text)
        compared += 1
        if style[:1] == "|" and text[:1] not in ("", " ", "\n"):
            for indent in (2, 4, 10):
                for after_dash in (False, True):
                    column = indent - 1 if after_dash else indent + 3
                    assert emit._literal_block(text, indent) == \
                        writer._by_pyyaml(style, text, column, indent, after_dash), (repr(text), indent, after_dash)
                    written += 1
    assert compared > 5000 and written > 3000, (compared, written)
    gateway = "model_list:\n" + "".join(f"  - model_name: m{i}\n    litellm_params:\n      model: openai/m{i}\n"
                                          for i in range(50)) + "\n\nlitellm_settings:\n  drop_params: true\n"
    assert emit.dumps_yaml({"data": {"config.yaml": gateway}}) == python_yaml({"data": {"config.yaml": gateway}})


def test_long_plain_text_is_folded_where_pyyamls_emitter_folds_it():
    """The block writer's shortcut for one line of plain text past column 80 (a single space past
    the column becomes a break and the indent, a run of spaces stays) writes what PyYAML's
    ``write_plain`` writes, from every column and at every indent."""
    writer = emit._BlockWriter()
    rng = random.Random(8)
    words = ["a", "vllm", "--max-model-len", "8192", "x" * 40, "x" * 85, "k=v,w", "  ", "   "]
    compared = 0
    for _ in range(4000):
        text = rng.choice(words[:7]) + "".join(rng.choice([" ", " ", "  "]) + rng.choice(words[:7])
                                               for _ in range(rng.randrange(1, 30)))
        style, _ = writer._style(text, False)
        if style != "":
            continue
        for indent in (2, 6, 12):
            for after_dash in (False, True):
                column = indent - 1 if after_dash else indent + rng.randrange(1, 40)
                assert emit._folded_plain(text, column, indent) == \
                    writer._by_pyyaml("", text, column, indent, after_dash), (text, column, indent)
                compared += 1
    assert compared > 10000, compared
