"""EventAutoscaler: KEDA, which scales model Deployments on Prometheus queries (and to zero)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components import contract, versions
from components.helm import pinned_release

TYPE = "llm-platform:index:EventAutoscaler"


@dataclass(frozen=True)
class EventAutoscalerArgs:
    """Inputs of :class:`EventAutoscaler`. KEDA runs on the system pool."""

    namespace: str = "keda"


def _keda_image(image: versions.Image) -> dict[str, str]:
    """An image as KEDA's chart spells it: ``registry`` and ``repository`` apart, ``tag``
    (``tag@digest`` when pinned by digest; the chart renders ``registry/repository:tag``)."""
    return {"registry": image.registry, "repository": image.path, "tag": image.chart_tag}


def keda_values() -> dict[str, object]:
    """System-pool placement, bounded resources, and the three images pinned (the chart would take
    its appVersion otherwise)."""
    return {
        "image": {
            "keda": _keda_image(versions.KEDA_OPERATOR_IMAGE),
            "metricsApiServer": _keda_image(versions.KEDA_METRICS_APISERVER_IMAGE),
            "webhooks": _keda_image(versions.KEDA_ADMISSION_WEBHOOKS_IMAGE),
        },
        "nodeSelector": contract.system_node_selector(),
        "resources": {
            "operator": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
            "metricServer": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
            "webhooks": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        },
    }


class EventAutoscaler(pulumi.ComponentResource):
    """A pinned KEDA release; ScaledObjects are created by each model."""

    namespace: str

    def __init__(self, name: str, args: EventAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        pinned_release(
            f"{name}-release",
            versions.KEDA,
            release_name="keda",
            namespace=args.namespace,
            values=keda_values(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = args.namespace
        self.register_outputs({"namespace": self.namespace})
