"""``catalog refresh`` fed answers no AWS API should give, through the aws stand-in's raw mode.

Each ends in one line naming what was wrong (the field's path, never the offending value), exit 1 for an
unusable answer or 2 for an existing file that is not a catalog, no traceback, and the catalog file as it
was: nothing of a bad answer is written.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from automation import exit_codes

RESPONSES = Path(__file__).resolve().parents[1] / "responses" / "aws"
G5 = next(i for i in json.loads((RESPONSES / "ec2-describe-instance-types.us-east-1.json").read_text())["InstanceTypes"]
          if i["InstanceType"] == "g5.xlarge")
CATALOG = {"description": "kept", "sources": {}, "hoursPerMonth": 730,
           "instances": {"m7i.large": {"category": "m", "family": "m7i", "vcpu": 2, "memoryMiB": 8192, "gpus": 0,
                                       "maxPods": 29}},
           "onDemandHourlyUsd": {"us-east-1": {"m7i.large": 0.1008}}}


@pytest.fixture
def catalog_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STANDIN_AWS_RESPONSES", str(RESPONSES))
    path = tmp_path / "instance_catalog.json"
    path.write_text(json.dumps(CATALOG))
    return path


def refused(rig, catalog_file: Path, monkeypatch, raw: bytes | None = None, *, pricing: bool = False,
            code: int = exit_codes.FAILED) -> str:
    before = catalog_file.read_bytes()
    if raw is not None:
        answer = catalog_file.parent / "answer.bin"
        answer.write_bytes(raw)
        monkeypatch.setenv("STANDIN_AWS_RAW_PRICING" if pricing else "STANDIN_AWS_RAW_EC2", str(answer))
    result = rig.run("catalog", "refresh", "--region", "us-east-1", "--families", "g5", "--out", str(catalog_file))
    assert result.code == code, result.err
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert catalog_file.read_bytes() == before, "nothing of a refused answer is written"
    return lines[0]


def item_with(path: str, value) -> bytes:
    item = copy.deepcopy(G5)
    *parents, leaf = path.split(".")
    node = item
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is KeyError:
        del node[int(leaf) if leaf.isdigit() else leaf]
    else:
        node[int(leaf) if leaf.isdigit() else leaf] = value
    return json.dumps({"InstanceTypes": [item]}).encode()


EC2 = "error: ec2 describe-instance-types in us-east-1 "


@pytest.mark.parametrize("raw, line", [
    (b"<html>Service Unavailable</html>", EC2 + "did not answer JSON"),
    (b"[" * 100_000, EC2 + "did not answer JSON"),
    (b'{"InstanceTypes": [{"InstanceType": "g5.\xff"}]}', "error: `aws ec2 describe-instance-types` answered bytes "
                                                          "that are not UTF-8 (at byte 40)"),
    (b"[]", EC2 + "answered an unusable value at the top level: Input should be a valid dictionary or instance "
                  "of _DescribeAnswer"),
    (b'{"InstanceTypes": {"g5.xlarge": {}}}', EC2 + "answered an unusable value at InstanceTypes: Input should be "
                                                    "a valid list"),
    (item_with("VCpuInfo", KeyError), EC2 + "answered an unusable value at InstanceTypes[0].VCpuInfo: Field "
                                            "required"),
    (item_with("VCpuInfo.DefaultVCpus", "4"), EC2 + "answered an unusable value at InstanceTypes[0].VCpuInfo."
                                                    "DefaultVCpus: Input should be a valid integer"),
    (item_with("GpuInfo.Gpus.0.Count", True), EC2 + "answered an unusable value at InstanceTypes[0].GpuInfo.Gpus[0]."
                                                    "Count: Input should be a valid integer"),
    (item_with("MemoryInfo.SizeInMiB", -16384), EC2 + "answered an unusable value at InstanceTypes[0].MemoryInfo."
                                                      "SizeInMiB: Input should be greater than or equal to 0"),
    (item_with("NetworkInfo.NetworkCards.0.BaselineBandwidthInGbps", float("nan")),
     EC2 + "answered an unusable value at InstanceTypes[0].NetworkInfo.NetworkCards[0].BaselineBandwidthInGbps: "
           "Input should be a finite number"),
    (item_with("NetworkInfo.NetworkCards.0.BaselineBandwidthInGbps", 1e308 * 10),
     EC2 + "answered an unusable value at InstanceTypes[0].NetworkInfo.NetworkCards[0].BaselineBandwidthInGbps: "
           "Input should be a finite number"),
    (item_with("InstanceType", "g5.x\u0007large"), EC2 + "answered an unusable value at InstanceTypes[0]."
                                                         "InstanceType: String should match pattern "
                                                         "'^[a-z][a-z0-9-]{0,31}\\.[a-z0-9-]{1,32}$'"),
    (item_with("GpuInfo.Gpus.0.Name", "A10G\u001b[2J"), EC2 + "answered an unusable value at InstanceTypes[0].GpuInfo."
                                                               "Gpus[0].Name: String should match pattern "
                                                               "'^[ -~]{1,64}$'"),
], ids=["html", "deep", "bad-utf8", "top-level-list", "types-not-a-list", "missing-field", "string-for-number",
        "boolean-count", "negative", "nan", "infinite", "control-in-type", "control-in-gpu-name"])
def test_a_hostile_instance_types_answer_is_one_line_and_writes_nothing(rig, catalog_file, monkeypatch, raw, line):
    assert refused(rig, catalog_file, monkeypatch, raw) == line


PRICES = "error: pricing get-products for g5.12xlarge in us-east-1 "  # the first type offered, by name


def price_list(usd) -> bytes:
    product = {"product": {"attributes": {"instanceType": "g5.xlarge"}}, "terms": {"OnDemand": {"T": {
        "priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}}
    return json.dumps({"FormatVersion": "aws_v1", "PriceList": [json.dumps(product)]}).encode()


@pytest.mark.parametrize("raw, line", [
    (b'{"FormatVersion": "aws_v1", "PriceList": "g5"}', PRICES + "answered no PriceList list"),
    (b'{"FormatVersion": "aws_v1", "PriceList": ["{not json"]}', PRICES + "did not answer JSON"),
    (price_list("NaN"), PRICES + "answered a USD price that is not a decimal number of dollars"),
    (price_list("-1.006"), PRICES + "answered a USD price that is not a decimal number of dollars"),
    (price_list("1e3"), PRICES + "answered a USD price that is not a decimal number of dollars"),
    (price_list(1.006), PRICES + "answered an unusable value at terms.OnDemand.T.priceDimensions.D.pricePerUnit.USD: "
                                 "Input should be a valid string"),
], ids=["price-list-not-a-list", "entry-not-json", "nan", "negative", "exponent", "number-not-text"])
def test_a_hostile_price_answer_is_one_line_and_writes_nothing(rig, catalog_file, monkeypatch, raw, line):
    assert refused(rig, catalog_file, monkeypatch, raw, pricing=True) == line


@pytest.mark.parametrize("content, reason", [
    (b"[]", "not a JSON object"),
    (b"\xff\xfe", "it is not UTF-8 JSON"),
    (b'{"instances": []}', "instances is not an object of instance types"),
    (b'{"onDemandHourlyUsd": {"us-east-1": {"g5.xlarge": -1}}}', "onDemandHourlyUsd.us-east-1.g5.xlarge is not a "
                                                                 "price > 0"),
    (b'{"sources": "none"}', "sources is not an object"),
    (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "it nests too deep"),
], ids=["list", "not-utf8", "instances-list", "negative-price", "sources-text", "deep"])
def test_an_existing_file_that_is_not_a_catalog_is_refused_before_anything_is_asked(rig, catalog_file, monkeypatch,
                                                                                     content, reason):
    catalog_file.write_bytes(content)
    assert refused(rig, catalog_file, monkeypatch, code=exit_codes.USAGE) == (
        f"error: {catalog_file} is not an instance catalog ({reason}); restore it from git or remove it")
