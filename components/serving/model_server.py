"""ModelServer: one model served by vLLM on GPU nodes, scaled by KEDA on vLLM's own metrics.

The objects come from ``components.specs.serving``; this component wraps them in resources and
adds what only exists at deploy time: the pod's Pod Identity role, which may read only that
model's S3 prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.iam import pod_identity_role
from components.settings import PoolFacts, ServedModel, TierScaling
from components.specs import multi_node
from components.specs.serving import (
    ModelPool,
    deployment,
    disruption_budget_spec,
    pod_labels,
    s3_read_policy,
    scaled_object_spec,
    service_spec,
    service_url,
)

TYPE = "llm-platform:index:ModelServer"


@dataclass(frozen=True)
class ModelServerArgs:
    """Inputs of :class:`ModelServer`. ``pool_facts`` are the facts of the model's pool (purpose
    decides tolerations). ``hf_token_secret`` names the Secret with key ``token`` for Hugging Face
    sources. ``api_key_secret`` names the Secret whose key ``api-key`` vLLM requires on ``/v1`` (none:
no key). ``priority_class`` is the tier's. ``prometheus_url`` feeds the ScaledObject."""

    model: ServedModel
    namespace: pulumi.Input[str]
    namespace_name: str
    tier: str
    priority_class: pulumi.Input[str]
    pool_facts: PoolFacts
    scaling: TierScaling
    prometheus_url: str
    cluster_name: str
    hf_token_secret: pulumi.Input[str] | None = None
    api_key_secret: str | None = None
    tags: dict[str, str] | None = None
    #: The AWS partition of the weights bucket's ARN; the tier looks it up once for all its models
    #: (one provider call, not one per model); ``None``: looked up here.
    partition: pulumi.Input[str] | None = None
    #: Where the model starts (the capacity simulation's pool, planning node type, capacity source and
    #: root volume): its cold start's planning bound is the Deployment's await timeout. ``None``: the
    #: bound of a start that must provision a node.
    pool: ModelPool | None = None
    #: The stack's region: a streamed model's S3 client addresses it (components.specs.serving.streamer_env).
    region: str | None = None
    #: Another served model falls back to this one: its gateway trigger also counts those hops.
    fallback_target: bool = False


