"""ServingTier: a namespace of models with its own priority and GPU quota.

Tiers (interactive, batch, embedding, experimentation) share GPU capacity; the PriorityClass decides
who is preempted under pressure and the ResourceQuota caps how many GPUs a tier can ever hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import contract
from components.serving.model_server import ModelServer, ModelServerArgs
from components.serving.network_policy import (
    NetworkIsolation,
    NetworkIsolationArgs,
    hybrid_peer_policies,
    picker_policies,
    serving_policies,
)
from components.serving.routing import EndpointPicker, EndpointPickerArgs
from components.settings import PoolFacts
from components.settings import ServingTier as TierSettings
from components.specs import gateway, observability, routing
from components.specs import serving as model_server
from components.specs.serving import ModelPool, namespace_name, priority_class_name, quota_spec

TYPE = "llm-platform:index:ServingTier"


#: Secret (in the tier's namespace) holding the tier's model API key.
API_KEY_SECRET = "model-api-key"
#: Pod Security Standards level enforced (and audited, warned) on every serving namespace.
POD_SECURITY_LABELS = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}


@dataclass(frozen=True)
class ServingTierArgs:
    """Inputs of :class:`ServingTier`. ``pools`` are the stack's GPU pools by name (see
    ``Settings.gpu_pool_facts``); ``hf_token`` is the Hugging Face token, a Pulumi secret, needed
    only when a model of the tier loads from Hugging Face."""

    tier: TierSettings
    pools: dict[str, PoolFacts]
    prometheus_url: str
    cluster_name: str
    hf_token: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: Each model's pool as its start sees it, by model name (``components.capacity_check.CheckedStack.model_pools``).
    model_pools: dict[str, ModelPool] = field(default_factory=dict)
    #: The stack's region (streamed models' S3 clients address it).
    region: str | None = None
    #: With ``routing: prefix-aware``: the CRDs the pickers' objects need (created first), the pickers'
    #: replicas, and the ``kubernetes`` Service's ClusterIP (the pickers' egress to the API).
    routing_crds: pulumi.Resource | None = None
    picker_replicas: int = 1
    api_server_ip: str = ""
    #: Served models another model falls back to (their gateway triggers count those hops too).
    fallback_targets: frozenset[str] = frozenset()
    #: The VPC's range: where cloud pods reach models on hybrid nodes from (see ``hybrid_peer_policies``).
    vpc_cidr: str = ""


class ServingTier(pulumi.ComponentResource):
    """Namespace (Pod Security ``restricted``), default-deny NetworkPolicies, PriorityClass,
    ResourceQuota (GPUs, CPU, memory), LimitRange, the tier's model API key and one
    :class:`ModelServer` per model; with ``routing: prefix-aware``, one :class:`EndpointPicker` per
    model too."""

    namespace: str
    #: Where the gateway sends each model's requests: its Service, or its picker when routed.
    endpoints: dict[str, str]
    #: The key every model of the tier requires on ``/v1`` (a Pulumi secret); the gateway holds it.
    api_key: pulumi.Output[str]

    def __init__(self, name: str, args: ServingTierArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        tier = args.tier
        ns_name = namespace_name(tier.name)
        child = pulumi.ResourceOptions(parent=self)
        labels = {contract.TIER_LABEL: tier.name, "app.kubernetes.io/part-of": "llm-platform"}

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": ns_name, "labels": {**labels, **POD_SECURITY_LABELS}},
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        priority = k8s.scheduling.v1.PriorityClass(
            f"{name}-priority",
            metadata={"name": priority_class_name(tier.name), "labels": labels},
            value=tier.priority,
            preemption_policy="PreemptLowerPriority" if tier.preempt_lower else "Never",
            global_default=False,
            description=f"Serving tier {tier.name}: higher values preempt lower tiers under GPU pressure",
            opts=child,
        )
        quota = tier.quota
        # pulumi_kubernetes types spec as its snake_case TypedDicts; the provider takes Kubernetes' camelCase JSON as the specs write it.
        k8s.core.v1.ResourceQuota(  # type: ignore[call-overload]
            f"{name}-quota",
            metadata={"name": "serving-capacity", "namespace": ns_name, "labels": labels},
            spec=quota_spec(quota),
            opts=in_namespace,
        )
        k8s.core.v1.LimitRange(  # type: ignore[call-overload]
            f"{name}-limits",
            metadata={"name": "serving-defaults", "namespace": ns_name, "labels": labels},
            spec={
                "limits": [
                    {
                        "type": "Container",
                        "defaultRequest": {"cpu": "250m", "memory": "256Mi"},
                        "default": {"memory": "512Mi"},
                        "max": {"memory": quota.memory},
                    }
                ]
            },
            opts=in_namespace,
        )
        hf_secret_name = None
        if args.hf_token is not None and any(m.source.hugging_face for m in tier.models):
            hf_secret_name = "hugging-face-token"
            k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata={"name": hf_secret_name, "namespace": ns_name, "labels": labels},
                type="Opaque",
                string_data={"token": pulumi.Output.secret(args.hf_token)},
                opts=in_namespace,
            )
        routed = tier.routing == contract.PREFIX_AWARE_ROUTING
        policies = serving_policies(
            model_pods=model_server.POD_LABELS,
            port=model_server.PORT,
            gateway_namespace=gateway.NAMESPACE,
            gateway_pods=gateway.POD_LABELS,
            monitoring_namespace=observability.NAMESPACE,
        )
        if routed:
            policies.update(picker_policies(
                routing.PICKER_SELECTOR_KEY, routing.PROXY_PORT, model_server.POD_LABELS, model_server.PORT,
                gateway.NAMESPACE, gateway.POD_LABELS, args.api_server_ip,
            ))
        if any(args.pools[m.pool].hybrid for m in tier.models if m.pool in args.pools):
            policies.update(hybrid_peer_policies(model_server.POD_LABELS, model_server.PORT, args.vpc_cidr))
        NetworkIsolation(
            f"{name}-isolation",
            NetworkIsolationArgs(namespace=ns_name, policies=policies, labels=labels),
            opts=in_namespace,
        )
        import pulumi_random as random  # only stacks that serve models load the random provider's SDK

        key = random.RandomPassword(f"{name}-api-key", length=48, special=False, opts=child)
        self.api_key = pulumi.Output.secret(key.result.apply(lambda k: f"sk-{k}"))
        k8s.core.v1.Secret(
            f"{name}-api-key",
            metadata={"name": API_KEY_SECRET, "namespace": ns_name, "labels": labels},
            type="Opaque",
            string_data={model_server.API_KEY_SECRET_KEY: self.api_key},
            opts=in_namespace,
        )
        self.endpoints = {}
        # Every model's weights policy names the partition: one lookup for the tier.
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition if any(
            model.source.s3 for model in tier.models) else None
        for model in tier.models:
            server = ModelServer(
                f"{name}-{model.name}",
                ModelServerArgs(
                    model=model,
                    namespace=namespace.metadata["name"],
                    namespace_name=ns_name,
                    tier=tier.name,
                    priority_class=priority.metadata["name"],
                    pool_facts=args.pools[model.pool],
                    scaling=tier.scaling,
                    prometheus_url=args.prometheus_url,
                    cluster_name=args.cluster_name,
                    hf_token_secret=hf_secret_name,
                    api_key_secret=API_KEY_SECRET,
                    tags=args.tags,
                    pool=args.model_pools.get(model.name),
                    partition=partition,
                    region=args.region,
                    fallback_target=model.name in args.fallback_targets,
                ),
                opts=in_namespace,
            )
            self.endpoints[model.name] = server.service_url
            if routed:
                picker = EndpointPicker(
                    f"{name}-{model.name}-picker",
                    EndpointPickerArgs(model=model.name, namespace=ns_name, replicas=args.picker_replicas,
                                       leaders_only=model.multi_node),
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[namespace, *([args.routing_crds] if args.routing_crds else [])]),
                )
                self.endpoints[model.name] = picker.url
        self.namespace = ns_name
        self.register_outputs({"namespace": self.namespace, "endpoints": self.endpoints})
