"""llm-platform: a GPU platform for serving LLMs on AWS EKS, one stack per environment."""

import pulumi

from components.platform import Platform, stack_settings

platform = Platform("llm-platform", stack_settings())

pulumi.export("clusterName", platform.cluster_name)
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("nodeRoleArns", platform.node_role_arns)
if platform.gateway_role_arn is not None:  # the role preflight and verify simulate Bedrock calls as
    pulumi.export("gatewayRoleArn", platform.gateway_role_arn)
if platform.hybrid_node_configs is not None:  # what on-prem servers join with (secret)
    pulumi.export("hybridNodeConfigs", platform.hybrid_node_configs)
    pulumi.export("hybridActivationId", platform.hybrid_activation_id)
