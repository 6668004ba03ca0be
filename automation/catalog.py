"""Build ``policies/instance_catalog.json`` from the AWS APIs, through the ``aws`` CLI.

Facts (GPU model, count and memory, vCPU, memory, ENI and IPv4 limits, network bandwidth, local
NVMe) come from ``aws ec2 describe-instance-types`` in each region; on-demand Linux prices from the
AWS Price List (``aws pricing get-products``, served from us-east-1 for every region). The facts are
the same in every region that offers a type, so they are merged; prices are kept per region, and a
refresh of some regions keeps the other regions' prices and their sources. See docs/catalog.md.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from automation import exit_codes
from automation.errors import DriverError
from policies.capacity import bounded_json
from policies.capacity.instances import CATALOG_PATH, max_pods_for

#: Every NVIDIA GPU family EC2 sells on x86_64 that schedules whole GPUs (docs/catalog.md says what is
#: left out: g5g is arm64, g6f/gr6f hand out GPU fractions, p6e-gb200 is arm64 Grace sold as UltraServers).
GPU_FAMILIES = ("g4dn", "g5", "g6", "gr6", "g6e", "g7", "g7e", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200",
                "p6-b300")
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
            done = subprocess.run(command, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise CatalogError(f"`aws {' '.join(args[:2])}` did not answer within {timeout:g} s") from None
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", errors="replace")
            lines = [_printable(line.strip()) for line in stderr.splitlines() if line.strip()]
            raise CatalogError(f"`aws {' '.join(args[:2])}` failed: {lines[-1] if lines else f'exit {done.returncode}'}")
        try:
            return done.stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CatalogError(f"`aws {' '.join(args[:2])}` answered bytes that are not UTF-8 (at byte {exc.start})",
                               exit_codes.FAILED) from None

    return run


def _json(text: str, what: str) -> Any:
    try:
        return bounded_json.loads(text)
    except ValueError:
        raise CatalogError(f"{what} did not answer JSON", exit_codes.FAILED) from None


def describe_instance_types(run: Runner, region: str, families: Iterable[str]) -> list[InstanceTypeItem]:
    """DescribeInstanceTypes for every size of ``families`` offered in ``region`` (the CLI pages), each item
    checked against the shape the catalog reads (:class:`InstanceTypeItem`) before anything uses it."""
    values = ",".join(f"{family}.*" for family in families)
    what = f"ec2 describe-instance-types in {region}"
    answer = _json(run(["ec2", "describe-instance-types", "--region", region,
                        "--filters", f"Name=instance-type,Values={values}"]), what)
    try:
        return _DescribeAnswer.model_validate(answer).instance_types
    except ValidationError as exc:
        raise CatalogError(f"{what} answered {_first_error(exc)}", exit_codes.FAILED) from None


# --- the shapes of the answers the catalog reads ----------------------------------------------------------
# Strict: a number written as text, a boolean for a count, a negative or non-finite figure, a name with
# control characters are all refused with the field's path, and nothing of such an answer is written.

_Count = Annotated[int, Field(ge=0, le=10_000_000)]
_Figure = Annotated[float, Field(ge=0, le=10_000_000)]
#: Instance type names as EC2 writes them (``g5.xlarge``, ``p6-b200.48xlarge``).
_TypeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,31}\.[a-z0-9-]{1,32}$")]
#: Printable ASCII only: the GPU's name becomes a Karpenter label value and a line of the catalog.
_Text = Annotated[str, StringConstraints(pattern=r"^[ -~]{0,64}$")]


class _Shape(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False, frozen=True)


class _Size(_Shape):
    size_in_mi_b: _Count = Field(alias="SizeInMiB")


class _Gpu(_Shape):
    name: Annotated[str, StringConstraints(pattern=r"^[ -~]{1,64}$")] = Field(alias="Name")
    manufacturer: _Text = Field(alias="Manufacturer", default="")
    count: _Count = Field(alias="Count", default=0)
    memory_info: _Size = Field(alias="MemoryInfo")


class _GpuInfo(_Shape):
    gpus: list[_Gpu] = Field(alias="Gpus", default_factory=list)


class _VCpus(_Shape):
    default_v_cpus: Annotated[int, Field(ge=1, le=100_000)] = Field(alias="DefaultVCpus")


class _NetworkCard(_Shape):
    network_card_index: _Count = Field(alias="NetworkCardIndex", default=0)
    maximum_network_interfaces: _Count | None = Field(alias="MaximumNetworkInterfaces", default=None)
    baseline_bandwidth_in_gbps: _Figure | None = Field(alias="BaselineBandwidthInGbps", default=None)


class _EfaInfo(_Shape):
    maximum_efa_interfaces: _Count = Field(alias="MaximumEfaInterfaces", default=0)


class _Network(_Shape):
    maximum_network_interfaces: _Count | None = Field(alias="MaximumNetworkInterfaces", default=None)
    ipv4_addresses_per_interface: Annotated[int, Field(ge=1, le=10_000)] = Field(alias="Ipv4AddressesPerInterface")
    default_network_card_index: _Count = Field(alias="DefaultNetworkCardIndex", default=0)
    network_cards: list[_NetworkCard] = Field(alias="NetworkCards", default_factory=list)
    efa_supported: bool = Field(alias="EfaSupported", default=False)
    efa_info: _EfaInfo | None = Field(alias="EfaInfo", default=None)


class _Storage(_Shape):
    total_size_in_gb: _Count | None = Field(default=None, alias="TotalSizeInGB")
    nvme_support: _Text = Field(alias="NvmeSupport", default="unsupported")


class InstanceTypeItem(_Shape):
    """One DescribeInstanceTypes item, the fields the catalog reads (EC2 API reference, InstanceTypeInfo)."""

    instance_type: _TypeName = Field(alias="InstanceType")
    v_cpu_info: _VCpus = Field(alias="VCpuInfo")
    memory_info: _Size = Field(alias="MemoryInfo")
    gpu_info: _GpuInfo | None = Field(alias="GpuInfo", default=None)
    network_info: _Network = Field(alias="NetworkInfo")
    instance_storage_info: _Storage | None = Field(alias="InstanceStorageInfo", default=None)


class _DescribeAnswer(_Shape):
    instance_types: list[InstanceTypeItem] = Field(alias="InstanceTypes", default_factory=list)


def _first_error(exc: ValidationError) -> str:
    """The first problem of an answer as ``path: reason``; the offending value itself is not echoed."""
    error = exc.errors()[0]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
    return f"an unusable value at {path or 'the top level'}: {error['msg']}"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)[:300]


def instance_facts(item: InstanceTypeItem | Mapping[str, Any]) -> dict[str, Any]:
    """One catalog entry from one DescribeInstanceTypes item (the labels Karpenter derives from it)."""
    if not isinstance(item, InstanceTypeItem):
        item = InstanceTypeItem.model_validate(item)
    name = item.instance_type
    family = name.split(".", 1)[0]
    network = item.network_info
    card_enis = next((c.maximum_network_interfaces for c in network.network_cards
                      if c.network_card_index == network.default_network_card_index), None)
    enis = card_enis if card_enis is not None else network.maximum_network_interfaces
    if enis is None:
        raise CatalogError(f"{name}: the answer gives no MaximumNetworkInterfaces", exit_codes.FAILED)
    ips = network.ipv4_addresses_per_interface
    gpus = item.gpu_info.gpus if item.gpu_info else []
    entry: dict[str, Any] = {
        "category": re.match(r"[a-z]+", family).group(0),  # type: ignore[union-attr]
        "family": family,
        "vcpu": item.v_cpu_info.default_v_cpus,
        "memoryMiB": item.memory_info.size_in_mi_b,
        "gpus": sum(g.count for g in gpus),
    }
    if gpus:
        entry["gpuName"] = re.sub(r"\s+", "-", gpus[0].name.strip().lower())
        entry["gpuManufacturer"] = gpus[0].manufacturer.lower()
        entry["gpuMemoryMiB"] = gpus[0].memory_info.size_in_mi_b
    entry["defaultMaxEnis"] = enis
    entry["ipv4PerEni"] = ips
    entry["maxPods"] = max_pods_for(enis, ips)
    baseline = sum(c.baseline_bandwidth_in_gbps or 0 for c in network.network_cards)
    if baseline:
        entry["networkBandwidthMbps"] = int(round(baseline * 1000))
    efa = (network.efa_info.maximum_efa_interfaces if network.efa_info else 0) if network.efa_supported else 0
    if efa:
        entry["efaInterfaces"] = efa
    storage = item.instance_storage_info
    if storage is not None and storage.total_size_in_gb and storage.nvme_support != "unsupported":
        entry["localNvmeGB"] = storage.total_size_in_gb
    return entry


def on_demand_price(run: Runner, region: str, instance_type: str) -> float | None:
    """The on-demand Linux USD/hour of ``instance_type`` in ``region``; ``None`` if the list has none."""
    filters = [("instanceType", instance_type), ("regionCode", region), *PRICE_FILTERS]
    args = ["pricing", "get-products", "--region", PRICING_ENDPOINT_REGION, "--service-code", "AmazonEC2",
            "--filters", *(f"Type=TERM_MATCH,Field={field},Value={value}" for field, value in filters)]
    what = f"pricing get-products for {instance_type} in {region}"
    answer = _json(run(args), what)
    entries = answer.get("PriceList") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        raise CatalogError(f"{what} answered no PriceList list", exit_codes.FAILED)
    prices = set()
    for text in entries:
        product = _json(text, what) if isinstance(text, str) else text
        try:
            terms = _Product.model_validate(product).terms.on_demand
        except ValidationError as exc:
            raise CatalogError(f"{what} answered {_first_error(exc)}", exit_codes.FAILED) from None
        for term in terms.values():
            for dimension in term.price_dimensions.values():
                usd = dimension.price_per_unit.get("USD")
                if usd is None or dimension.unit != "Hrs":
                    continue
                if not _USD.match(usd):
                    raise CatalogError(f"{what} answered a USD price that is not a decimal number of dollars",
                                       exit_codes.FAILED)
                if float(usd) > 0:  # zero: a reservation's or a free-tier line, not the on-demand rate
                    prices.add(float(usd))
    if len(prices) > 1:
        raise CatalogError(f"the Price List has {len(prices)} on-demand Linux prices for {instance_type} in {region}: "
                           f"{', '.join(f'{p:g}' for p in sorted(prices))}", exit_codes.FAILED)
    return prices.pop() if prices else None


#: The Price List writes prices as decimal text ("1.0060000000"); nothing else is a price.
_USD = re.compile(r"^\d{1,7}(\.\d{1,12})?$")


class _PriceDimension(_Shape):
    unit: _Text = Field(alias="unit", default="")
    price_per_unit: dict[str, str] = Field(alias="pricePerUnit", default_factory=dict)


class _OnDemandTerm(_Shape):
    price_dimensions: dict[str, _PriceDimension] = Field(alias="priceDimensions", default_factory=dict)


class _Terms(_Shape):
    on_demand: dict[str, _OnDemandTerm] = Field(default_factory=dict, alias="OnDemand")


class _Product(_Shape):
    terms: _Terms = Field(alias="terms", default_factory=_Terms)


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
        offered[region] = sorted(item.instance_type for item in items)
        for item in items:
            instances.setdefault(item.instance_type, instance_facts(item))
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
    """The catalog file, or ``None`` when it does not exist yet; a file that is not a catalog is refused
    before anything is fetched, so a refresh never merges into (and writes back) what it cannot read."""
    try:
        data = bounded_json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        reason = "it nests too deep" if "nested deeper" in str(exc) else "it is not UTF-8 JSON"
        raise CatalogError(f"{path} is not an instance catalog ({reason}); restore it from git or remove it",
                           exit_codes.USAGE) from None
    problem = _catalog_problem(data)
    if problem:
        raise CatalogError(f"{path} is not an instance catalog ({problem}); restore it from git or remove it",
                           exit_codes.USAGE)
    return data


def _catalog_problem(data: Any) -> str | None:
    """What makes ``data`` no catalog: the tables a refresh merges into must have their shapes."""
    if not isinstance(data, dict):
        return "not a JSON object"
    instances = data.get("instances", {})
    if not isinstance(instances, dict) or not all(isinstance(v, dict) for v in instances.values()):
        return "instances is not an object of instance types"
    prices = data.get("onDemandHourlyUsd", {})
    if not isinstance(prices, dict) or not all(isinstance(t, dict) for t in prices.values()):
        return "onDemandHourlyUsd is not an object of regions"
    for region, table in prices.items():
        for name, usd in table.items():
            if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not 0 < usd < math.inf:
                return f"onDemandHourlyUsd.{_printable(region)[:20]}.{_printable(name)[:40]} is not a price > 0"
    if not isinstance(data.get("sources", {}), dict):
        return "sources is not an object"
    return None
