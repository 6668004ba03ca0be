"""Observability settings: Prometheus storage and replicas, and where alerts go.

Receiver credentials (Slack webhook URL, PagerDuty routing key, webhook URL) are Pulumi secrets:
``pulumi config set --secret --path 'llm-platform:alerting.receivers[0].slack.apiUrl' https://...``.
In the stack file they read ``{secure: v1:...}``; the program gets them decrypted from the engine and
passes them on only inside a Kubernetes Secret (a Pulumi secret too). They are never echoed in errors.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import Field, SecretStr, field_validator, model_validator

from components.settings._base import _Model, keyed, repeated

#: Config field names (camelCase) that hold credentials; errors about them never show the value.
SECRET_FIELDS = frozenset({"apiUrl", "routingKey", "url"})
Severity = Literal["critical", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
#: Window of the GPU-hour budget rule, the longest any rule reads; retention must cover it.
GPU_HOURS_WINDOW_DAYS = 30
_SNS_TOPIC_RE = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$")
_RECEIVER_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
#: What an encrypted value (``{secure: ...}``) stands for when no engine decrypted it (offline check).
ENCRYPTED_PLACEHOLDER = "https://pulumi-secret.invalid/encrypted"


def mask_secrets(value: Any) -> Any:
    """``value`` with every credential field replaced, for error messages."""
    if isinstance(value, dict):
        return {k: "(secret, not shown)" if k in SECRET_FIELDS or k == "huggingFaceToken" else mask_secrets(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    return value


def _secret(value: Any) -> Any:
    """A secret arrives decrypted (a string) from the engine, or as ``{secure: ...}`` from a stack
    file read offline; the latter stands for a placeholder of the right shape."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return ENCRYPTED_PLACEHOLDER
    return value


class _Credential(_Model):
    @field_validator("*", mode="before")
    @classmethod
    def _decrypt(cls, value: Any) -> Any:
        return _secret(value)


