"""Gateway: an OpenAI-compatible router (LiteLLM) in front of the self-hosted models.

Each self-hosted model falls back to Amazon Bedrock when it answers 5xx, times out, is rate
limited or has no ready replica (scaled to zero, cold start), so callers see one endpoint that
degrades to a managed model instead of failing. The gateway runs on the system pool and may invoke
only the Bedrock models its settings list.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.config_files import yaml_text
from components.iam import pod_identity_role
from components.serving.network_policy import NetworkIsolation, NetworkIsolationArgs, gateway_policies
from components.specs import serving as model_server
from components.specs.gateway import (
    LABELS,
    METRICS_SECRET,
    NAME,
    NAMESPACE,
    POD_LABELS,
    PORT,
    URL,
    Route,
    config_digest,
    deployment,
    disruption_budget_spec,
    gateway_config,
    scrape_endpoint,
    service_spec,
)

TYPE = "llm-platform:index:Gateway"
_PROFILE_PREFIX = re.compile(r"^(us|eu|apac|global|jp|au|ca)\.")


def foundation_model_id(model_id: str) -> str:
    """The foundation model behind a Bedrock id: a cross-region profile id without its geography."""
    return _PROFILE_PREFIX.sub("", model_id)


#: Bedrock's own models; every other provider's model is an AWS Marketplace offering.
FIRST_PARTY_PROVIDER = "amazon"


def is_marketplace_model(model_id: str) -> bool:
    """Whether the model's first invocation in an account starts an AWS Marketplace subscription."""
    return foundation_model_id(model_id).split(".", 1)[0] != FIRST_PARTY_PROVIDER


#: What Bedrock needs from the caller of a third-party model's first invocation in an account, to
#: subscribe the account to the model's Marketplace offer (until then: AccessDeniedException).
#: docs.aws.amazon.com/bedrock/latest/userguide/model-access.html
MARKETPLACE_ACTIONS = ["aws-marketplace:Subscribe", "aws-marketplace:Unsubscribe", "aws-marketplace:ViewSubscriptions"]


#: The action every fallback call needs (streaming adds ``InvokeModelWithResponseStream``).
INVOKE_ACTION = "bedrock:InvokeModel"


def bedrock_invocation_arns(partition: str, region: str, account: str, model_id: str) -> list[str]:
    """The resources Bedrock authorizes one invocation of ``model_id`` from ``region`` against.

    A foundation model id: that model in ``region``. A cross-region inference profile id: the profile
    *and* the foundation model in the region the request is routed to (Bedrock user guide, "Prerequisites
    for inference profiles": the caller needs invoke permission on both); the source region is always
    among a profile's destinations, so the model there is the one concrete ARN every call may need."""
    base = foundation_model_id(model_id)
    model = f"arn:{partition}:bedrock:{region}::foundation-model/{base}"
    if base == model_id:
        return [model]
    return [f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}", model]


def bedrock_invoke_policy(partition: str, region: str, account: str, model_ids: list[str]) -> str:
    """Invoke only the listed models: a cross-region profile id also needs its foundation model
    in every region the profile routes to.

    The gateway is the caller when a fallback first reaches a third-party model, so, when one is
    listed, it may also let Bedrock subscribe the account to that model on its behalf: the Marketplace
    actions (which take no resource) are allowed only through Bedrock (``aws:CalledViaLast``, the
    scoping aws/bedrock-agentcore-starter-toolkit gives its execution role), never directly by the pod.
    Preflight and ``verify`` check each model is invocable and name the one-time step (Anthropic's
    use-case form) no role can do.
    """
    resources: list[str] = []
    for model_id in model_ids:
        base = foundation_model_id(model_id)
        if base != model_id:
            resources.append(f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}")
            resources.append(f"arn:{partition}:bedrock:*::foundation-model/{base}")
        else:
            resources.append(f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}")
    statements: list[dict[str, Any]] = [
        {
            "Sid": "InvokeConfiguredModels",
            "Effect": "Allow",
            "Action": [INVOKE_ACTION, "bedrock:InvokeModelWithResponseStream"],
            "Resource": resources,
        }
    ]
    if any(is_marketplace_model(model_id) for model_id in model_ids):
        statements.append(
            {
                "Sid": "SubscribeOnFirstInvocation",
                "Effect": "Allow",
                "Action": MARKETPLACE_ACTIONS,
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:CalledViaLast": "bedrock.amazonaws.com"}},
            }
        )
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@dataclass(frozen=True)
class GatewayArgs:
    """Inputs of :class:`Gateway`. ``routes`` are the self-hosted models (name, in-cluster OpenAI base
    URL, kind); ``bedrock_models`` maps a kind (``chat``, ``embedding``) to the Bedrock model ids that
    models of that kind fall back to, in order. ``model_api_keys`` maps each route's ``api_key_env`` to
    the key (a Pulumi secret). Clients are pods of the cluster: the Service is ClusterIP, so nothing
    outside the cluster has a path to it and no address outside the cluster is admitted."""

    routes: list[Route]
    bedrock_models: dict[str, list[str]]
    bedrock_region: str | None
    cluster_name: str
    model_api_keys: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    replicas: int = 2
    timeout_seconds: int = 60
    num_retries: int = 1
    tags: dict[str, str] = field(default_factory=dict)
    #: With prefix-aware routing somewhere: the pickers' pod label key and Envoy port, so the gateway's
    #: egress admits the picker Services (``network_policy.gateway_policies``). None: no picker.
    picker_key: str | None = None
    proxy_port: int | None = None


