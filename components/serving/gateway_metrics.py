"""The gateway as the autoscalers see it: where it runs and the series that says a model is wanted.

Apart from ``gateway.py`` so the model servers' KEDA triggers can read the gateway's demand without
importing the gateway component (which itself names the model servers' pods in its network policy).
"""

from __future__ import annotations

NAMESPACE = "llm-gateway"
NAME = "llm-gateway"
#: The gateway's per-request counter. LiteLLM 1.109 counts a request that fell back under the model the
#: caller asked for (``requested_model``), so a cold model's demand shows even while Bedrock serves it.
DEMAND_METRIC = "litellm_proxy_total_requests_metric_total"
#: Scrape target labels Prometheus gives the gateway (ServiceMonitor on the Service of that name).
SCRAPE_SELECTOR = f'namespace="{NAMESPACE}",service="{NAME}"'
#: Key of the Secret that holds the scraper's bearer token (the proxy's ``/metrics`` requires auth).
METRICS_SECRET = f"{NAME}-metrics"


def demand_query(model: str, window: str = "2m") -> str:
    """Requests per second the gateway received for ``model``, fallbacks included.

    Reads 0 while the gateway is scraped but the model had no request, and returns nothing when no
    gateway target is up (a broken scrape): KEDA then reports an error and its ``fallback`` holds
    replicas instead of reading a silent 0 as "no demand".
    """
    return (
        f'sum(rate({DEMAND_METRIC}{{requested_model="{model}"}}[{window}]))'
        f" or on() (0 * count(up{{{SCRAPE_SELECTOR}}} == 1))"
    )
