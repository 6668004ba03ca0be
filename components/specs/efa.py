"""Elastic Fabric Adapter on a managed GPU group, as the engine receives it.

A pool that hosts a multi-node model gets every EFA interface its instance type offers and a cluster
placement group. Karpenter launches EFA interfaces by itself for pods that request
``vpc.amazonaws.com/efa`` (aws/karpenter-provider-aws docs, "Elastic Fabric Adapter"); a managed node
group launches what its launch template says (EKS user guide, "Run machine learning training on Amazon
EKS with Elastic Fabric Adapter"; EC2 user guide, "Get started with EFA"):

- one interface per network card, of type ``efa``: card 0 as device 0 (the primary, ENA and EFA), every
  other card as device 1; the interfaces carry the nodes' security group themselves (a launch template
  that names interfaces cannot take security groups elsewhere);
- a cluster placement group, which keeps the nodes close and lives in one Availability Zone: the group's
  subnets are cut to the first zone's;
- Cluster Autoscaler sizes a group at zero from its template tags, so the group's Auto Scaling group
  advertises ``vpc.amazonaws.com/efa`` there too, or pods that request it never scale it up
  (kubernetes/autoscaler cloudprovider/aws README, "node-template/resources").
"""

from __future__ import annotations

from typing import Any

PLACEMENT_STRATEGY = "cluster"


def efa_network_interfaces(efa_interfaces: int, security_group_id: Any) -> list[dict[str, Any]]:
    """The launch template's network interfaces (engine form) for ``efa_interfaces`` EFA interfaces."""
    return [
        {
            "networkCardIndex": card,
            "deviceIndex": 0 if card == 0 else 1,
            "interfaceType": "efa",
            "securityGroups": [security_group_id],
            "deleteOnTermination": "true",
        }
        for card in range(efa_interfaces)
    ]


def placement_subnets(subnet_ids: list[str]) -> list[str]:
    """A cluster placement group's subnets: the first zone's (the Network's private subnets, one per zone)."""
    return subnet_ids[:1]