class ModelServer(pulumi.ComponentResource):
    """ServiceAccount with a Pod Identity role, vLLM Deployment (a LeaderWorkerSet and its group's
    NetworkPolicy for a multi-node model), Service, PDB and ScaledObject."""

    service_url: str
    deployment_name: str

    def __init__(self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        model = args.model
        child = pulumi.ResourceOptions(parent=self)
        metadata: k8s.meta.v1.ObjectMetaArgsDict = {"name": model.name, "namespace": args.namespace, "labels": pod_labels(model.name, args.tier)}

        account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=metadata, opts=child)
        # The fetch-weights init container (or, streamed, vLLM itself) needs credentials at its pod's
        # admission: the pods come after the association (see components.iam.pod_identity_role).
        association = self._weights_reader(name, args, account) if model.source.s3 else None
        after_credentials = pulumi.ResourceOptions(parent=self, depends_on=[account, *([association] if association else [])])
        scaler = scaled_object_spec(args.namespace_name, model, args.scaling, args.prometheus_url, args.pool,
                                    fallback_target=args.fallback_target)
        if model.multi_node:
            self._group(name, args, after_credentials)
            scaler = {**scaler, "scaleTargetRef": multi_node.scale_target(model.name)}
            served = multi_node.service_spec(model)
        else:
            described = deployment(
                model,
                namespace=args.namespace,
                tier=args.tier,
                pool_purpose=args.pool_facts.purpose,
                priority_class=args.priority_class,
                api_key_secret=args.api_key_secret,
                hf_token_secret=args.hf_token_secret,
                pool=args.pool,
                region=args.region,
            )
            k8s.apps.v1.Deployment(f"{name}-deployment", metadata=described["metadata"], spec=described["spec"],
                                   opts=after_credentials)
            served = service_spec(model)
        # pulumi_kubernetes types spec as its snake_case TypedDicts; the provider takes Kubernetes' camelCase JSON as the specs write it.
        k8s.core.v1.Service(f"{name}-service", metadata=metadata, spec=served, opts=child)  # type: ignore[call-overload]
        # One budget over every pod of the model, groups included: LeaderWorkerSet recreates a whole group
        # when one of its pods is evicted (RecreateGroupOnPodRestart), so that group's pods all count as
        # unavailable and the next eviction waits until it serves again; one group is disrupted at a time.
        k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=metadata, spec=disruption_budget_spec(model), opts=child)  # type: ignore[call-overload]
        k8s.apiextensions.CustomResource(
            f"{name}-scaler",
            api_version="keda.sh/v1alpha1",
            kind="ScaledObject",
            metadata=metadata,
            spec=scaler,
            # Not after the Deployment: depending on it would wait out the Deployment's whole await
            # (up to the cold-start budget), and the tier would sit at one replica instead of its
            # minimum while the first one loads. The Deployment object itself is created at once (only
            # its readiness is awaited); if the ScaledObject comes first, KEDA's admission webhook only
            # looks the target up for cpu/memory triggers (kedacore/keda,
            # apis/keda/v1alpha1/scaledobject_webhook.go, verifyCPUMemoryScalers; these are all
            # Prometheus triggers) and its controller returns the missing target as an error, so the
            # request is requeued until the Deployment exists (controllers/keda/
            # scaledobject_controller.go, Reconcile, checkTargetResourceIsScalable).
            opts=child,
        )
        self.service_url = service_url(model.name, args.namespace_name)
        self.deployment_name = model.name
        self.register_outputs({"service_url": self.service_url, "deployment_name": self.deployment_name})

    def _group(self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions) -> None:
        """The model's LeaderWorkerSet (one group of ``nodesPerReplica`` pods per replica) and the NetworkPolicy
        that lets a group's pods reach each other (Ray, NCCL)."""
        model = args.model
        described = multi_node.leader_worker_set(
            model, namespace=args.namespace, tier=args.tier, pool_purpose=args.pool_facts.purpose,
            priority_class=args.priority_class, efa_interfaces=args.pool_facts.efa_interfaces(model.gpus_per_replica),
            api_key_secret=args.api_key_secret, hf_token_secret=args.hf_token_secret, region=args.region)
        k8s.apiextensions.CustomResource(
            f"{name}-group", api_version=multi_node.API_VERSION, kind=multi_node.KIND,
            metadata=described["metadata"], spec=described["spec"], opts=opts)
        k8s.networking.v1.NetworkPolicy(  # type: ignore[call-overload]
            f"{name}-group-traffic",
            metadata={"name": f"{model.name}-group", "namespace": args.namespace, "labels": pod_labels(model.name, args.tier)},
            spec=multi_node.group_policy(model.name), opts=pulumi.ResourceOptions(parent=self))

    def _weights_reader(self, name: str, args: ModelServerArgs, account: k8s.core.v1.ServiceAccount) -> aws.eks.PodIdentityAssociation:
        """The model's service account may read its S3 prefix, and nothing else (Pod Identity)."""
        model = args.model
        partition = pulumi.Output.from_input(args.partition) if args.partition is not None else (
            aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition)
        _, association = pod_identity_role(
            f"{name}-weights",
            description=f"Reads weights of model {model.name} ({args.tier}) from S3",
            policy=partition.apply(lambda p: s3_read_policy(p, model.source.bucket, model.source.prefix)),
            cluster_name=args.cluster_name,
            namespace=args.namespace_name,
            service_account=model.name,
            tags=args.tags or {},
            parent=self,
            association_depends_on=[account],
        )
        return association
