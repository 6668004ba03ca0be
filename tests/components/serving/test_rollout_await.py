"""`pulumi up` and a cold GPU start: the provider's await rule (tests/support/pulumi_await.py) on the
recorded Deployments, and the ScaledObjects created whatever the await does."""

from __future__ import annotations

from tests.components.test_pod_identity_ordering import transitive_dependencies
from tests.support.pulumi_await import await_timeout_seconds, rollout_step

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
#: A healthy cold start of a large model that outlasts the provider's default: 25 minutes.
SLOW_HEALTHY_START_SECONDS = 25 * 60


# --- the engine's rule on hand-made Deployments ----------------------------------------------------

def _deployment(annotations: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": "m", "annotations": annotations or {}}, "spec": {}}


def test_the_textbook_apply_succeeds_but_the_provider_fails_a_slow_rollout_by_default():
    """`kubectl apply` would be done in seconds and the pods ready after 25 minutes; Pulumi waits
    10 minutes and fails the update."""
    assert await_timeout_seconds(_deployment()) == 600
    assert rollout_step(_deployment(), SLOW_HEALTHY_START_SECONDS) == "failed"
    assert rollout_step(_deployment(), 300) == "succeeded"


def test_timeout_annotation_custom_timeouts_and_skip_await():
    assert rollout_step(_deployment({"pulumi.com/timeoutSeconds": "3600"}), SLOW_HEALTHY_START_SECONDS) == "succeeded"
    assert await_timeout_seconds(_deployment({"pulumi.com/timeoutSeconds": "0"})) == 0, "zero is a zero timeout"
    assert await_timeout_seconds(_deployment({"pulumi.com/timeoutSeconds": "1h"})) == 600, "unparseable: the default"
    assert await_timeout_seconds(_deployment({"pulumi.com/timeoutSeconds": "3600"}), custom_timeout_seconds=120) == 120
    assert rollout_step(_deployment({"pulumi.com/skipAwait": "true"}), SLOW_HEALTHY_START_SECONDS) == "not awaited"


# --- the recorded plans ---------------------------------------------------------------------------

def model_deployments(plan) -> list:
    return [d for d in plan.of_type(DEPLOYMENT) if d.inputs["metadata"]["namespace"].startswith("serving-")]


def test_every_model_deployment_carries_an_await_budget_as_the_engine_receives_it(stack_plan):
    deployments = model_deployments(stack_plan)
    assert len(deployments) >= 2
    for deployment in deployments:
        annotations = deployment.inputs["metadata"]["annotations"]
        assert "pulumi.com/skipAwait" not in annotations, "a model that never gets ready must fail the update"
        timeout = await_timeout_seconds(deployment.inputs)
        assert timeout == int(annotations["pulumi.com/timeoutSeconds"]) > 600
        assert deployment.inputs["spec"]["progressDeadlineSeconds"] == timeout, "the Deployment's own deadline agrees"
        assert rollout_step(deployment.inputs, SLOW_HEALTHY_START_SECONDS) == "succeeded"


def test_the_budget_outlasts_the_startup_probe_plus_node_and_image(stack_plan):
    """Pulumi must not give up before the kubelet would: the await covers the startup probe's whole
    window (read from the emitted pod) plus 10 minutes for a node and 10 for the image (exactly that for
    a streamed model, which copies nothing before its server starts)."""
    for deployment in model_deployments(stack_plan):
        (vllm,) = [c for c in deployment.inputs["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
        probe = vllm["startupProbe"]
        window = probe["periodSeconds"] * probe["failureThreshold"]
        assert await_timeout_seconds(deployment.inputs) >= window + 600 + 600, deployment.name


def test_prod_70b_model_budget(prod_plan):
    """600 s node + 600 s image + 1800 s startup probe: 50 minutes at most before `pulumi up` gives up on
    the first replica. The model streams its weights (weights: stream), so there is no copy step before
    the server starts (downloaded, the 37 GiB of AWQ weights at 100 MiB/s added 380 s: 3380 s)."""
    deployment = prod_plan.named(DEPLOYMENT, "tier-interactive-llama-3-1-70b-instruct-awq-deployment")
    assert deployment.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == "3000"


def test_scaled_objects_do_not_wait_for_their_deployments_readiness(stack_plan):
    """A ScaledObject after its Deployment is not created until the await ends (or ever, if it fails),
    so the interactive tier would sit at one replica through the first cold start."""
    scalers = stack_plan.of_type(SCALED_OBJECT)
    assert scalers
    deployments = {d.urn for d in model_deployments(stack_plan)}
    for scaler in scalers:
        assert not deployments & transitive_dependencies(stack_plan, scaler), scaler.name
        # KEDA's webhook needs the target to exist only for cpu/memory triggers; without them a
        # ScaledObject that arrives first is admitted and reconciled once the Deployment exists.
        assert {t["type"] for t in scaler.inputs["spec"]["triggers"]} == {"prometheus"}


def test_the_gateway_keeps_the_default_await(stack_plan):
    """CPU pods on the system pool start in well under 10 minutes: the default stands."""
    gateway = stack_plan.named(DEPLOYMENT, "gateway-deployment")
    assert await_timeout_seconds(gateway.inputs) == 600
