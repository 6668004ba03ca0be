"""``catalog refresh`` against the aws stand-in answering recorded DescribeInstanceTypes and GetProducts
responses (tests/automation/responses/aws; shapes as the EC2 and Price List APIs answer, eu-west-1's
prices are stand-in figures, not AWS's)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from automation import exit_codes
from automation.catalog import instance_facts
from policies.capacity.cost import node_group_worst_case
from policies.capacity.instances import UnpricedInstanceError, load_instances

RESPONSES = Path(__file__).resolve().parents[1] / "responses" / "aws"

G5_XLARGE = {"category": "g", "family": "g5", "vcpu": 4, "memoryMiB": 16384, "gpus": 1, "gpuName": "a10g",
             "gpuManufacturer": "nvidia", "gpuMemoryMiB": 22888, "defaultMaxEnis": 4, "ipv4PerEni": 15, "maxPods": 58,
             "networkBandwidthMbps": 2500, "localNvmeGB": 250}
G5_12XLARGE = {"category": "g", "family": "g5", "vcpu": 48, "memoryMiB": 196608, "gpus": 4, "gpuName": "a10g",
               "gpuManufacturer": "nvidia", "gpuMemoryMiB": 22888, "defaultMaxEnis": 15, "ipv4PerEni": 50,
               "maxPods": 737, "networkBandwidthMbps": 40000, "localNvmeGB": 3800, "efaInterfaces": 1}
# 64 ENIs over 32 network cards, 2 on the default card: nodeadm counts the default card's (100 pods),
# not the instance's total (64 x 49 + 2 = 3138).
P5_48XLARGE = {"category": "p", "family": "p5", "vcpu": 192, "memoryMiB": 2097152, "gpus": 8, "gpuName": "h100",
               "gpuManufacturer": "nvidia", "gpuMemoryMiB": 81920, "defaultMaxEnis": 2, "ipv4PerEni": 50,
               "maxPods": 100, "networkBandwidthMbps": 3200000, "localNvmeGB": 30400, "efaInterfaces": 32}
P5E_48XLARGE = {**P5_48XLARGE, "family": "p5e", "gpuName": "h200", "gpuMemoryMiB": 144384}

EXISTING = {"description": "old", "sources": {"prices": {"ap-south-1": "typed in by a test"}}, "hoursPerMonth": 730,
            "instances": {"m7i.large": {"category": "m", "family": "m7i", "vcpu": 2, "memoryMiB": 8192, "gpus": 0,
                                        "maxPods": 29}},
            "onDemandHourlyUsd": {"ap-south-1": {"m7i.large": 0.1}, "eu-west-1": {"g5.xlarge": 9.99}}}


@pytest.fixture
def catalog_file(rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STANDIN_AWS_RESPONSES", str(RESPONSES))
    path = tmp_path / "instance_catalog.json"
    path.write_text(json.dumps(EXISTING))
    return path


def refresh(rig, out: Path, *extra: str, bedrock: tuple[str, ...] = ("--no-bedrock-prices",)):
    return rig.run("catalog", "refresh", "--region", "us-east-1", "--region", "eu-west-1", "--families", "g5,p5,p5e",
                   "--out", str(out), *bedrock, *extra)


def test_refresh_builds_facts_and_regional_prices_from_the_recorded_answers(rig, catalog_file):
    result = refresh(rig, catalog_file)
    assert result.code == exit_codes.OK, result.err
    written = json.loads(catalog_file.read_text())
    assert written["instances"] == {"m7i.large": EXISTING["instances"]["m7i.large"], "g5.xlarge": G5_XLARGE,
                                    "g5.12xlarge": G5_12XLARGE, "p5.48xlarge": P5_48XLARGE,
                                    "p5e.48xlarge": P5E_48XLARGE}
    # Windows and reservation-hour products of g5.xlarge are filtered out; p5e is sold as Capacity
    # Blocks only, so the Price List has no on-demand price for it; ap-south-1 was not asked: kept.
    assert written["onDemandHourlyUsd"] == {
        "ap-south-1": {"m7i.large": 0.1},
        "eu-west-1": {"g5.xlarge": 1.123, "g5.12xlarge": 6.331},
        "us-east-1": {"g5.xlarge": 1.006, "g5.12xlarge": 5.672, "p5.48xlarge": 55.04},
    }
    assert written["sources"]["prices"]["ap-south-1"] == "typed in by a test"
    assert written["sources"]["prices"]["eu-west-1"].startswith("aws pricing get-products (AmazonEC2, regionCode eu-west-1")
    assert "no on-demand Linux price for p5e.48xlarge" in result.err


def test_refresh_asks_the_apis_with_the_documented_filters(rig, catalog_file):
    assert refresh(rig, catalog_file).code == exit_codes.OK
    calls = [e["argv"] for e in rig.calls.entries("aws")]
    assert calls[0] == ["ec2", "describe-instance-types", "--region", "us-east-1", "--filters",
                        "Name=instance-type,Values=g5.*,p5.*,p5e.*", "--output", "json"]
    assert ["pricing", "get-products", "--region", "us-east-1", "--service-code", "AmazonEC2", "--filters",
            "Type=TERM_MATCH,Field=instanceType,Value=g5.xlarge", "Type=TERM_MATCH,Field=regionCode,Value=eu-west-1",
            "Type=TERM_MATCH,Field=operatingSystem,Value=Linux",
            "Type=TERM_MATCH,Field=licenseModel,Value=No License required",
            "Type=TERM_MATCH,Field=tenancy,Value=Shared", "Type=TERM_MATCH,Field=preInstalledSw,Value=NA",
            "Type=TERM_MATCH,Field=capacitystatus,Value=Used", "--output", "json"] in calls


def test_the_written_catalog_prices_each_region_apart(rig, catalog_file):
    assert refresh(rig, catalog_file).code == exit_codes.OK
    ireland = load_instances(catalog_file, "eu-west-1")
    assert ireland.instances["g5.xlarge"].hourly_usd == 1.123
    assert load_instances(catalog_file, "us-east-1").instances["g5.xlarge"].hourly_usd == 1.006
    # eu-west-1 has no p5.48xlarge: a node group of it is not priced at Virginia's $55.04.
    with pytest.raises(UnpricedInstanceError, match=r"p5.48xlarge in eu-west-1"):
        node_group_worst_case("ng", 2, [ireland.instances["p5.48xlarge"]])


def test_max_pods_counts_the_default_network_cards_enis():
    items = json.loads((RESPONSES / "ec2-describe-instance-types.us-east-1.json").read_text())["InstanceTypes"]
    p5 = next(i for i in items if i["InstanceType"] == "p5.48xlarge")
    assert p5["NetworkInfo"]["MaximumNetworkInterfaces"] == 64  # the textbook figure would give 3138 pods
    assert instance_facts(p5)["maxPods"] == 100


@pytest.mark.parametrize("argv, flag", [
    (["--region", "eu-nowhere-1"], "--region"),
    (["--region", "cn-north-1"], "--region"),
    (["--region", "us-east-1", "--families", "G5;rm"], "--families"),
    (["--region", "us-east-1", "--families", ","], "--families"),
    (["--families", "g5"], "--region"),
])
def test_bad_flags_are_one_line_and_exit_2(rig, catalog_file, argv, flag):
    result = rig.run("catalog", "refresh", *argv, "--out", str(catalog_file))
    assert result.code == exit_codes.USAGE
    assert len(result.err.strip().splitlines()) == 1 and flag in result.err and "Traceback" not in result.err
    assert rig.calls.entries("aws") == []


def test_an_out_directory_that_does_not_exist_is_a_usage_error(rig, catalog_file, tmp_path):
    result = refresh(rig, tmp_path / "missing" / "catalog.json")
    assert result.code == exit_codes.USAGE and "--out" in result.err


@pytest.mark.parametrize("mode, says", [("pricing-denied", "AccessDeniedException"),
                                        ("no-credentials", "Unable to locate credentials")])
def test_a_denied_cli_exits_preflight_and_leaves_the_file_as_it_was(rig, catalog_file, monkeypatch, mode, says):
    before = catalog_file.read_text()
    monkeypatch.setenv("STANDIN_AWS", mode)
    result = refresh(rig, catalog_file)
    assert result.code == exit_codes.PREFLIGHT
    assert len(result.err.strip().splitlines()) == 1 and says in result.err, result.err
    assert catalog_file.read_text() == before


def test_a_missing_aws_cli_is_named(rig, catalog_file, monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = refresh(rig, catalog_file)
    assert result.code == exit_codes.PREFLIGHT
    assert "aws CLI is not on PATH" in result.err and len(result.err.strip().splitlines()) == 1


# --- Bedrock fallback prices, refreshed with the catalog ----------------------------------------------

#: LiteLLM's cost map as it spells Bedrock entries (per-token USD; a region's own entry under
#: ``bedrock/<region>/<id>``), figures chosen for the test.
COST_MAP = {
    "us.anthropic.claude-haiku-4-5-20251001-v1:0": {"input_cost_per_token": 1.1e-06, "output_cost_per_token": 5.5e-06},
    "eu.anthropic.claude-haiku-4-5-20251001-v1:0": {"input_cost_per_token": 1.2e-06, "output_cost_per_token": 6e-06},
    "cohere.embed-multilingual-v3": {"input_cost_per_token": 1e-07, "output_cost_per_token": 0.0},
    "bedrock/eu-west-1/cohere.embed-multilingual-v3": {"input_cost_per_token": 1.5e-07},
}
TABLE = {"description": "old", "sources": {"ap-south-1": "typed in by a test"},
         "usdPerMillionTokens": {"ap-south-1": {"cohere.embed-multilingual-v3": {"input": 9.0, "output": 0.0}},
                                 "us-east-1": {"us.anthropic.claude-haiku-4-5-20251001-v1:0": {"input": 9.0, "output": 9.0}}}}


class CostMap(ThreadingHTTPServer):
    """Serves ``body`` on 127.0.0.1, as raw.githubusercontent.com would serve the cost map."""

    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/model_prices_and_context_window.json"


@pytest.fixture
def bedrock_file(tmp_path: Path) -> Path:
    path = tmp_path / "bedrock_prices.json"
    path.write_text(json.dumps(TABLE))
    return path


def test_refresh_prices_the_bedrock_fallbacks_of_the_named_regions(rig, catalog_file, bedrock_file):
    server = CostMap(json.dumps(COST_MAP).encode())
    try:
        result = refresh(rig, catalog_file, bedrock=("--bedrock-prices-url", server.url, "--bedrock-out", str(bedrock_file),
                                                     "--bedrock-model", "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
                                                     "--bedrock-model", "cohere.embed-multilingual-v3"))
    finally:
        server.shutdown()
    assert result.code == exit_codes.OK, result.err
    written = json.loads(bedrock_file.read_text())
    # A us. profile is priced in US regions, an eu. one in EU regions; a plain id at its us-east-1 entry
    # or a region's own entry; ap-south-1 was not asked: kept.
    assert written["usdPerMillionTokens"] == {
        "ap-south-1": {"cohere.embed-multilingual-v3": {"input": 9.0, "output": 0.0}},
        "eu-west-1": {"cohere.embed-multilingual-v3": {"input": 0.15, "output": 0.0},
                      "eu.anthropic.claude-haiku-4-5-20251001-v1:0": {"input": 1.2, "output": 6.0}},
        "us-east-1": {"cohere.embed-multilingual-v3": {"input": 0.1, "output": 0.0},
                      "us.anthropic.claude-haiku-4-5-20251001-v1:0": {"input": 1.1, "output": 5.5}},
    }
    assert written["sources"]["eu-west-1"].startswith(f"LiteLLM cost map {server.url}, fetched ")
    assert written["sources"]["ap-south-1"] == "typed in by a test"


@pytest.mark.parametrize("body, says", [(b"<html>rate limited</html>", "did not answer JSON"),
                                        (b"[1, 2, 3]", "did not answer a JSON object of models"),
                                        # Deeper than json's C scanner recurses: refused, not a RecursionError.
                                        (b"[" * 200_000, "did not answer JSON")])
def test_a_bad_cost_map_is_one_line_and_writes_nothing(rig, catalog_file, bedrock_file, body, says):
    before = (catalog_file.read_text(), bedrock_file.read_text())
    server = CostMap(body)
    try:
        result = refresh(rig, catalog_file, bedrock=("--bedrock-prices-url", server.url, "--bedrock-out", str(bedrock_file)))
    finally:
        server.shutdown()
    assert result.code == exit_codes.FAILED
    assert len(result.err.strip().splitlines()) == 1 and says in result.err and "Traceback" not in result.err
    assert (catalog_file.read_text(), bedrock_file.read_text()) == before


def test_an_unreachable_cost_map_is_named(rig, catalog_file, bedrock_file):
    server = CostMap(b"{}")
    url = server.url
    server.shutdown()
    server.server_close()
    result = refresh(rig, catalog_file, bedrock=("--bedrock-prices-url", url, "--bedrock-out", str(bedrock_file)))
    assert result.code == exit_codes.FAILED
    assert "did not answer" in result.err and "127.0.0.1" in result.err and len(result.err.strip().splitlines()) == 1


def test_the_shipped_bedrock_table_is_what_the_pinned_gateway_prices():
    """The shipped table equals what refresh builds from the cost map the pinned LiteLLM ships."""
    from automation.bedrock_prices import merged
    from tests.support.litellm_proxy import GATEWAY_VENV, require_litellm

    require_litellm()
    (cost_map_file,) = GATEWAY_VENV.glob("lib/python*/site-packages/litellm/model_prices_and_context_window_backup.json")
    shipped = json.loads((Path(__file__).resolve().parents[3] / "policies" / "bedrock_prices.json").read_text())
    (region,) = shipped["usdPerMillionTokens"]
    rebuilt = merged(None, json.loads(cost_map_file.read_text()), [region], list(shipped["usdPerMillionTokens"][region]),
                     source="")
    assert rebuilt["usdPerMillionTokens"] == shipped["usdPerMillionTokens"]
    assert shipped["usdPerMillionTokens"]["us-east-1"]["us.anthropic.claude-sonnet-4-5-20250929-v1:0"] == {"input": 3.3, "output": 16.5}
