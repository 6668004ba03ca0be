"""The check's files: standard emitters (json, PyYAML's safe dumper in C), written under a temporary
name and renamed into place, so no file is ever half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from automation.offline import files
from automation.offline.files import write_atomically, write_manifests, write_plan
from automation.offline.manifests import ManifestDumper, dumps_yaml
from automation.offline.plan import Plan, PlannedResource


def test_the_plan_file_is_json_one_resource_a_line_with_secrets_redacted(dev_plan, tmp_path):
    path = write_plan(dev_plan, tmp_path)
    text = path.read_text()
    content = json.loads(text)
    lines = text.splitlines()
    assert lines[0] == '{"project": "llm-platform", "stack": "dev", "resources": [' and lines[-1] == "]}"
    assert [json.loads(line.strip().rstrip(",")) for line in lines[1:-1]] == content["resources"]
    assert [r["urn"] for r in content["resources"]] == [r.urn for r in dev_plan.resources]
    secret = next(r for r in content["resources"] if r["name"] == "gateway-master-key")["inputs"]["stringData"]
    assert secret == {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                      "value": {"LITELLM_MASTER_KEY": "[secret]", "MODEL_API_KEY_BATCH": "[secret]",
                                "MODEL_API_KEY_INTERACTIVE": "[secret]"}}


def test_manifests_are_pyyamls_safe_dump_with_literal_blocks(prod_plan, tmp_path):
    """Each manifest reads back as the object; text over several lines is a literal block."""
    assert issubclass(ManifestDumper, getattr(yaml, "CSafeDumper", yaml.SafeDumper)), "libyaml where PyYAML has it"
    paths = write_manifests(prod_plan, tmp_path)
    by_name = {p.name: yaml.safe_load(p.read_text()) for p in paths}
    gateway = by_name["configmap-llm-gateway-llm-gateway.yaml"]
    assert "config.yaml: |\n" in (tmp_path / "configmap-llm-gateway-llm-gateway.yaml").read_text()
    assert yaml.safe_load(gateway["data"]["config.yaml"])["model_list"]
    assert dumps_yaml({"a": "x\ny\n", "b": [1, True, None]}) == "a: |\n  x\n  y\nb:\n- 1\n- true\n- null\n"


def test_of_two_manifests_with_one_file_name_the_later_in_the_plan_is_written(tmp_path):
    def service(urn: str, port: int) -> PlannedResource:
        return PlannedResource(urn=urn, type="kubernetes:core/v1:Service", name="s", parent="", custom=True,
                               inputs={"kind": "Service", "metadata": {"name": "s", "namespace": "n"},
                                       "spec": {"ports": [{"port": port}]}})

    first, second = service("urn:pulumi:a::p::kubernetes:core/v1:Service::s1", 1), \
        service("urn:pulumi:a::p::kubernetes:core/v1:Service::s2", 2)
    (path,) = write_manifests(Plan("p", "a", [first, second]), tmp_path)
    assert yaml.safe_load(path.read_text())["spec"]["ports"] == [{"port": 2}]


def test_stale_manifests_go_and_other_files_stay(dev_plan, tmp_path):
    (tmp_path / "deployment-gone-old-model.yaml").write_text("kind: Deployment\n")
    (tmp_path / "notes.txt").write_text("mine")
    written = write_manifests(dev_plan, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.yaml")) == sorted(p.name for p in written)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_interrupted_write_leaves_the_previous_file_and_no_partial_one(tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    path.write_text("the previous check's plan")

    def interrupted(source, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, b"half of a new plan")
    assert path.read_text() == "the previous check's plan"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_file_is_replaced_whole(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b"x" * 5000)
    write_atomically(path, b"kind: ConfigMap\n")
    assert path.read_bytes() == b"kind: ConfigMap\n"
    assert not Path(str(path) + files.PARTIAL).exists()
