"""ImagePrepull: the model server's image on every GPU node that may run a model, before a pod needs it.

The vLLM image is the largest single step of a cold start (docs/cold-start.md). A DaemonSet in its own
namespace pulls it on each node of the pools that host models as the node joins, and keeps it there, so
a model pod scheduled onto a node that joined earlier (a scale-out, a rollout, a pod replaced after a
failure) finds the image present. The first pod on a node that has just joined gains nothing: the
DaemonSet's pod and the model's pod pull at the same time. docs/cold-start.md explains the choice over
lazy loading (SOCI) and snapshot-backed volumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.serving.network_policy import NetworkIsolation, NetworkIsolationArgs, default_deny
from components.serving.tier import POD_SECURITY_LABELS
from components.specs.serving import PREPULL_LABELS, PREPULL_NAMESPACE, image_prepull_daemonset

TYPE = "llm-platform:index:ImagePrepull"
#: pulumi-kubernetes skips awaiting a resource that carries it (provider/pkg/metadata/overrides.go, SkipAwaitLogic).
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"


@dataclass(frozen=True)
class ImagePrepullArgs:
    """Inputs of :class:`ImagePrepull`: the image and the GPU pools (name -> purpose) whose nodes get it."""

    image: str
    pools: dict[str, str] = field(default_factory=dict)


class ImagePrepull(pulumi.ComponentResource):
    """Namespace (Pod Security ``restricted``, default-deny network: its pods talk to nothing; the kubelet,
    not the pod, pulls the image) and the pre-pull DaemonSet."""

    namespace: str

    def __init__(self, name: str, args: ImagePrepullArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": PREPULL_NAMESPACE, "labels": {**PREPULL_LABELS, **POD_SECURITY_LABELS}},
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        NetworkIsolation(
            f"{name}-isolation",
            NetworkIsolationArgs(namespace=PREPULL_NAMESPACE, policies={"default-deny": default_deny()}, labels=PREPULL_LABELS),
            opts=in_namespace,
        )
        described = image_prepull_daemonset(args.image, args.pools)
        k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            # Not awaited (pulumi-kubernetes awaits a DaemonSet's rollout otherwise): every node pulling the
            # image takes minutes, and a slow pull only delays an optimisation, never the models, which pull
            # the image themselves if they get there first.
            metadata={**described["metadata"], "annotations": {SKIP_AWAIT_ANNOTATION: "true"}},
            spec=described["spec"],
            opts=in_namespace,
        )
        self.namespace = PREPULL_NAMESPACE
        self.register_outputs({"namespace": self.namespace})