class Gateway(pulumi.ComponentResource):
    """LiteLLM Deployment, config, generated master key, Service, PDB, metrics and Bedrock role."""

    url: str
    master_key: pulumi.Output[str]
    #: The role the gateway's pods call Bedrock with (Pod Identity); None without Bedrock fallbacks.
    bedrock_role_arn: pulumi.Output[str] | None = None

    def __init__(self, name: str, args: GatewayArgs, opts: pulumi.ResourceOptions | None = None):
        import pulumi_random as random  # only stacks that run the gateway load the random provider's SDK

        super().__init__(TYPE, name, None, opts)
        pod_security = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": NAMESPACE, "labels": {**LABELS, **pod_security}}, opts=pulumi.ResourceOptions(parent=self)
        )
        child = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        metadata: k8s.meta.v1.ObjectMetaArgsDict = {"name": NAME, "namespace": NAMESPACE, "labels": LABELS}

        master_key = random.RandomPassword(f"{name}-master-key", length=48, special=False, opts=pulumi.ResourceOptions(parent=self))
        secret = k8s.core.v1.Secret(
            f"{name}-master-key",
            metadata=metadata,
            type="Opaque",
            string_data={
                "LITELLM_MASTER_KEY": master_key.result.apply(lambda key: f"sk-{key}"),
                **{env: pulumi.Output.secret(key) for env, key in sorted(args.model_api_keys.items())},
            },
            opts=child,
        )

        NetworkIsolation(
            f"{name}-isolation",
            NetworkIsolationArgs(
                namespace=NAMESPACE,
                policies=gateway_policies(POD_LABELS, PORT, model_server.POD_LABELS, model_server.PORT,
                                          picker_key=args.picker_key, proxy_port=args.proxy_port),
                labels=LABELS,
            ),
            opts=child,
        )
        config = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata=metadata,
            data={
                "config.yaml": yaml_text(
                    gateway_config(args.routes, args.bedrock_models, args.bedrock_region, args.timeout_seconds, args.num_retries)
                )
            },
            opts=child,
        )
        account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=metadata, opts=child)
        bedrock_ids = [model_id for ids in args.bedrock_models.values() for model_id in ids]
        # The proxy's pods call Bedrock with the credentials Pod Identity injects at their admission:
        # they come after the association (see components.iam.pod_identity_role).
        credentials: list[pulumi.Resource] = []
        if bedrock_ids:
            identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
            partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
            role, association = pod_identity_role(
                f"{name}-bedrock",
                description=f"LiteLLM gateway of {args.cluster_name}: invoke the configured Bedrock models",
                policy=pulumi.Output.all(partition, identity.account_id).apply(
                    lambda a: bedrock_invoke_policy(a[0], args.bedrock_region or "", a[1], bedrock_ids)
                ),
                cluster_name=args.cluster_name,
                namespace=NAMESPACE,
                service_account=NAME,
                tags=args.tags,
                parent=self,
                association_depends_on=[account],
            )
            credentials.append(association)
            self.bedrock_role_arn = role.arn
        described = deployment(args.replicas, args.bedrock_region, config.data.apply(config_digest))
        k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=described["metadata"],
            spec=described["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, secret, config, account, *credentials]),
        )
        # pulumi_kubernetes types spec as its snake_case TypedDicts; the provider takes Kubernetes' camelCase JSON as the specs write it.
        k8s.core.v1.Service(f"{name}-service", metadata=metadata, spec=service_spec(), opts=child)  # type: ignore[call-overload]
        k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=metadata, spec=disruption_budget_spec(), opts=child)  # type: ignore[call-overload]
        # The proxy's /metrics answers 401 without a key (and the demand signal KEDA wakes cold models on
        # would never exist): Prometheus scrapes with a bearer token read from its own Secret.
        scrape_token = k8s.core.v1.Secret(
            f"{name}-metrics-token",
            metadata={**metadata, "name": METRICS_SECRET},
            type="Opaque",
            string_data={"token": master_key.result.apply(lambda key: f"sk-{key}")},
            opts=child,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-metrics",
            api_version="monitoring.coreos.com/v1",
            kind="ServiceMonitor",
            metadata=metadata,
            spec={"selector": {"matchLabels": LABELS}, "endpoints": [scrape_endpoint()]},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, scrape_token]),
        )
        self.url = URL
        self.master_key = pulumi.Output.secret(master_key.result.apply(lambda key: f"sk-{key}"))
        self.register_outputs({"url": self.url, "master_key": self.master_key, "bedrock_role_arn": self.bedrock_role_arn})
