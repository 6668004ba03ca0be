"""Prefix-aware routing: the CRDs its objects use, and one Endpoint Picker per routed model.

``RoutingCrds`` applies the pinned release manifests (``versions.ROUTING_CRDS``) from their release
download addresses; ``EndpointPicker`` installs llm-d-router's standalone chart for one model (the
objects and the reasons are in :mod:`components.specs.routing`). The chart is rendered by the provider
(``helm.sh/v4`` Chart) so that the program can finish what the chart's values cannot say: a Pulumi
transform gives the picker's pod the security context Pod Security ``restricted`` requires.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.specs import routing
from policies.capacity.kinds import DEPLOYMENT

CRDS_TYPE = "llm-platform:index:RoutingCrds"
PICKER_TYPE = "llm-platform:index:EndpointPicker"


class RoutingCrds(pulumi.ComponentResource):
    """Gateway API (standard channel), InferencePool and llm-d-router's CRDs at their pinned releases.

    InferencePool is what each picker's chart creates; the llm-d.ai CRDs (InferenceObjective) are read by
    the picker when present, so a team can give requests priorities; Gateway API is the HTTPRoute and
    Gateway a conformant gateway would need (docs/prefix-aware-routing.md), pinned here so one owner
    decides its version (its ``safe-upgrades`` admission policy refuses older copies)."""

    manifests: list[str]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(CRDS_TYPE, name, None, opts)
        previous: list[pulumi.Resource] = []
        for manifest in versions.ROUTING_CRDS:
            applied = k8s.yaml.v2.ConfigFile(
                f"{name}-{manifest.name}", file=manifest.url,
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(previous)),
            )
            previous = [applied]
        self.manifests = [manifest.url for manifest in versions.ROUTING_CRDS]
        self.register_outputs({"manifests": self.manifests})


@dataclass(frozen=True)
class EndpointPickerArgs:
    """Inputs of :class:`EndpointPicker`: the model (its name is the release and pool name), the tier's
    namespace, and how many picker replicas (``routing.picker_replicas``)."""

    model: str
    namespace: str
    replicas: int = 1
    #: The model spans nodes: the pool selects its groups' leaders only (``routing.pool_selector``).
    leaders_only: bool = False


def restricted_picker_pods(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Pulumi transform on the chart's objects: the picker Deployment gets its security context."""
    if args.type_ != DEPLOYMENT:
        return None
    patched = routing.restricted_pod_security(dict(args.props))
    return None if patched is None else pulumi.ResourceTransformResult(props=patched, opts=args.opts)


class EndpointPicker(pulumi.ComponentResource):
    """One model's InferencePool, Endpoint Picker and Envoy (chart ``llm-d-router-standalone``)."""

    url: str

    def __init__(self, name: str, args: EndpointPickerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(PICKER_TYPE, name, None, opts)
        chart = versions.LLM_D_ROUTER_STANDALONE
        k8s.helm.v4.Chart(
            f"{name}-chart",
            name=args.model,
            chart=chart.ref,
            version=chart.version,
            namespace=args.namespace,
            values=routing.picker_values(args.model, replicas=args.replicas, leaders_only=args.leaders_only),
            opts=pulumi.ResourceOptions(parent=self, transforms=[restricted_picker_pods]),
        )
        self.url = routing.routed_url(args.model, args.namespace)
        self.register_outputs({"url": self.url})
