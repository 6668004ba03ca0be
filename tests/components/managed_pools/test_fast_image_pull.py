"""fastImagePull: GPU nodes boot with nodeadm's FastImagePull gate (SOCI parallel pull and unpack).

The user data is judged as nodeadm reads it (awslabs/amazon-eks-ami nodeadm/internal/configprovider/mime.go):
a MIME multipart document whose ``application/node.eks.aws`` parts each hold a NodeConfig, decoded by
nodeadm's API decoder. That decoder ignores unknown fields and ``IsFeatureEnabled`` ignores unknown gate
names (nodeadm/internal/api/featuregates.go), so a misspelt key would be dropped without a word: the NodeConfig
is checked against nodeadm's schema (``tests/support/nodeadm.py``) with unknown fields refused, and the gate
against nodeadm's ``Feature`` enum.
"""

from __future__ import annotations

import base64
import copy
import email

import pytest

from automation.stacks import read_stack_config
from components import versions
from components.capacity_check import parse_settings
from components.settings import SettingsError
from policies.capacity.instances import load_instances
from tests.conftest import child_of_type, gpu_node_groups, plan_with, system_node_group
from tests.support import crd_schema
from tests.support.helm_render import custom_resource_errors
from tests.support.nodeadm import FEATURES, NODECONFIG_SCHEMAS

EC2NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def node_configs(user_data: str) -> list[dict]:
    """The NodeConfigs nodeadm would merge from ``user_data``, parsed with a real MIME parser."""
    import yaml

    message = email.message_from_string(user_data)
    assert message.is_multipart(), "nodeadm reads the program's NodeConfig from a multipart document"
    assert message.get_content_type() == "multipart/mixed"
    return [yaml.safe_load(part.get_payload()) for part in message.walk()
            if part.get_content_type() == "application/node.eks.aws"]


def judged(config: dict) -> dict:
    """``config`` after nodeadm's schema with unknown fields refused, and its gates among nodeadm's."""
    errors = custom_resource_errors(config, NODECONFIG_SCHEMAS)
    assert errors == [], errors
    assert set(config["spec"].get("featureGates") or {}) <= FEATURES
    return config


def launch_user_data(plan, group) -> str | None:
    data = child_of_type(plan, group.parent, "aws:ec2/launchTemplate:LaunchTemplate").inputs.get("userData")
    return base64.b64decode(data).decode() if data else None


def test_managed_gpu_groups_boot_with_the_gate_and_raid0(stack_plan):
    for group in gpu_node_groups(stack_plan):
        (config,) = node_configs(launch_user_data(stack_plan, group))
        assert judged(config) == {
            "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
            "spec": {"featureGates": {"FastImagePull": True}, "instance": {"localStorage": {"strategy": "RAID0"}}},
        }, group.urn
    assert launch_user_data(stack_plan, system_node_group(stack_plan)) is None


def test_karpenter_node_classes_carry_the_gate_in_user_data(stack_plan):
    classes = stack_plan.of_type(EC2NODECLASS)
    assert classes
    for node_class in classes:
        spec = node_class.inputs["spec"]
        # Karpenter writes the RAID0 NodeConfig itself from instanceStorePolicy; the class adds only the gate.
        assert spec["instanceStorePolicy"] == "RAID0"
        (config,) = node_configs(spec["userData"])
        assert judged(config) == {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                                  "spec": {"featureGates": {"FastImagePull": True}}}, node_class.urn
        crd_schema.require()
        outcome = crd_schema.validate(node_class.inputs)
        assert outcome.ok, (node_class.urn, outcome)


def test_turned_off_the_nodes_keep_only_their_raid0():
    config = copy.deepcopy(read_stack_config("dev"))
    for pool in config["llm-platform:gpuPools"]:
        pool["fastImagePull"] = False
    for node_class in config["llm-platform:karpenter"]["nodeClasses"]:
        node_class["fastImagePull"] = False
    plan = plan_with("dev", gpuPools=config["llm-platform:gpuPools"], karpenter=config["llm-platform:karpenter"])
    for group in gpu_node_groups(plan):
        (node_config,) = node_configs(launch_user_data(plan, group))
        assert judged(node_config)["spec"] == {"instance": {"localStorage": {"strategy": "RAID0"}}}
    assert all("userData" not in c.inputs["spec"] for c in plan.of_type(EC2NODECLASS))


@pytest.mark.parametrize("key, path", [
    ("gpuPools", ("gpuPools", 0)),
    ("karpenter", ("karpenter", "nodeClasses", 0)),
])
def test_a_value_that_is_not_a_switch_is_refused_at_its_key(key, path):
    config = copy.deepcopy(read_stack_config("dev"))
    target = config[f"llm-platform:{path[0]}"]
    for step in path[1:]:
        target = target[step]
    target["fastImagePull"] = "sometimes"
    with pytest.raises(SettingsError) as raised:
        parse_settings(config)
    keys = [p.key for p in raised.value.problems]
    assert any(k.endswith(".fastImagePull") and k.startswith(f"llm-platform:{key}") for k in keys), keys


def test_the_pinned_ami_takes_the_gate():
    """Karpenter's pinned alias must be a release whose nodeadm knows FastImagePull (v20250821 or later):
    an older nodeadm would ignore the gate without a word and pull serially."""
    release = versions.KARPENTER_AMI_ALIAS.split("@", 1)[1]
    assert release >= versions.FAST_IMAGE_PULL_MIN_AL2023_RELEASE == "v20250821"


def test_every_gpu_type_meets_nodeadms_threshold_and_has_local_nvme():
    """nodeadm honours the gate only with >= 4 vCPUs and 7 GiB (UseSOCISnapshotter), and AWS recommends
    600 MiB/s where the images land: every GPU node of the program stripes its NVMe drives as RAID0, where
    nodeadm (v20251217 and later) mounts the SOCI store, so the images never land on the root volume. A GPU
    type without local NVMe would need a root volume of at least 600 MiB/s before the gate is safe on it."""
    gpu_types = load_instances().gpu_types()
    assert gpu_types
    assert [t.name for t in gpu_types if not t.local_nvme_gb] == []
    assert [t.name for t in gpu_types if t.vcpu < 4 or t.memory_mib < 7 * 1024] == []


def test_the_schema_refuses_what_nodeadm_would_drop_or_reject():
    """The judge itself: a misspelt gate map, an unknown field and a strategy outside nodeadm's enum."""
    base = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
            "spec": {"featureGates": {"FastImagePull": True}, "instance": {"localStorage": {"strategy": "RAID0"}}}}
    assert custom_resource_errors(base, NODECONFIG_SCHEMAS) == []
    misspelt = copy.deepcopy(base)
    misspelt["spec"]["featureGate"] = misspelt["spec"].pop("featureGates")
    assert custom_resource_errors(misspelt, NODECONFIG_SCHEMAS) == [
        "spec: Additional properties are not allowed ('featureGate' was unexpected)"]
    raid5 = copy.deepcopy(base)
    raid5["spec"]["instance"]["localStorage"]["strategy"] = "RAID5"
    assert custom_resource_errors(raid5, NODECONFIG_SCHEMAS) == [
        "spec.instance.localStorage.strategy: 'RAID5' is not one of ['RAID0', 'RAID10', 'Mount']"]
    assert "FastImagePul" not in FEATURES
