"""Build ``policies/instance_catalog.json`` from the AWS APIs, through the ``aws`` CLI.

Facts (GPU model, count and memory, vCPU, memory, ENI and IPv4 limits, network bandwidth, local
NVMe) come from ``aws ec2 describe-instance-types`` in each region; on-demand Linux prices from the
AWS Price List (``aws pricing get-products``, served from us-east-1 for every region). The facts are
the same in every region that offers a type, so they are merged; prices are kept per region, and a
refresh of some regions keeps the other regions' prices and their sources. See docs/catalog.md.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from automation import exit_codes
from automation.errors import DriverError
from policies.capacity import bounded_json
from policies.capacity.instances import CATALOG_PATH, max_pods_for

#: Every current NVIDIA GPU family on x86_64 that schedules whole GPUs (docs/catalog.md says what is
#: left out: g6f/gr6f hand out GPU fractions, p6e-gb200 is arm64 Grace and sold as UltraServers).
GPU_FAMILIES = ("g4dn", "g5", "g6", "gr6", "g6e", "g7e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300")
#: CPU types the platform's system pools use, refreshed with the GPU families.
SYSTEM_FAMILIES = ("m7i",)
DEFAULT_FAMILIES = SYSTEM_FAMILIES + GPU_FAMILIES
#: The Price List API answers from us-east-1 (and a few others) for every region's prices.
PRICING_ENDPOINT_REGION = "us-east-1"
#: The filters that leave one product per type: Linux without a licence, shared tenancy, no
#: pre-installed software, and the "Used" capacity status (the others bill reservations' unused or
#: allocated hours), as in the Price List examples of the AWS provider's ``pricing.getProduct``.
PRICE_FILTERS = (("operatingSystem", "Linux"), ("licenseModel", "No License required"), ("tenancy", "Shared"),
                 ("preInstalledSw", "NA"), ("capacitystatus", "Used"))
HOURS_PER_MONTH = 730
DESCRIPTION = (
    "EC2 instance facts (region-independent) and on-demand Linux prices per region (USD per hour). The single "
    "price and GPU table for both the program's cost report and the policy pack's budget checks; it lives inside "
    "policies/ because a published pack must be self-contained. A type without a price in a region is not priced "
    "there: cost figures refuse it. Rebuild with `python -m automation catalog refresh --region R` (docs/catalog.md)."
)
MAX_PODS_SOURCE = (
    "maxPods: ENI-limited pods per node as nodeadm computes them: ENIs of the default network card x (IPv4 per "
    "ENI - 1) + 2 (awslabs/amazon-eks-ami nodeadm/internal/kubelet/eni_max_pods.go, nodeadm/internal/util/ec2.go)."
)


class CatalogError(DriverError):
    """The AWS CLI is missing or denied (exit 5, preflight), or answered something unusable (exit 1)."""

    def __init__(self, message: str, code: int = exit_codes.PREFLIGHT):
        super().__init__(message, code)


Runner = Callable[[Sequence[str]], str]


def aws_runner(timeout: float = 120.0) -> Runner:
    """Run ``aws ARGS --output json``; its stdout, or :class:`CatalogError` with the CLI's error line."""
    if shutil.which("aws") is None:
        raise CatalogError("the aws CLI is not on PATH; install AWS CLI v2 "
                           "(https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html)")

    def run(args: Sequence[str]) -> str:
        command = ["aws", *args, "--output", "json"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise CatalogError(f"`aws {' '.join(args[:2])}` did not answer within {timeout:g} s") from None
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            raise CatalogError(f"`aws {' '.join(args[:2])}` failed: {lines[-1] if lines else f'exit {done.returncode}'}")
        return done.stdout

    return run


def _json(text: str, what: str) -> Any:
    try:
        return bounded_json.loads(text)
    except ValueError:
        raise CatalogError(f"{what} did not answer JSON", exit_codes.FAILED) from None


def describe_instance_types(run: Runner, region: str, families: Iterable[str]) -> list[dict[str, Any]]:
    """DescribeInstanceTypes for every size of ``families`` offered in ``region`` (the CLI pages)."""
    values = ",".join(f"{family}.*" for family in families)
    answer = _json(run(["ec2", "describe-instance-types", "--region", region,
                        "--filters", f"Name=instance-type,Values={values}"]), "ec2 describe-instance-types")
    return list(answer.get("InstanceTypes") or [])


def instance_facts(item: Mapping[str, Any]) -> dict[str, Any]:
    """One catalog entry from one DescribeInstanceTypes item (the labels Karpenter derives from it)."""
    name = item["InstanceType"]
    family = name.split(".", 1)[0]
    network = item.get("NetworkInfo") or {}
    default_card = network.get("DefaultNetworkCardIndex", 0)
    cards = network.get("NetworkCards") or []
    card_enis = next((c.get("MaximumNetworkInterfaces") for c in cards if c.get("NetworkCardIndex", 0) == default_card),
                     None)
    enis = int(card_enis if card_enis is not None else network["MaximumNetworkInterfaces"])
    ips = int(network["Ipv4AddressesPerInterface"])
    gpus = (item.get("GpuInfo") or {}).get("Gpus") or []
    entry: dict[str, Any] = {
        "category": re.match(r"[a-z]+", family).group(0),  # type: ignore[union-attr]
        "family": family,
        "vcpu": int(item["VCpuInfo"]["DefaultVCpus"]),
        "memoryMiB": int(item["MemoryInfo"]["SizeInMiB"]),
        "gpus": sum(int(g.get("Count", 0)) for g in gpus),
    }
    if gpus:
        entry["gpuName"] = re.sub(r"\s+", "-", str(gpus[0]["Name"]).strip().lower())
        entry["gpuManufacturer"] = str(gpus[0].get("Manufacturer", "")).lower()
        entry["gpuMemoryMiB"] = int(gpus[0]["MemoryInfo"]["SizeInMiB"])
    entry["defaultMaxEnis"] = enis
    entry["ipv4PerEni"] = ips
    entry["maxPods"] = max_pods_for(enis, ips)
    baseline = sum(float(c.get("BaselineBandwidthInGbps") or 0) for c in cards)
    if baseline:
        entry["networkBandwidthMbps"] = int(round(baseline * 1000))
    efa = int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0) if network.get("EfaSupported") else 0
    if efa:
        entry["efaInterfaces"] = efa
    storage = item.get("InstanceStorageInfo") or {}
    if storage.get("TotalSizeInGB") and storage.get("NvmeSupport", "unsupported") != "unsupported":
        entry["localNvmeGB"] = int(storage["TotalSizeInGB"])
    return entry


