"""Alertmanager configuration from the stack's alerting settings: receivers (Slack, PagerDuty, SNS,
webhook), routes by severity and tier, and inhibition of warnings by a critical alert.

The result holds credentials: the caller keeps it a Pulumi secret. ``amtool check-config`` and
``amtool config routes test`` run on it in the tests.
"""

from __future__ import annotations

import json

from components.settings.observability import Alerting, Receiver


def _receiver(receiver: Receiver) -> dict[str, object]:
    out: dict[str, object] = {"name": receiver.name}
    if receiver.slack is not None:
        out["slack_configs"] = [
            {
                "api_url": receiver.slack.api_url.get_secret_value(),
                "channel": receiver.slack.channel,
                "send_resolved": True,
                "title": "{{ .Status | toUpper }}: {{ .CommonLabels.alertname }}",
                "text": "{{ range .Alerts }}{{ .Annotations.summary }}\n{{ .Annotations.description }}\n{{ end }}",
            }
        ]
    elif receiver.pager_duty is not None:
        out["pagerduty_configs"] = [
            {"routing_key": receiver.pager_duty.routing_key.get_secret_value(), "send_resolved": True}
        ]
    elif receiver.sns is not None:
        out["sns_configs"] = [
            {
                "topic_arn": receiver.sns.topic_arn,
                "sigv4": {"region": receiver.sns.region},
                "subject": "{{ .Status | toUpper }}: {{ .CommonLabels.alertname }}",
                "send_resolved": True,
            }
        ]
    elif receiver.webhook is not None:
        out["webhook_configs"] = [{"url": receiver.webhook.url.get_secret_value(), "send_resolved": True}]
    return out


#: What a critical alert may silence: warnings about the same thing, where "the same thing" is named
#: by labels both alerts actually carry. Alertmanager compares ``equal`` labels by value and a label
#: missing on both sides compares equal (prometheus/alertmanager ``inhibit/inhibit.go``,
#: ``InhibitRule.hasEqual``: ``a.Labels[n] != lset[n]``, both empty strings), so an ``equal`` list alone
#: lets a critical without those labels (KubeSchedulerDown, an unscoped chart alert) mute every warning
#: that lacks them too, the GPU-hours budget alert included. Each kind below therefore also requires
#: its labels to be present (``=~".+"``) on both sides.
INHIBITION_SCOPES: tuple[tuple[str, ...], ...] = (
    ("namespace", "model_name"),  # a model: its critical latency alert mutes its cache/queue warnings
    ("Hostname", "gpu"),  # a GPU: a hardware XID mutes that GPU's framebuffer and application-XID warnings
)


def inhibit_rules() -> list[dict[str, object]]:
    """One rule per kind of thing an alert can be about, each requiring its labels on both sides."""
    rules: list[dict[str, object]] = []
    for labels in INHIBITION_SCOPES:
        present = [f'{label}=~".+"' for label in labels]
        rules.append(
            {
                "source_matchers": ['severity="critical"', *present],
                "target_matchers": ['severity=~"warning|info"', *present],
                "equal": list(labels),
            }
        )
    return rules


def alertmanager_config(alerting: Alerting) -> dict[str, object]:
    """Alertmanager configuration from the stack's receivers and routes: the first route matching an
    alert's severity (and tier, when the route names tiers) wins; a critical alert silences the
    warnings of the same model or the same GPU, never alerts that merely lack the same labels. The
    chart's always-firing Watchdog goes nowhere."""
    routes: list[dict[str, object]] = [{"receiver": "null", "matchers": ['alertname=~"Watchdog|InfoInhibitor"']}]
    for route in alerting.routes:
        matchers = [f'severity=~"{"|".join(route.severities)}"']
        if route.tiers:
            matchers.append(f'tier=~"{"|".join(route.tiers)}"')
        routes.append({"receiver": route.receiver, "matchers": matchers})
    return {
        "route": {
            "receiver": alerting.default_receiver or "null",
            "group_by": ["alertname", "namespace", "model_name", "Hostname"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": routes,
        },
        "inhibit_rules": inhibit_rules(),
        "receivers": [{"name": "null"}, *(_receiver(r) for r in alerting.receivers)],
    }


def sns_publish_policy(topic_arns: list[str]) -> str:
    """Publish to the configured topics only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Sid": "PublishAlerts", "Effect": "Allow", "Action": "sns:Publish", "Resource": sorted(set(topic_arns))}],
        }
    )
