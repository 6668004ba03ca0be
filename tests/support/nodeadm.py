"""nodeadm's NodeConfig (``node.eks.aws/v1alpha1``) as facts the tests judge the program's user data by.

Written down from awslabs/amazon-eks-ami release v20260724, ``nodeadm/api/v1alpha1/nodeconfig_types.go``
(the Go types and their ``+kubebuilder`` markers, from which ``nodeadm/crds/node.eks.aws_nodeconfigs.yaml``
is generated): the fields and types, the enums of ``LocalStorageStrategy``, ``DisabledMount`` and
``Feature``. nodeadm's decoder ignores unknown fields and ``IsFeatureEnabled`` ignores unknown gate names
(``nodeadm/internal/api/featuregates.go``), so the tests refuse both: a misspelt key would otherwise be
dropped without a word. Only what the schema says is here; on a nodeadm bump, compare with the new
release's types and update the release named above.
"""

from __future__ import annotations

from typing import Any

NODEADM_RELEASE = "v20260724"
#: ``Feature`` (``+kubebuilder:validation:Enum``).
FEATURES = frozenset({"InstanceIdNodeName", "FastImagePull"})
#: ``LocalStorageStrategy`` and ``DisabledMount``.
LOCAL_STORAGE_STRATEGIES = ("RAID0", "RAID10", "Mount")
DISABLED_MOUNTS = ("Containerd", "PodLogs", "SOCI")


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _map(values: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": values}


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
#: Fields typed as free-form objects in the Go types (``runtime.RawExtension``-like inline maps).
_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

#: The openAPIV3Schema of ``NodeConfig`` v1alpha1, in the shape ``tests.support.helm_render.custom_resource_errors``
#: judges custom resources by.
NODECONFIG_SCHEMA: dict[str, Any] = _object({
    "apiVersion": _STRING,
    "kind": _STRING,
    "metadata": {"type": "object"},
    "spec": _object({
        "cluster": _object({
            "apiServerEndpoint": _STRING,
            "certificateAuthority": {"type": "string", "format": "byte"},
            "cidr": _STRING,
            "enableOutpost": {"type": "boolean"},
            "id": _STRING,
            "name": _STRING,
        }),
        "containerd": _object({"baseRuntimeSpec": _map(_OPEN), "config": _STRING}),
        "featureGates": _map({"type": "boolean"}),
        "instance": _object({
            "environment": _map(_map(_STRING)),
            "localStorage": _object({
                "disabledMounts": {"type": "array", "items": {"type": "string", "enum": list(DISABLED_MOUNTS)}},
                "mountPath": _STRING,
                "strategy": {"type": "string", "enum": list(LOCAL_STORAGE_STRATEGIES)},
            }),
            "network": _object({"domains": _STRINGS, "nameservers": _STRINGS}),
        }),
        "kubelet": _object({"config": _map(_OPEN), "flags": _STRINGS, "maxPodsExpression": _STRING}),
    }),
})

#: ``(group, version, kind) -> schema``, as ``custom_resource_errors`` takes them.
NODECONFIG_SCHEMAS = {("node.eks.aws", "v1alpha1", "NodeConfig"): NODECONFIG_SCHEMA}
