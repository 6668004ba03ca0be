"""One resource as a policy sees it, and the resource type tokens (defined once, in ``capacity.kinds``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capacity.kinds import (  # noqa: F401  (re-exported: the pack's one table of type tokens)
    ASG_TAG,
    AWS_EKS_CLUSTER,
    AWS_NODE_GROUP,
    DAEMONSET,
    EC2_INSTANCE,
    EC2NODECLASS,
    EKS_ADDON,
    EKS_CLUSTER,
    EKS_MANAGED_NODE_GROUP,
    EKS_SELF_MANAGED_NODE_GROUPS,
    HELM_CHART_V4,
    HELM_RELEASE,
    HELM_TYPES,
    HYBRID_NODE_POOL,
    LAUNCH_TEMPLATE,
    LEGACY_KARPENTER_TYPES,
    NODE_GROUP_TYPES,
    NODEPOOL,
    PROMETHEUS_RULE,
    RESOURCE_QUOTA,
    SCALED_OBJECT,
)

from lib.values import dig


@dataclass
class Resource:
    """One resource as a policy sees it: plain inputs plus identity."""

    type: str
    name: str
    urn: str
    props: dict[str, Any]
    parent: str | None = None

    def get(self, *path: str | int, default: Any = None) -> Any:
        return dig(self.props, *path, default=default)

    @property
    def label(self) -> str:
        """How messages name the resource: ``Kind 'name'``."""
        kind = self.type.rsplit(":", 1)[-1]
        return f"{kind} '{self.display_name}'"

    @property
    def display_name(self) -> str:
        name = self.get("metadata", "name")
        if isinstance(name, str) and name:
            return name
        node_group_name = self.get("nodeGroupName")
        if isinstance(node_group_name, str) and node_group_name:
            return node_group_name
        return self.name
