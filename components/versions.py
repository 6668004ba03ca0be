"""Every chart, chart version, image, AMI type and add-on version the program emits.

One place, exact values only: nothing here may float (no ``latest``, no ranges). Upgrading a
component means changing one line here and reading its release notes; tests fail on a floating
value anywhere in the emitted plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Image:
    """A container image pinned to an exact tag and, where its digest is known from a cited source,
    to that digest (``sha256:<64 hex>``): the reference is then ``repo:tag@sha256:...`` (the runtime
    pulls by digest; the tag is kept for humans). ``digest`` None: tag only, digest unverified."""

    repository: str
    tag: str
    digest: str | None = None

    def __post_init__(self) -> None:
        if self.digest is not None and not _DIGEST_RE.match(self.digest):
            raise ValueError(f"image {self.repository}:{self.tag}: digest {self.digest!r} is not sha256:<64 hex>")

    def __str__(self) -> str:
        return f"{self.repository}:{self.tag}" + (f"@{self.digest}" if self.digest else "")

    @property
    def chart_tag(self) -> str:
        """The ``image.tag`` value for charts that render ``repository:tag``: ``tag@digest`` makes
        them emit the full pinned reference."""
        return f"{self.tag}@{self.digest}" if self.digest else self.tag


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned to one exact version in one repository (HTTPS index or ``oci://``)."""

    chart: str
    version: str
    repository: str

    @property
    def is_oci(self) -> bool:
        return self.repository.startswith("oci://")

    @property
    def ref(self) -> str:
        """What Helm's ``chart`` argument takes: the bare name, or the full reference for OCI."""
        return f"{self.repository}/{self.chart}" if self.is_oci else self.chart


#: EKS versions this program supports: only minors in EKS standard support (1.32 and 1.33 already bill
#: extended support). The default is the newest minor that EKS, Karpenter 1.14 (1.26-1.36), Cluster
#: Autoscaler (one release per minor) and every pinned chart support. Dates: EKS release calendar.
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.34", "1.35")
DEFAULT_KUBERNETES_VERSION = "1.35"
STANDARD_SUPPORT_ENDS: dict[str, str] = {"1.34": "2026-12-02", "1.35": "2027-03-27"}

#: Managed node group AMI types. ``AL2_x86_64_GPU`` reached end of support on 2025-11-26: never emitted.
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"

#: EKS add-on versions, per add-on, valid for every version in SUPPORTED_KUBERNETES_VERSIONS.
POD_IDENTITY_AGENT_ADDON_VERSION = "v1.3.10-eksbuild.2"


@dataclass(frozen=True)
class EksAddons:
    """Managed add-on versions for one Kubernetes minor (``aws eks describe-addon-versions``)."""

    coredns: str
    kube_proxy: str
    vpc_cni: str
    ebs_csi_driver: str
    pod_identity_agent: str = POD_IDENTITY_AGENT_ADDON_VERSION


#: Per minor: kube-proxy follows the minor; CoreDNS and the VPC CNI are shared across minors.
#: Check with ``aws eks describe-addon-versions --kubernetes-version <minor> --addon-name <name>``
#: before changing the default minor (these builds were not confirmed against that API here).
#: The EBS CSI driver add-on (gp3 volumes of Prometheus/Alertmanager) is one build for both minors:
#: driver v1.59.0 is the upstream release of chart aws-ebs-csi-driver 2.59.0 (NVIDIA/aicr's image
#: inventory, docs: public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.59.0); the ``-eksbuild.1``
#: suffix is UNVERIFIED against describe-addon-versions (not reachable here): check it first.
EBS_CSI_DRIVER_ADDON_VERSION = "v1.59.0-eksbuild.1"
EKS_ADDONS: dict[str, EksAddons] = {
    "1.34": EksAddons(
        coredns="v1.13.2-eksbuild.1", kube_proxy="v1.34.3-eksbuild.2", vpc_cni="v1.21.1-eksbuild.3",
        ebs_csi_driver=EBS_CSI_DRIVER_ADDON_VERSION,
    ),
    "1.35": EksAddons(
        coredns="v1.13.2-eksbuild.1", kube_proxy="v1.35.0-eksbuild.2", vpc_cni="v1.21.1-eksbuild.3",
        ebs_csi_driver=EBS_CSI_DRIVER_ADDON_VERSION,
    ),
}

