"""Build ``policies/bedrock_prices.json``: each Bedrock fallback model's on-demand USD per million input
and output tokens per region, beside the instance catalog, so the token-cost rules compare a
self-hosted model with what its fallback would have charged (docs/cost-per-token.md).

Source: LiteLLM's cost map (``model_prices_and_context_window.json``) at the gateway's pinned release:
the same figures the gateway's own spend metrics use. A price is looked up as LiteLLM's cost calculator
does for Bedrock: the region's own entry (``bedrock/<region>/<id>``) first, else the id's entry, which
holds the price of its inference profile's geography (``us.``, ``eu.``, ``apac.``, ...) or, for an id
without a profile prefix, LiteLLM's base region us-east-1. Anything else is not priced: no figure is
invented for a region the map does not cover.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from automation import exit_codes
from automation.errors import DriverError
from components import versions
from components.observability.token_cost import BEDROCK_PRICES_PATH
from policies.capacity import bounded_json

#: The table beside the instance catalog, where the token-cost rules read it.
PRICES_PATH = BEDROCK_PRICES_PATH
#: LiteLLM's cost map at the gateway's pinned release.
COST_MAP_URL = (f"https://raw.githubusercontent.com/BerriAI/litellm/{versions.LITELLM_IMAGE.tag}/"
                "model_prices_and_context_window.json")
#: The region LiteLLM's un-prefixed Bedrock prices are for.
BASE_REGION = "us-east-1"
#: Inference-profile prefixes and the region prefixes of their geography.
PROFILE_GEOGRAPHY = {"us": ("us-",), "eu": ("eu-",), "apac": ("ap-",), "jp": ("ap-northeast-",),
                     "au": ("ap-southeast-",), "us-gov": ("us-gov-",), "global": ("",)}
MAX_COST_MAP_BYTES = 64 * 1024 * 1024
DESCRIPTION = (
    "On-demand Amazon Bedrock prices (USD per million tokens, input and output) of the gateway's fallback "
    "models per region, read from LiteLLM's cost map at the gateway's pinned release (the figures its spend "
    "metrics use). The token-cost rules compare each self-hosted model with its first fallback from here. A "
    "model without a price in the gateway's Bedrock region is not compared. Rebuild with `python -m automation "
    "catalog refresh --region R` (docs/cost-per-token.md)."
)


class BedrockPriceError(DriverError):
    """The cost map could not be read or is not what LiteLLM publishes (exit 1)."""

    def __init__(self, message: str):
        super().__init__(message, exit_codes.FAILED)


def fetch_cost_map(url: str = COST_MAP_URL, timeout: float = 60.0) -> dict[str, Any]:
    """LiteLLM's cost map from ``url`` (HTTPS, or a local file/server in tests)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the URL is the project's or the caller's
            body = response.read(MAX_COST_MAP_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise BedrockPriceError(f"the Bedrock price source {url[:200]} did not answer: {str(exc)[:200]}") from None
    if len(body) > MAX_COST_MAP_BYTES:
        raise BedrockPriceError(f"the Bedrock price source {url[:200]} answered more than {MAX_COST_MAP_BYTES} bytes")
    try:
        answer = bounded_json.loads(body)
    except ValueError:
        raise BedrockPriceError(f"the Bedrock price source {url[:200]} did not answer JSON") from None
    if not isinstance(answer, dict):
        raise BedrockPriceError(f"the Bedrock price source {url[:200]} did not answer a JSON object of models")
    return answer


def _applies(model_id: str, region: str) -> bool:
    prefix = model_id.split(".", 1)[0]
    if prefix in PROFILE_GEOGRAPHY and model_id.count(".") >= 2:
        return region.startswith(PROFILE_GEOGRAPHY[prefix]) and not (prefix == "us" and region.startswith("us-gov-"))
    return region == BASE_REGION


def _per_million(entry: Mapping[str, Any], key: str) -> float | None:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return round(float(value) * 1_000_000, 6)


def price_of(cost_map: Mapping[str, Any], region: str, model_id: str) -> dict[str, float] | None:
    """``{"input", "output"}`` USD per million tokens of ``model_id`` in ``region``, or ``None``."""
    entry = cost_map.get(f"bedrock/{region}/{model_id}")
    if not isinstance(entry, dict):
        entry = cost_map.get(model_id) if _applies(model_id, region) else None
    if not isinstance(entry, dict):
        return None
    prices = {"input": _per_million(entry, "input_cost_per_token"), "output": _per_million(entry, "output_cost_per_token")}
    if prices["input"] is None:
        return None
    return {"input": prices["input"], "output": prices["output"] or 0.0}


def merged(existing: Mapping[str, Any] | None, cost_map: Mapping[str, Any], regions: Iterable[str],
           models: Iterable[str], *, source: str) -> dict[str, Any]:
    """``existing`` with the named regions' prices of ``models`` replaced from ``cost_map``."""
    base = dict(existing or {})
    tables = {region: dict(table) for region, table in (base.get("usdPerMillionTokens") or {}).items()}
    sources = dict(base.get("sources") or {})
    wanted = sorted(set(models))
    for region in regions:
        table = {}
        for model_id in wanted:
            price = price_of(cost_map, region, model_id)
            if price is not None:
                table[model_id] = price
        tables[region] = table
        sources[region] = source
    return {
        "description": DESCRIPTION,
        "sources": dict(sorted(sources.items())),
        "usdPerMillionTokens": {region: dict(sorted(tables[region].items())) for region in sorted(tables)},
    }


def models_in(table: Mapping[str, Any] | None) -> list[str]:
    """Every Bedrock model id the table prices in any region."""
    return sorted({m for prices in ((table or {}).get("usdPerMillionTokens") or {}).values() for m in prices})


def render(table: Mapping[str, Any]) -> str:
    return json.dumps(table, indent=2) + "\n"


def refreshed(path: Path, url: str, regions: Sequence[str], extra_models: Iterable[str], *, fetched_on: str) -> str:
    """The Bedrock price table at ``path`` with ``regions`` priced again from the cost map at ``url``:
    every model the table already prices, and ``extra_models``. Nothing is written here."""
    try:
        existing = json.loads(path.read_text())
    except FileNotFoundError:
        existing = None
    except ValueError:
        raise BedrockPriceError(f"{path} is not JSON; restore it from git or remove it") from None
    cost_map = fetch_cost_map(url)
    models = [*models_in(existing), *extra_models]
    return render(merged(existing, cost_map, regions, models, source=f"LiteLLM cost map {url}, fetched {fetched_on}"))