def on_demand_price(run: Runner, region: str, instance_type: str) -> float | None:
    """The on-demand Linux USD/hour of ``instance_type`` in ``region``; ``None`` if the list has none."""
    filters = [("instanceType", instance_type), ("regionCode", region), *PRICE_FILTERS]
    args = ["pricing", "get-products", "--region", PRICING_ENDPOINT_REGION, "--service-code", "AmazonEC2",
            "--filters", *(f"Type=TERM_MATCH,Field={field},Value={value}" for field, value in filters)]
    answer = _json(run(args), "pricing get-products")
    prices = set()
    for text in answer.get("PriceList") or []:
        product = _json(text, "a PriceList entry") if isinstance(text, str) else text
        for term in ((product.get("terms") or {}).get("OnDemand") or {}).values():
            for dimension in (term.get("priceDimensions") or {}).values():
                usd = (dimension.get("pricePerUnit") or {}).get("USD")
                if usd is not None and dimension.get("unit") == "Hrs" and float(usd) > 0:
                    prices.add(float(usd))
    if len(prices) > 1:
        raise CatalogError(f"the Price List has {len(prices)} on-demand Linux prices for {instance_type} in {region}: "
                           f"{', '.join(f'{p:g}' for p in sorted(prices))}", exit_codes.FAILED)
    return prices.pop() if prices else None


@dataclass(frozen=True)
class Fetched:
    """What the APIs said: facts per type, prices per region, and which regions offer which types."""

    instances: dict[str, dict[str, Any]]
    prices: dict[str, dict[str, float]]
    offered: dict[str, list[str]]