class SlackReceiver(_Credential):
    """A Slack channel, reached through an incoming webhook."""

    api_url: SecretStr = Field(
        description="The incoming-webhook URL (https://...); a secret: set it with `pulumi config set --secret "
        "--path`.",
    )
    channel: str = Field(description="The channel, such as #ml-platform-alerts (or @user).")

    @field_validator("channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        if not re.fullmatch(r"[#@]?[A-Za-z0-9._-]{1,80}", value):
            raise ValueError(f"{value[:80]!r} is not a Slack channel like #ml-platform-alerts (or @user)")
        return value

    @field_validator("api_url")
    @classmethod
    def _https(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().startswith("https://"):
            raise ValueError("must be an https:// Slack webhook URL (value not shown: it is a secret)")
        return value


class PagerDutyReceiver(_Credential):
    """A PagerDuty service, reached through its Events API v2 integration."""

    routing_key: SecretStr = Field(
        description="The service's Events API v2 integration key (32 characters); a secret: set it with `pulumi "
        "config set --secret --path`.",
    )

    @field_validator("routing_key")
    @classmethod
    def _key(cls, value: SecretStr) -> SecretStr:
        text = value.get_secret_value()
        if text != ENCRYPTED_PLACEHOLDER and not re.fullmatch(r"[A-Za-z0-9]{20,64}", text):
            raise ValueError("must be a 32-character PagerDuty integration key (value not shown: it is a secret)")
        return value


class WebhookReceiver(_Credential):
    """An HTTP endpoint that takes Alertmanager's webhook payload."""

    url: SecretStr = Field(
        description="The endpoint's http(s) URL; a secret: set it with `pulumi config set --secret --path`.",
    )

    @field_validator("url")
    @classmethod
    def _http(cls, value: SecretStr) -> SecretStr:
        if not re.match(r"^https?://[^\s]+$", value.get_secret_value()):
            raise ValueError("must be an http(s) URL (value not shown: it is a secret)")
        return value


class SnsReceiver(_Model):
    """An SNS topic; Alertmanager publishes with its own Pod Identity role (allowed ``sns:Publish`` on
    this topic only), so no credential is stored."""

    topic_arn: str = Field(
        description="The topic's ARN, in the stack's partition, such as arn:aws:sns:us-east-1:123456789012:llm-alerts.",
    )

    @field_validator("topic_arn")
    @classmethod
    def _arn(cls, value: str) -> str:
        if not _SNS_TOPIC_RE.match(value):
            raise ValueError(f"{value!r} is not an SNS topic ARN like arn:aws:sns:us-east-1:123456789012:llm-alerts")
        return value

    @property
    def region(self) -> str:
        return self.topic_arn.split(":")[3]


class Receiver(_Model):
    """Where alerts go: exactly one of ``slack``, ``pagerDuty``, ``sns``, ``webhook``."""

    name: str = Field(
        description="The receiver's name, which routes and defaultReceiver refer to: lowercase letters, digits or "
        "'-'.",
    )
    slack: SlackReceiver | None = Field(default=None, description="Send to a Slack channel.")
    pager_duty: PagerDutyReceiver | None = Field(default=None, description="Send to a PagerDuty service.")
    sns: SnsReceiver | None = Field(default=None, description="Publish to an SNS topic.")
    webhook: WebhookReceiver | None = Field(default=None, description="POST to an HTTP endpoint.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _RECEIVER_NAME_RE.match(value):
            raise ValueError(f"{value!r} must be lowercase letters, digits or '-', starting with a letter")
        return value

    @model_validator(mode="after")
    def _one(self) -> Receiver:
        kinds = [k for k in ("slack", "pager_duty", "sns", "webhook") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("set exactly one of slack, pagerDuty, sns or webhook")
        return self


#: What a route takes when it names no severities.
_PAGED_SEVERITIES: list[Severity] = ["critical", "warning"]


class Route(_Model):
    """Alerts whose severity is in ``severities`` and (when given) whose tier is in ``tiers`` go to
    ``receiver``; the first matching route wins."""

    receiver: str = Field(description="The receiver (its name) that gets the matching alerts.")
    severities: list[Severity] = Field(
        default_factory=lambda: _PAGED_SEVERITIES.copy(), min_length=1,
        description="The severities the route takes (default critical and warning).",
    )
    tiers: list[str] = Field(
        default_factory=list,
        description="The serving tiers whose alerts the route takes (default empty: every alert, whatever its tier).",
    )


class Alerting(_Model):
    """Alertmanager receivers and routes. ``defaultReceiver`` gets what no route matched; without
    receivers alerts stay in Alertmanager's UI only (allowed outside production)."""

    receivers: list[Receiver] = Field(
        default_factory=list,
        description="Where alerts may go (default none: alerts stay in Alertmanager's UI; production with serving "
        "needs one).",
    )
    routes: list[Route] = Field(
        default_factory=list,
        description="Which alerts go to which receiver, tried in order; the first match wins (default none).",
    )
    default_receiver: str | None = Field(
        default=None,
        description="The receiver that gets what no route matched; required when receivers are defined.",
    )

    @model_validator(mode="after")
    def _references(self) -> Alerting:
        names = [r.name for r in self.receivers]
        for name in repeated(names):
            raise keyed(f"receiver name {name!r} is repeated; receiver names must be unique",
                        "receivers", len(names) - 1 - names[::-1].index(name), "name")
        defined = f"defined receivers: {', '.join(names) or 'none'}"
        for i, route in enumerate(self.routes):
            if route.receiver not in names:
                raise keyed(f"names unknown receiver {route.receiver!r}; {defined}", "routes", i, "receiver")
        if self.default_receiver is not None and self.default_receiver not in names:
            raise keyed(f"names unknown receiver {self.default_receiver!r}; {defined}", "defaultReceiver")
        if self.receivers and self.default_receiver is None:
            raise keyed("defaultReceiver is required when receivers are defined (it gets what no route matched)",
                        "defaultReceiver")
        return self


class Prometheus(_Model):
    """Prometheus storage: an encrypted gp3 volume per replica of ``volumeSizeGib``; ``retentionDays``
    must cover the longest rule window (30 days for the GPU-hour budget)."""

    replicas: int = Field(
        default=1, ge=1, le=5,
        description="Prometheus replicas, each with its own volume; production needs 2. Unit: replicas.",
    )
    retention_days: int = Field(
        default=35, ge=1, le=400,
        description="How long metrics are kept; at least 30 with gpuHoursMonthlyBudget (the budget rule's window). "
        "Unit: days.",
    )
    volume_size_gib: int = Field(
        default=100, ge=10, le=16384,
        description="The encrypted gp3 volume of each replica. Unit: GiB.",
    )


class Observability(_Model):
    """Prometheus sizing and alert delivery."""

    prometheus: Prometheus = Field(
        default_factory=Prometheus,
        description="Prometheus replicas, retention and storage.",
    )
    alerting: Alerting = Field(
        default_factory=Alerting,
        description="Alertmanager receivers and routes (default none).",
    )
