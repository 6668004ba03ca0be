"""pulumi-kubernetes' await rule for a Deployment, as the provider applies it (not as `kubectl apply`).

`kubectl apply` returns once the object exists; the pods become ready whenever they do. Pulumi's
provider instead awaits the rollout on create and update and fails the step when the wait runs out;
resources that depend on the Deployment are then not created. The timeout, in this order
(pulumi/pulumi-kubernetes, provider/pkg/metadata/overrides.go, ``TimeoutDuration``;
provider/pkg/await/awaiters.go, ``awaitConfig.getTimeout``; provider/pkg/await/deployment.go,
``DefaultDeploymentTimeoutMins``):

1. ``customTimeouts`` on the resource, when non-zero;
2. the ``pulumi.com/timeoutSeconds`` annotation, when it parses as an integer (``"0"`` is a zero
   timeout; anything else unparseable is ignored);
3. the Deployment default, 10 minutes.

``pulumi.com/skipAwait: "true"`` skips the wait altogether (``SkipAwaitLogic``).
"""

from __future__ import annotations

from typing import Any

DEFAULT_DEPLOYMENT_TIMEOUT_SECONDS = 10 * 60
SKIP_AWAIT = "pulumi.com/skipAwait"
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"


def await_timeout_seconds(deployment: dict[str, Any], custom_timeout_seconds: float = 0) -> float | None:
    """Seconds the provider waits for the Deployment's rollout; ``None`` when it does not wait."""
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    if annotations.get(SKIP_AWAIT) == "true":
        return None
    if custom_timeout_seconds:
        return custom_timeout_seconds
    value = annotations.get(TIMEOUT_SECONDS)
    if value is not None:
        try:
            return int(value)
        except ValueError:
            pass
    return DEFAULT_DEPLOYMENT_TIMEOUT_SECONDS


def rollout_step(deployment: dict[str, Any], seconds_until_ready: float, custom_timeout_seconds: float = 0) -> str:
    """What `pulumi up` reports for a Deployment whose pods become ready after ``seconds_until_ready``:
    ``"succeeded"``, ``"failed"`` (timed out; dependents not created) or ``"not awaited"``."""
    timeout = await_timeout_seconds(deployment, custom_timeout_seconds)
    if timeout is None:
        return "not awaited"
    return "succeeded" if seconds_until_ready <= timeout else "failed"