def fetch(run: Runner, regions: Sequence[str], families: Sequence[str]) -> Fetched:
    instances: dict[str, dict[str, Any]] = {}
    prices: dict[str, dict[str, float]] = {}
    offered: dict[str, list[str]] = {}
    for region in regions:
        items = describe_instance_types(run, region, families)
        offered[region] = sorted(item["InstanceType"] for item in items)
        for item in items:
            instances.setdefault(item["InstanceType"], instance_facts(item))
        prices[region] = {}
        for name in offered[region]:
            price = on_demand_price(run, region, name)
            if price is not None:
                prices[region][name] = price
    return Fetched(instances, prices, offered)


def merged(existing: Mapping[str, Any] | None, fetched: Fetched, *, fetched_on: str) -> dict[str, Any]:
    """``existing`` (the catalog file) with the fetched facts and regions' prices replacing theirs."""
    base = dict(existing or {})
    instances = dict(base.get("instances") or {})
    instances.update(fetched.instances)
    prices = {region: dict(table) for region, table in (base.get("onDemandHourlyUsd") or {}).items()}
    sources = dict((base.get("sources") or {}).get("prices") or {})
    for region, table in fetched.prices.items():
        prices[region] = {**prices.get(region, {}), **table}
        sources[region] = (f"aws pricing get-products (AmazonEC2, regionCode {region}, Linux, Shared, NA, Used; "
                           f"OnDemand pricePerUnit.USD), fetched {fetched_on}")
    fact_sources = dict((base.get("sources") or {}).get("facts") or {})
    for region in fetched.offered:
        fact_sources[region] = f"aws ec2 describe-instance-types --region {region}, fetched {fetched_on}"
    return {
        "description": DESCRIPTION,
        "sources": {**(base.get("sources") or {}), "facts": fact_sources, "maxPods": MAX_PODS_SOURCE, "prices": sources},
        "hoursPerMonth": base.get("hoursPerMonth", HOURS_PER_MONTH),
        "instances": instances,
        "onDemandHourlyUsd": {region: dict(sorted(prices[region].items(), key=lambda kv: _order(kv[0])))
                              for region in sorted(prices)},
    }


def _order(name: str) -> tuple[str, float]:
    """Family, then size (xlarge < 2xlarge < ... < metal) so the file reads like AWS's tables."""
    family, _, size = name.partition(".")
    number = re.match(r"(\d*)xlarge$", size)
    rank = {"medium": 0.25, "large": 0.5}.get(size, float(number.group(1) or 1) if number else 10_000.0)
    return family, rank


def render(catalog: Mapping[str, Any]) -> str:
    """The catalog file's text: one instance type per line, so a refresh diffs line by line."""
    instances = catalog["instances"]
    names = sorted(instances, key=_order)
    lines = ["{"]
    for key in ("description", "sources", "hoursPerMonth"):
        lines.append(f"  {json.dumps(key)}: {json.dumps(catalog[key], indent=2).replace(chr(10), chr(10) + '  ')},")
    lines.append('  "instances": {')
    for i, name in enumerate(names):
        comma = "," if i < len(names) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {json.dumps(instances[name])}{comma}")
    lines.append("  },")
    lines.append('  "onDemandHourlyUsd": {')
    regions = list(catalog["onDemandHourlyUsd"])
    for i, region in enumerate(regions):
        table = catalog["onDemandHourlyUsd"][region]
        lines.append(f"    {json.dumps(region)}: {{")
        for j, name in enumerate(table):
            lines.append(f"      {json.dumps(name)}: {json.dumps(table[name])}{',' if j < len(table) - 1 else ''}")
        lines.append("    }" + ("," if i < len(regions) - 1 else ""))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def read_catalog(path: Path = CATALOG_PATH) -> dict[str, Any] | None:
    """The catalog file, or ``None`` when it does not exist yet."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise CatalogError(f"{path} is not JSON ({exc}); restore it from git or remove it", exit_codes.USAGE) from None