#: Cluster Autoscaler: chart 9.59.0 (appVersion 1.35.0); the image is the release for the cluster's minor.
CLUSTER_AUTOSCALER = HelmChart(
    chart="cluster-autoscaler", version="9.59.0", repository="https://kubernetes.github.io/autoscaler"
)
CLUSTER_AUTOSCALER_IMAGE_1_34 = Image(repository="registry.k8s.io/autoscaling/cluster-autoscaler", tag="v1.34.5")
#: Digest of v1.35.2 as pinned in public repositories (GitHub code index: two independent files pin
#: ``registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.2@sha256:aac369dc...``). No source found for
#: v1.34.5's digest: tag only (unverified).
CLUSTER_AUTOSCALER_IMAGE_1_35 = Image(
    repository="registry.k8s.io/autoscaling/cluster-autoscaler",
    tag="v1.35.2",
    digest="sha256:aac369dc283927a623deb1af54696efcc722ae79255aa07788422e495bab887d",
)
CLUSTER_AUTOSCALER_IMAGES: dict[str, Image] = {"1.34": CLUSTER_AUTOSCALER_IMAGE_1_34, "1.35": CLUSTER_AUTOSCALER_IMAGE_1_35}

#: NVIDIA DRA driver for GPUs (kubeVersion >= 1.32; DRA's resource.k8s.io/v1 is GA from 1.34).
NVIDIA_DRA_DRIVER = HelmChart(
    chart="nvidia-dra-driver-gpu", version="25.12.0", repository="https://helm.ngc.nvidia.com/nvidia"
)
NVIDIA_DRA_DRIVER_IMAGE = Image(repository="nvcr.io/nvidia/k8s-dra-driver-gpu", tag="v25.12.0")

NVIDIA_DEVICE_PLUGIN = HelmChart(
    chart="nvidia-device-plugin",
    version="0.20.0",
    repository="https://nvidia.github.io/k8s-device-plugin",
)
#: Digest of v0.20.0 as pinned in public repositories (GitHub code index: a DaemonSet manifest and a
#: renovate-style diff both pin ``nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd...``).
NVIDIA_DEVICE_PLUGIN_IMAGE = Image(
    repository="nvcr.io/nvidia/k8s-device-plugin",
    tag="v0.20.0",
    digest="sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
)

#: Karpenter: controller chart and its CRD chart, same version; install the CRD chart first.
KARPENTER = HelmChart(chart="karpenter", version="1.14.1", repository="oci://public.ecr.aws/karpenter")
KARPENTER_CRD = HelmChart(chart="karpenter-crd", version="1.14.1", repository="oci://public.ecr.aws/karpenter")
#: AL2023 EKS AMI release (awslabs/amazon-eks-ami tag) for EC2NodeClasses; the alias also covers
#: the NVIDIA variant. ``al2023@latest`` drifts every node on each release: only where a stack allows it.
KARPENTER_AMI_ALIAS = "al2023@v20260724"
KARPENTER_LATEST_AMI_ALIAS = "al2023@latest"

NVIDIA_GPU_OPERATOR = HelmChart(chart="gpu-operator", version="v26.7.0", repository="https://helm.ngc.nvidia.com/nvidia")
DCGM_EXPORTER = HelmChart(chart="dcgm-exporter", version="4.8.2", repository="https://nvidia.github.io/dcgm-exporter/helm-charts")
DCGM_EXPORTER_IMAGE = Image(repository="nvcr.io/nvidia/k8s/dcgm-exporter", tag="4.5.3-4.8.2")

#: GPU smoke test of ``python -m automation test``: runs ``nvidia-smi`` on a GPU node.
CUDA_SMOKE_IMAGE = Image(repository="nvcr.io/nvidia/cuda", tag="12.9.1-base-ubuntu22.04")

#: Serving: vLLM (V1 engine; metric names with colons), the S3 weight fetcher, the gateway.
#: Digest UNVERIFIED for vLLM v0.33.0 and LiteLLM v1.109.1 (no source found that pins these exact tags
#: by digest; registries unreachable here): tag only until one is checked.
VLLM_IMAGE = Image(repository="vllm/vllm-openai", tag="v0.33.0")
#: Digest of 2.37.5 as pinned in public repositories (GitHub code index: five files in several projects
#: pin ``amazon/aws-cli:2.37.5@sha256:fb7ccfc7...``, one as ``docker.io/amazon/aws-cli``).
AWS_CLI_IMAGE = Image(
    repository="amazon/aws-cli",
    tag="2.37.5",
    digest="sha256:fb7ccfc7b4e3a05017e6c9ded4ba959b99af622130e211fb976c68c2f4d3f224",
)
LITELLM_IMAGE = Image(repository="ghcr.io/berriai/litellm", tag="v1.109.1")
KEDA = HelmChart(chart="keda", version="2.20.2", repository="https://kedacore.github.io/charts")
KUBE_PROMETHEUS_STACK = HelmChart(
    chart="kube-prometheus-stack", version="88.5.3", repository="https://prometheus-community.github.io/helm-charts"
)
