"""GroupController: the LeaderWorkerSet controller, which runs the groups of models larger than one node.

Helm installs a chart's ``crds/`` on the first install only and never upgrades them (Helm docs, "Custom
Resource Definitions": "There is no support at this time for upgrading or deleting CRDs using Helm"), and
the ``lws`` chart ships its CRDs only there. So the release skips them and the program applies the
CRD files of the pinned tag itself (``versions.LWS_CRD_URLS``): a version bump updates the CRDs in the
same update, before the new controller starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import contract, versions
from components.helm import pinned_release

TYPE = "llm-platform:index:GroupController"


@dataclass(frozen=True)
class GroupControllerArgs:
    """Inputs of :class:`GroupController`. The controller runs on the system pool."""

    namespace: str = "lws-system"


def lws_values() -> dict[str, object]:
    """System-pool placement, two replicas (the manager elects a leader: charts/lws templates/manager/
    configmap.yaml ``leaderElect: true``), the image pinned, no Prometheus objects (the stack scrapes none)."""
    return {
        "replicaCount": 2,
        "image": {"manager": {"repository": versions.LWS_IMAGE.repository, "tag": versions.LWS_IMAGE.chart_tag,
                              "pullPolicy": "IfNotPresent"}},
        "nodeSelector": contract.system_node_selector(),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "enablePrometheus": False,
        "enableCertManager": False,
    }


class GroupController(pulumi.ComponentResource):
    """The pinned ``lws`` release and its CRDs, applied by the program (upgraded with the pin)."""

    namespace: str

    def __init__(self, name: str, args: GroupControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        crds = k8s.yaml.v2.ConfigGroup(f"{name}-crds", files=list(versions.LWS_CRD_URLS),
                                       opts=pulumi.ResourceOptions(parent=self))
        self.release = pinned_release(
            f"{name}-release",
            versions.LWS,
            release_name="lws",
            namespace=args.namespace,
            values=lws_values(),
            skip_crds=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[crds]),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
