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
#: When that counter's series for a model was created: prometheus_client exposes every counter
#: child's creation time as ``<name>_created`` (LiteLLM leaves it on), i.e. the gateway process's
#: first request for the model. A series created within the window is new demand, not a counter
#: Prometheus merely had not seen before (after a Prometheus restart, say).
DEMAND_CREATED = "litellm_proxy_total_requests_metric_created"
#: Scrape target labels Prometheus gives the gateway (ServiceMonitor on the Service of that name).
SCRAPE_SELECTOR = f'namespace="{NAMESPACE}",service="{NAME}"'
#: Key of the Secret that holds the scraper's bearer token (the proxy's ``/metrics`` requires auth).
METRICS_SECRET = f"{NAME}-metrics"


def demand_query(model: str, window_seconds: int = 120) -> str:
    """Requests per second the gateway received for ``model`` over the window, fallbacks included.

    ``rate()`` needs two samples of a series, and the gateway's counter for a model appears only
    with its first request (at 1): on ``rate()`` alone a cold model's first request reads nothing,
    and it wakes only if a second one arrives within the window. So the requests a series already
    held at its first sample count as arrived within the window when the series was created within
    it (``_created``), beside the rate of what came after: one request wakes the model at the first
    scrape after it, and a Prometheus restart does not read every old count as a burst.

    Reads 0 while the gateway is scraped but the model had no request, and returns nothing when no
    gateway target is up (a broken scrape): KEDA then reports an error and its ``fallback`` holds
    replicas instead of reading a silent 0 as "no demand".
    """
    match = f'{{requested_model="{model}"}}'
    window = f"{window_seconds}s"
    first_counts = (
        f"min_over_time({DEMAND_METRIC}{match}[{window}])"
        f" and (time() - {DEMAND_CREATED}{match} < {window_seconds})"
    )
    return (
        f"((sum(rate({DEMAND_METRIC}{match}[{window}])) or on() vector(0))"
        f" + (sum({first_counts}) / {window_seconds} or on() vector(0)))"
        f" and on() (count(up{{{SCRAPE_SELECTOR}}} == 1) > 0)"
    )
