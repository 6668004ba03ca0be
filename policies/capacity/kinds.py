"""Resource type tokens and where each workload kind keeps its pod template(s): one table for the pack.

The capacity model reads the engine's resources with it, and the policies (``lib.resources``,
``lib.pod_templates`` re-export it); it lives here because ``capacity`` is also imported by the program
as ``policies.capacity`` and so imports nothing outside itself.
"""

from __future__ import annotations

from typing import Any

EKS_MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
AWS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EKS_SELF_MANAGED_NODE_GROUPS = frozenset({"eks:index:NodeGroup", "eks:index:NodeGroupV2"})
NODE_GROUP_TYPES = frozenset({EKS_MANAGED_NODE_GROUP, AWS_NODE_GROUP}) | EKS_SELF_MANAGED_NODE_GROUPS
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_INSTANCE = "aws:ec2/instance:Instance"
EKS_CLUSTER = "eks:index:Cluster"
AWS_EKS_CLUSTER = "aws:eks/cluster:Cluster"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
LEGACY_KARPENTER_TYPES = frozenset(
    {
        "kubernetes:karpenter.sh/v1beta1:NodePool",
        "kubernetes:karpenter.sh/v1alpha5:Provisioner",
        "kubernetes:karpenter.k8s.aws/v1beta1:EC2NodeClass",
        "kubernetes:karpenter.k8s.aws/v1alpha1:AWSNodeTemplate",
    }
)
EC2NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_CHART_V4 = "kubernetes:helm.sh/v4:Chart"
HELM_TYPES = frozenset({HELM_RELEASE, HELM_CHART_V4})
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
STATEFULSET = "kubernetes:apps/v1:StatefulSet"
JOB = "kubernetes:batch/v1:Job"
CRONJOB = "kubernetes:batch/v1:CronJob"
LEADER_WORKER_SET = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
ASG_TAG = "aws:autoscaling/tag:Tag"
EKS_ADDON = "aws:eks/addon:Addon"
CLUSTER_TYPES = frozenset({EKS_CLUSTER, AWS_EKS_CLUSTER})

#: Where each workload kind keeps its pod template(s): dotted paths, ``[]`` = every item of a list,
#: ``""`` = the object is the pod. Upstream field names: apps/v1 and batch/v1; LeaderWorkerSet
#: ``leaderworkerset.x-k8s.io/v1`` (``spec.leaderWorkerTemplate.{leaderTemplate,workerTemplate}``,
#: the leader template optional); KubeRay ``ray.io/v1`` (``RayClusterSpec.headGroupSpec.template``,
#: ``workerGroupSpecs[].template``; a RayJob embeds the cluster spec at ``spec.rayClusterSpec`` and may
#: set ``spec.submitterPodTemplate``, a RayService at ``spec.rayClusterConfig``).
#: KServe ``serving.kserve.io/v1beta1`` InferenceService: ``spec.predictor`` (and ``transformer``,
#: ``explainer``) is a pod spec inline (PredictorSpec embeds PodSpec; kserve/kserve
#: pkg/apis/serving/v1beta1/predictor.go), marked by :data:`INLINE_POD_SPEC`; its model/framework
#: fields are containers (:data:`KSERVE_CONTAINER_FIELDS`). Kubeflow ``kubeflow.org/v1`` PyTorchJob:
#: ``spec.pytorchReplicaSpecs.{Master,Worker}.template`` (kubeflow/training-operator
#: pkg/apis/kubeflow.org/v1/pytorch_types.go).
INLINE_POD_SPEC = "@"
INFERENCE_SERVICE = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
KSERVE_CONTAINER_FIELDS = ("model", "huggingface", "pytorch", "tensorflow", "triton", "onnx", "sklearn", "xgboost",
                           "lightgbm", "pmml", "paddle")
_RAY = ("headGroupSpec.template", "workerGroupSpecs[].template")
POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    DEPLOYMENT: ("spec.template",),
    STATEFULSET: ("spec.template",),
    DAEMONSET: ("spec.template",),
    "kubernetes:apps/v1:ReplicaSet": ("spec.template",),
    "kubernetes:core/v1:ReplicationController": ("spec.template",),
    JOB: ("spec.template",),
    CRONJOB: ("spec.jobTemplate.spec.template",),
    "kubernetes:core/v1:PodTemplate": ("template",),
    "kubernetes:core/v1:Pod": ("",),
    LEADER_WORKER_SET: (
        "spec.leaderWorkerTemplate.leaderTemplate",
        "spec.leaderWorkerTemplate.workerTemplate",
    ),
    "kubernetes:ray.io/v1:RayCluster": tuple(f"spec.{p}" for p in _RAY),
    "kubernetes:ray.io/v1:RayJob": (*(f"spec.rayClusterSpec.{p}" for p in _RAY), "spec.submitterPodTemplate"),
    "kubernetes:ray.io/v1:RayService": tuple(f"spec.rayClusterConfig.{p}" for p in _RAY),
    INFERENCE_SERVICE: tuple(
        f"spec.{component}{INLINE_POD_SPEC}" for component in ("predictor", "transformer", "explainer")),
    "kubernetes:kubeflow.org/v1:PyTorchJob": (
        "spec.pytorchReplicaSpecs.Master.template", "spec.pytorchReplicaSpecs.Worker.template"),
}
#: A set of on-prem servers joined as EKS Hybrid Nodes, as the program describes it (its component's
#: inputs and registered outputs carry the same description: ``capacity.hybrid``).
HYBRID_NODE_POOL = "llm-platform:index:HybridNodePool"


def helm_chart_name(props: dict[str, Any]) -> str:
    """The chart a Helm release or chart resource installs: its ``chart`` input without a repository or
    ``oci://`` prefix."""
    chart = props.get("chart")
    return chart.rstrip("/").rsplit("/", 1)[-1] if isinstance(chart, str) else ""
