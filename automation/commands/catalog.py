"""``catalog refresh``: rebuild ``policies/instance_catalog.json`` from the AWS APIs (docs/catalog.md).

Runs the ``aws`` CLI with the caller's credentials: ``ec2 describe-instance-types`` in each region,
``pricing get-products`` for each type offered there. Regions not named keep their prices.
"""

from __future__ import annotations

import argparse
import datetime
import re
from pathlib import Path

from automation import bedrock_prices, exit_codes
from automation.catalog import DEFAULT_FAMILIES, aws_runner, fetch, merged, read_catalog, render
from automation.console import err
from automation.errors import UsageError
from automation.images.pins import write_atomically
from components.settings._base import check_region, partition_of
from policies.capacity.instances import CATALOG_PATH

_FAMILY = re.compile(r"^[a-z][a-z0-9-]{0,15}$")


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "catalog", help="the instance catalog: rebuild it from the AWS APIs",
        description="The EC2 instance catalog (policies/instance_catalog.json) the settings and the policy pack "
        "price and size nodes with.",
    )
    actions = parser.add_subparsers(dest="catalog_verb", required=True, metavar="ACTION")
    refresh = actions.add_parser(
        "refresh", help="rebuild instance facts and on-demand prices for regions from the AWS APIs",
        description="Ask `aws ec2 describe-instance-types` (GPU model, count and memory, vCPU, memory, ENI and "
        "IPv4 limits, network bandwidth, local NVMe) and the AWS Price List (`aws pricing get-products`, on-demand "
        "Linux, shared tenancy) for every size of the families in each region, and write the catalog: the named "
        "regions' prices are replaced, other regions' kept. Needs AWS credentials allowed "
        "ec2:DescribeInstanceTypes and pricing:GetProducts. Exit codes: 0 written, 2 bad command line, "
        "5 the aws CLI missing or denied, 1 an unusable answer.",
    )
    refresh.add_argument("--region", action="append", required=True, type=_region, metavar="REGION",
                         help="an AWS region to describe and price (repeatable), e.g. eu-west-1")
    refresh.add_argument("--families", type=_families, default=DEFAULT_FAMILIES, metavar="F1,F2",
                         help=f"instance families, comma-separated (default: {','.join(DEFAULT_FAMILIES)})")
    refresh.add_argument("--out", type=Path, default=CATALOG_PATH, metavar="PATH",
                         help="the catalog file to update (default: policies/instance_catalog.json)")
    # Bedrock fallback prices per region, beside the catalog (docs/cost-per-token.md).
    refresh.add_argument("--bedrock-prices-url", default=bedrock_prices.COST_MAP_URL, metavar="URL",
                         help="LiteLLM's cost map the Bedrock fallback prices are read from (default: the gateway's pinned "
                         "release on GitHub)")
    refresh.add_argument("--bedrock-model", action="append", default=[], metavar="ID",
                         help="a Bedrock model id to price besides those policies/bedrock_prices.json has (repeatable)")
    refresh.add_argument("--no-bedrock-prices", action="store_true",
                         help="leave policies/bedrock_prices.json as it is")
    refresh.add_argument("--bedrock-out", type=Path, default=bedrock_prices.PRICES_PATH, metavar="PATH",
                         help="the Bedrock price table to update (default: policies/bedrock_prices.json)")
    refresh.set_defaults(run=_run_refresh)


def _region(text: str) -> str:
    try:
        region = check_region(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if partition_of(region) not in ("aws", "aws-us-gov"):
        raise argparse.ArgumentTypeError(f"{region}: the public AWS Price List (USD) does not price the "
                                         f"{partition_of(region)} partition")
    return region


def _families(text: str) -> tuple[str, ...]:
    families = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in families if not _FAMILY.match(f)]
    if not families or bad:
        raise argparse.ArgumentTypeError(f"{(bad or [text])[0][:40]!r} is not an instance family such as g5 or p5en")
    return families


def _run_refresh(args: argparse.Namespace) -> int:
    out: Path = args.out
    if not out.parent.is_dir():
        raise UsageError(f"--out: directory {out.parent} does not exist")
    if not args.no_bedrock_prices and not args.bedrock_out.parent.is_dir():
        raise UsageError(f"--bedrock-out: directory {args.bedrock_out.parent} does not exist")
    regions = list(dict.fromkeys(args.region))
    existing = read_catalog(out)
    fetched = fetch(aws_runner(), regions, args.families)
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    catalog = merged(existing, fetched, fetched_on=today)
    bedrock = None if args.no_bedrock_prices else bedrock_prices.refreshed(
        args.bedrock_out, args.bedrock_prices_url, regions, args.bedrock_model, fetched_on=today)
    for path, text in ((out, render(catalog)), (args.bedrock_out, bedrock)):
        if text is None:
            continue
        if not path.exists():
            path.touch(mode=0o644)  # write_atomically keeps the mode of the file it replaces
        write_atomically(path, text.encode())
    for region in regions:
        unpriced = [n for n in fetched.offered[region] if n not in fetched.prices[region]]
        err.print(f"{region}: {len(fetched.offered[region])} type(s) offered, {len(fetched.prices[region])} priced"
                  + (f"; no on-demand Linux price for {', '.join(unpriced)}" if unpriced else ""))
    err.print(f"wrote {out}" + ("" if bedrock is None else f" and {args.bedrock_out}"))
    return exit_codes.OK
