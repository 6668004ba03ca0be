"""Every chart, chart version, image, AMI type and add-on version the program emits.

One place, exact values only: nothing here may float (no ``latest``, no ranges). Upgrading a
component means changing one line here and reading its release notes; tests fail on a floating
value anywhere in the emitted plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

#: What a pinned digest looks like (also what the digest resolver writes).
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Image:
    """A container image pinned to an exact tag and, where its digest is known from a cited source,
    to that digest (``sha256:<64 hex>``): the reference is then ``repo:tag@sha256:...`` (the runtime
    pulls by digest; the tag is kept for humans). ``digest`` None: tag only, digest unverified."""

    repository: str
    tag: str
    digest: str | None = None

    def __post_init__(self) -> None:
        if self.digest is not None and not DIGEST_RE.match(self.digest):
            raise ValueError(f"image {self.repository}:{self.tag}: digest {self.digest!r} is not sha256:<64 hex>")

    def __str__(self) -> str:
        return f"{self.repository}:{self.tag}" + (f"@{self.digest}" if self.digest else "")

    @property
    def chart_tag(self) -> str:
        """The ``image.tag`` value for charts that render ``repository:tag``: ``tag@digest`` makes
        them emit the full pinned reference."""
        return f"{self.tag}@{self.digest}" if self.digest else self.tag

    @property
    def registry(self) -> str:
        """The registry host, for charts that take it apart from the repository (``quay.io``);
        a name without a host is on Docker Hub."""
        first, _, rest = self.repository.partition("/")
        return first if rest and ("." in first or ":" in first or first == "localhost") else "docker.io"

    @property
    def path(self) -> str:
        """The repository without its registry host (``prometheus/alertmanager``)."""
        first, _, rest = self.repository.partition("/")
        return rest if rest and self.registry == first else self.repository


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


@dataclass(frozen=True)
class KubernetesSupport:
    """One Kubernetes minor on EKS: when EKS released it, when standard support ends (after which
    every cluster hour bills extended support, 6x the standard cluster price), when extended support
    ends (EKS then upgrades the cluster itself)."""

    released: date
    standard_support_ends: date
    extended_support_ends: date


#: EKS release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html: standard
#: support 14 months from EKS's release, extended 12 months more; dates as that table gives them).
EKS_KUBERNETES_SUPPORT: dict[str, KubernetesSupport] = {
    "1.32": KubernetesSupport(date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    "1.33": KubernetesSupport(date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": KubernetesSupport(date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": KubernetesSupport(date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
    "1.36": KubernetesSupport(date(2026, 6, 2), date(2027, 8, 2), date(2028, 8, 2)),
}
#: Settings warn this many days before a stack's minor leaves standard support, and refuse it after.
SUPPORT_WARNING_DAYS = 60

#: Kubernetes minors each pinned component is known to run on, with the source of each range.
#: A minor outside a component's range is accepted with a warning that names the component.
COMPONENT_KUBERNETES_RANGES: dict[str, tuple[str, str, str]] = {
    "Karpenter 1.14.1": ("1.26", "1.36", "karpenter.sh/v1.14/upgrading/compatibility (compatibility matrix)"),
    "KEDA 2.20.2": ("1.33", "1.35", "keda.sh/docs/2.20/operate/cluster (tested window; 2.21 is tested on 1.34-1.36)"),
    "DRA driver for NVIDIA GPUs 0.4.1": ("1.32", "1.36", "chart kubeVersion >=1.32.0-0; resource.k8s.io/v1 GA from 1.34"),
    "kube-prometheus-stack 88.5.3": ("1.25", "1.36", "chart kubeVersion >=1.25.0-0"),
    # The chart's kubeVersion (>= 1.16.0-0) is not the support range: NVIDIA validates each release on a
    # window of minors and lists it per platform.
    "NVIDIA GPU Operator v26.7.0": ("1.33", "1.36", "NVIDIA's platform support matrix for v26.7.0, Amazon EKS "
                                    "column (NVIDIA/cloud-native-docs gpu-operator/platform-support.rst at 52dcb7b8, "
                                    "2026-08-21)"),
}


def components_not_running_on(minor: str) -> list[tuple[str, str, str, str]]:
    """Each pinned component whose known range leaves ``minor`` out: (component, low, high, source)."""
    def key(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    return [(component, low, high, source) for component, (low, high, source) in COMPONENT_KUBERNETES_RANGES.items()
            if not key(low) <= key(minor) <= key(high)]


#: Minors released upstream that EKS does not offer yet, and where that was checked. Kubernetes 1.37 was
#: released on 2026-08-26 (kubernetes.io/blog/2026/08/26/kubernetes-v1-37-release); EKS's release calendar
#: (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html) has no 1.37 row in any copy read, and
#: AWS's tracking request (github.com/aws/containers-roadmap/issues/2864) was still open in 2026-11.
NOT_YET_ON_EKS: dict[str, str] = {
    "1.37": "EKS does not offer it yet (no 1.37 in the EKS release calendar; aws/containers-roadmap's request for "
            "it is open)",
}

#: EKS versions this program creates clusters on: minors in EKS standard support (1.32 and 1.33
#: already bill extended support; 1.34 is refused from the day its standard support ends).
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.34", "1.35", "1.36")
#: 1.35, not 1.36: KEDA 2.20.2 (the pinned chart) is tested on 1.33-1.35 only, and KEDA 2.21, tested on
#: 1.36, is not yet packaged where the tests can render it (../shared/charts). Every other pinned piece
#: supports 1.36 (COMPONENT_KUBERNETES_RANGES; Cluster Autoscaler has an image per minor).
DEFAULT_KUBERNETES_VERSION = "1.35"
STANDARD_SUPPORT_ENDS: dict[str, str] = {
    minor: EKS_KUBERNETES_SUPPORT[minor].standard_support_ends.isoformat() for minor in SUPPORTED_KUBERNETES_VERSIONS
}

#: Managed node group AMI types. ``AL2_x86_64_GPU`` reached end of support on 2025-11-26: never emitted.
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"

#: EKS add-on versions, per add-on and Kubernetes minor.
POD_IDENTITY_AGENT_ADDON_VERSION = "v1.3.10-eksbuild.3"


@dataclass(frozen=True)
class EksAddons:
    """Managed add-on versions for one Kubernetes minor (``aws eks describe-addon-versions``)."""

    coredns: str
    kube_proxy: str
    vpc_cni: str
    ebs_csi_driver: str
    pod_identity_agent: str = POD_IDENTITY_AGENT_ADDON_VERSION


#: Per minor: kube-proxy follows the minor; CoreDNS, the VPC CNI and the EBS CSI driver are shared
#: builds. No AWS API here: each build is the newest that public infrastructure repositories pin on a
#: cluster of that minor (GitHub code index, 2026-11), and ``python -m automation versions outdated``
#: checks them against ``aws eks describe-addon-versions`` where AWS is reachable.
#: - 1.36: the builds EKS itself chose as defaults on a 1.36 cluster (a public stack that declares its
#:   add-ons without versions records CoreDNS v1.14.3-eksbuild.24, kube-proxy v1.36.0-eksbuild.25, VPC
#:   CNI v1.23.1-eksbuild.1, Pod Identity Agent v1.4.0-eksbuild.2); EBS CSI v1.66.0-eksbuild.1 as pinned
#:   beside kube-proxy v1.36.0-eksbuild.25 in another 1.36 stack.
#: - 1.35: VPC CNI v1.23.1-eksbuild.1, CoreDNS v1.14.3-eksbuild.22, kube-proxy v1.35.3-eksbuild.29 and
#:   EBS CSI v1.66.0-eksbuild.1, pinned together for a 1.35 cluster (node release 1.35.7-20260911) in two
#:   public stacks; Pod Identity Agent v1.3.10-eksbuild.3 as before.
#: - 1.34 keeps the builds it was checked with (it leaves standard support on 2026-12-02).
VPC_CNI_ADDON_VERSION = "v1.23.1-eksbuild.1"
EBS_CSI_DRIVER_ADDON_VERSION = "v1.66.0-eksbuild.1"
EKS_ADDONS: dict[str, EksAddons] = {
    "1.34": EksAddons(
        coredns="v1.13.2-eksbuild.1", kube_proxy="v1.34.3-eksbuild.2", vpc_cni="v1.21.1-eksbuild.3",
        ebs_csi_driver="v1.59.0-eksbuild.1", pod_identity_agent="v1.3.10-eksbuild.2",
    ),
    "1.35": EksAddons(
        coredns="v1.14.3-eksbuild.22", kube_proxy="v1.35.3-eksbuild.29", vpc_cni=VPC_CNI_ADDON_VERSION,
        ebs_csi_driver=EBS_CSI_DRIVER_ADDON_VERSION,
    ),
    "1.36": EksAddons(
        coredns="v1.14.3-eksbuild.24", kube_proxy="v1.36.0-eksbuild.25", vpc_cni=VPC_CNI_ADDON_VERSION,
        ebs_csi_driver=EBS_CSI_DRIVER_ADDON_VERSION, pod_identity_agent="v1.4.0-eksbuild.2",
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
#: v1.36.0 by digest, as three files in public infrastructure repositories pin it (GitHub code index,
#: 2026-11). v1.36.1 exists too, but only one public file pins its digest: move to it once
#: ``python -m automation images resolve`` has run where registry.k8s.io is reachable.
CLUSTER_AUTOSCALER_IMAGE_1_36 = Image(
    repository="registry.k8s.io/autoscaling/cluster-autoscaler",
    tag="v1.36.0",
    digest="sha256:dc5d62770338c2902f31b01f95c9fc8c456fd88baa5364ca154d6e47069ec885",
)
CLUSTER_AUTOSCALER_IMAGES: dict[str, Image] = {
    "1.34": CLUSTER_AUTOSCALER_IMAGE_1_34, "1.35": CLUSTER_AUTOSCALER_IMAGE_1_35, "1.36": CLUSTER_AUTOSCALER_IMAGE_1_36,
}

#: DRA Driver for NVIDIA GPUs, moved to kubernetes-sigs/dra-driver-nvidia-gpu (SemVer from 0.4; kubeVersion
#: >= 1.32; DRA's resource.k8s.io/v1 is GA from 1.34). It supersedes NVIDIA's ``nvidia-dra-driver-gpu``
#: 25.12 line, which stacks installed before; going back to it is unsupported (docs/dra.md).
NVIDIA_DRA_DRIVER = HelmChart(
    chart="dra-driver-nvidia-gpu", version="0.4.1", repository="oci://registry.k8s.io/dra-driver-nvidia/charts"
)
#: The chart's image (``fullimage``: ``image.repository`` and ``v`` + appVersion), set explicitly.
NVIDIA_DRA_DRIVER_IMAGE = Image(repository="registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu", tag="v0.4.1")
#: The chart's old name, kept as release name and ``nameOverride``: the chart names its objects and their
#: selector label key after ``nameOverride`` or else the chart, so the same names keep a DaemonSet's
#: immutable selector and let an upgrade roll it instead of replacing it.
NVIDIA_DRA_DRIVER_NAME = "nvidia-dra-driver-gpu"


@dataclass(frozen=True)
class RepositoryFile:
    """One file of a GitHub repository at a pinned tag (CRDs a chart keeps in its ``crds/`` folder)."""

    repository: str
    tag: str
    path: str

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repository}/{self.tag}/{self.path}"

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


#: The DRA driver's ComputeDomain CRDs, as its chart ships them in ``crds/``. Helm installs ``crds/``
#: on first install only and never upgrades them, so the program applies them itself, before the release.
NVIDIA_DRA_DRIVER_CRDS = tuple(
    RepositoryFile("kubernetes-sigs/dra-driver-nvidia-gpu", "v0.4.1", f"deployments/helm/dra-driver-nvidia-gpu/crds/{f}")
    for f in ("resource.nvidia.com_computedomaincliques.yaml", "resource.nvidia.com_computedomains.yaml")
)

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
#: v20260930: the newest release seen pinned, by a public stack that checked on 2026-10-02 that SSM's
#: ``/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-
#: standard-1.35-v20260930/image_id`` exists (the path Karpenter's ``pkg/providers/amifamily/al2023.go``
#: resolves a pinned alias through); one release tag covers every variant, NVIDIA's included.
KARPENTER_AMI_ALIAS = "al2023@v20260930"
#: The first AL2023 EKS AMI release whose ``nodeadm`` takes the ``FastImagePull`` feature gate (SOCI snapshotter
#: in parallel pull and unpack mode): awslabs/amazon-eks-ami v20250821 (the gate shipped as ``AggressiveImagePull``
#: in v20250813 and was renamed before any other release; every AL2023 variant, NVIDIA's included, installs
#: ``soci-snapshotter`` in ``templates/al2023/provisioners/install-worker.sh``). From v20251217 nodeadm also
#: bind-mounts the SOCI store onto the instance-store RAID0 (PR #2548), where the program's GPU nodes keep
#: containerd. Managed GPU groups get EKS's newest release for their minor, and every AL2023 release for 1.34
#: and later postdates both; Karpenter's pinned alias is checked against it in tests.
FAST_IMAGE_PULL_MIN_AL2023_RELEASE = "v20250821"
#: Bottlerocket's first release with the SOCI snapshotter and its parallel-pull-unpack mode (settings
#: ``container-runtime.snapshotter`` and ``container-runtime-plugins.soci-snapshotter``): v1.44.0
#: (bottlerocket-os/bottlerocket release notes, 2025-08-04). The program emits no Bottlerocket node.
FAST_IMAGE_PULL_MIN_BOTTLEROCKET_RELEASE = "v1.44.0"
KARPENTER_LATEST_AMI_ALIAS = "al2023@latest"

NVIDIA_GPU_OPERATOR = HelmChart(chart="gpu-operator", version="v26.7.0", repository="https://helm.ngc.nvidia.com/nvidia")
DCGM_EXPORTER = HelmChart(chart="dcgm-exporter", version="4.8.2", repository="https://nvidia.github.io/dcgm-exporter/helm-charts")
DCGM_EXPORTER_IMAGE = Image(repository="nvcr.io/nvidia/k8s/dcgm-exporter", tag="4.5.3-4.8.2")

#: GPU smoke test of ``python -m automation test``: runs ``nvidia-smi`` on a GPU node.
CUDA_SMOKE_IMAGE = Image(repository="nvcr.io/nvidia/cuda", tag="12.9.1-base-ubuntu22.04")

#: Serving: vLLM (V1 engine; metric names with colons), the S3 weight fetcher, the gateway.
#: Digest UNVERIFIED for vLLM v0.33.0 and LiteLLM v1.110.2 (no source found that pins these exact tags
#: by digest; registries unreachable here): tag only until one is checked.
VLLM_IMAGE = Image(repository="vllm/vllm-openai", tag="v0.33.0")
#: Digest of 2.37.5 as pinned in public repositories (GitHub code index: five files in several projects
#: pin ``amazon/aws-cli:2.37.5@sha256:fb7ccfc7...``, one as ``docker.io/amazon/aws-cli``).
AWS_CLI_IMAGE = Image(
    repository="amazon/aws-cli",
    tag="2.37.5",
    digest="sha256:fb7ccfc7b4e3a05017e6c9ded4ba959b99af622130e211fb976c68c2f4d3f224",
)
#: LiteLLM tags releases ``vX.Y.Z`` since 1.84.0 (no ``-stable`` suffix any more: docs.litellm.ai/blog/
#: cleaner-release-versions); 1.110.2 is the hotfix release of 1.110.
LITELLM_IMAGE = Image(repository="ghcr.io/berriai/litellm", tag="v1.110.2")
#: The pre-pull DaemonSet's long-running container (components/serving/image_prepull.py): it only keeps the
#: pod, and so the pulled image, on the node. Digest of 3.10.1 as pinned in public repositories (GitHub code
#: index: several projects pin ``registry.k8s.io/pause:3.10.1@sha256:278fb9db...``).
PAUSE_IMAGE = Image(
    repository="registry.k8s.io/pause",
    tag="3.10.1",
    digest="sha256:278fb9dbcca9518083ad1e11276933a2e96f23de604a3a08cc3c80002767d24c",
)
KEDA = HelmChart(chart="keda", version="2.20.2", repository="https://kedacore.github.io/charts")
#: The AWS EFA device plugin (aws/eks-charts stable/aws-efa-k8s-device-plugin; chart v0.5.30, appVersion v0.5.20).
AWS_EFA_DEVICE_PLUGIN = HelmChart(chart="aws-efa-k8s-device-plugin", version="v0.5.30",
                                  repository="https://aws.github.io/eks-charts")
AWS_EFA_DEVICE_PLUGIN_IMAGE = Image(repository="602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin",
                                    tag="v0.5.20")
#: LeaderWorkerSet: the controller that serves models larger than one node (chart version with its ``v``,
#: as published at oci://registry.k8s.io/lws/charts; kubernetes-sigs/lws tag v0.10.0).
LWS = HelmChart(chart="lws", version="v0.10.0", repository="oci://registry.k8s.io/lws/charts")
LWS_IMAGE = Image(repository="registry.k8s.io/lws/lws", tag="v0.10.0")
#: The chart's ``crds/`` at the same tag: Helm applies ``crds/`` only on a first install (never on upgrade),
#: so the program applies these itself and the release skips them. The bundled controller always runs the
#: DisaggregatedSet reconcilers too (charts/lws/values.yaml), so all three CRDs are required.
LWS_CRD_URLS = tuple(
    f"https://raw.githubusercontent.com/kubernetes-sigs/lws/{LWS.version}/charts/lws/crds/{name}"
    for name in ("leaderworkerset.x-k8s.io_leaderworkersets.yaml", "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
                 "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml")
)
KUBE_PROMETHEUS_STACK = HelmChart(
    chart="kube-prometheus-stack", version="88.5.3", repository="https://prometheus-community.github.io/helm-charts"
)


# --- Chart-default images, pinned explicitly -------------------------------------------------------
# Every image below is what the pinned chart would pull on its own (its values.yaml or appVersion, read
# from the packaged chart in ../shared/charts): the program sets each one explicitly, so a chart bump
# cannot change an image unseen and ``python -m automation images resolve`` can pin them by digest.
# Tags exactly as the chart's defaults give them; none bumped. Registries are unreachable here: a digest
# is given only where public repositories pin the same tag by it; the others are tag only, and prod
# lists them in policies/config/prod.json ``digestExemptImages``.

#: NVIDIA GPU Operator v26.7.0 (values.yaml; the operator, validator and node-status exporter share
#: the operator's image at the chart's appVersion). ``devicePlugin`` and ``gfd`` default to
#: k8s-device-plugin v0.20.0, i.e. NVIDIA_DEVICE_PLUGIN_IMAGE; ``dcgmExporter`` uses DCGM_EXPORTER_IMAGE.
GPU_OPERATOR_IMAGE = Image(repository="nvcr.io/nvidia/gpu-operator", tag="v26.7.0")
#: The operator appends the node's OS to the driver's version (``595.91.07-ubuntu22.04``): only hybrid
#: nodes run it (cloud AMIs ship the driver).
GPU_OPERATOR_DRIVER_IMAGE = Image(repository="nvcr.io/nvidia/driver", tag="595.91.07")
GPU_OPERATOR_DRIVER_MANAGER_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/k8s-driver-manager", tag="v0.12.0")
GPU_OPERATOR_TOOLKIT_IMAGE = Image(repository="nvcr.io/nvidia/k8s/container-toolkit", tag="v1.20.0")
GPU_OPERATOR_DCGM_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/dcgm", tag="4.6.0-1-ubuntu24.04")
GPU_OPERATOR_MIG_MANAGER_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/k8s-mig-manager", tag="v0.15.0")
GPU_OPERATOR_GDS_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/nvidia-fs", tag="2.29.4")
GPU_OPERATOR_GDRCOPY_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/gdrdrv", tag="v2.6")
GPU_OPERATOR_VGPU_DEVICE_MANAGER_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/vgpu-device-manager", tag="v0.5.0")
GPU_OPERATOR_SANDBOX_DEVICE_PLUGIN_IMAGE = Image(repository="nvcr.io/nvidia/kubevirt-gpu-device-plugin", tag="v1.6.0")
GPU_OPERATOR_KATA_SANDBOX_DEVICE_PLUGIN_IMAGE = Image(
    repository="nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin", tag="v0.0.5"
)
GPU_OPERATOR_CC_MANAGER_IMAGE = Image(repository="nvcr.io/nvidia/cloud-native/k8s-cc-manager", tag="v0.4.3")
#: The operator chart's node-feature-discovery subchart 0.19.0 (appVersion v0.19.0).
NODE_FEATURE_DISCOVERY_IMAGE = Image(repository="registry.k8s.io/nfd/node-feature-discovery", tag="v0.19.0")

#: KEDA 2.20.2: the three images at the chart's appVersion.
KEDA_OPERATOR_IMAGE = Image(repository="ghcr.io/kedacore/keda", tag="2.20.2")
KEDA_METRICS_APISERVER_IMAGE = Image(repository="ghcr.io/kedacore/keda-metrics-apiserver", tag="2.20.2")
KEDA_ADMISSION_WEBHOOKS_IMAGE = Image(repository="ghcr.io/kedacore/keda-admission-webhooks", tag="2.20.2")

#: kube-prometheus-stack 88.5.3 (appVersion v0.93.1 for the operator and its config reloader) and
#: its subcharts kube-state-metrics 8.4.0 (v2.20.0), prometheus-node-exporter 4.56.1 (v1.12.1; the
#: stack asks for the distroless variant) and grafana 12.11.1 (13.2.0).
PROMETHEUS_OPERATOR_IMAGE = Image(repository="quay.io/prometheus-operator/prometheus-operator", tag="v0.93.1")
PROMETHEUS_CONFIG_RELOADER_IMAGE = Image(repository="quay.io/prometheus-operator/prometheus-config-reloader", tag="v0.93.1")
#: Digests of the multi-arch indexes as pinned in public repositories (GitHub code index, 2026-11):
#: v3.14.0-distroless ``50c707e9...`` in seven files of several projects (``prom/prometheus``, the same
#: index on Docker Hub) and in one that names it on quay.io; alertmanager v0.34.0 ``690c7b52...`` in three
#: files of two projects on quay.io (and a fourth on ghcr.io).
PROMETHEUS_IMAGE = Image(
    repository="quay.io/prometheus/prometheus",
    tag="v3.14.0-distroless",
    digest="sha256:50c707e96da5ade383cb1707790576480485e93de06aa60ad8802cb5f744bd0a",
)
ALERTMANAGER_IMAGE = Image(
    repository="quay.io/prometheus/alertmanager",
    tag="v0.34.0",
    digest="sha256:690c7b525f4367aa91f73e2f91c632206d32e97c6384bdbf2fb7a861b420340d",
)
#: The operator's default Thanos sidecar image (an operator flag; no sidecar runs unless configured).
THANOS_IMAGE = Image(repository="quay.io/thanos/thanos", tag="v0.42.4")
#: The admission webhook's certificate Jobs (create and patch).
KUBE_WEBHOOK_CERTGEN_IMAGE = Image(repository="ghcr.io/jkroepke/kube-webhook-certgen", tag="1.8.7")
#: Digest of v2.20.0's index as two independent public files pin it (GitHub code index, 2026-11).
KUBE_STATE_METRICS_IMAGE = Image(
    repository="registry.k8s.io/kube-state-metrics/kube-state-metrics",
    tag="v2.20.0",
    digest="sha256:42cfe3723a5f058171c627537fb57a3ea0f26e4380fa18555a95cb1a1b4cfc5b",
)
NODE_EXPORTER_IMAGE = Image(repository="quay.io/prometheus/node-exporter", tag="v1.12.1-distroless")
#: Digest of 13.2.0's index as eight public files of several projects pin it (GitHub code index, 2026-11).
GRAFANA_IMAGE = Image(
    repository="docker.io/grafana/grafana",
    tag="13.2.0",
    digest="sha256:3fd54ae1214669f8355f065ec9f6445d5279a3d77095ab048ca045685272429b",
)
GRAFANA_SIDECAR_IMAGE = Image(repository="quay.io/kiwigrid/k8s-sidecar", tag="2.10.1")

#: Karpenter 1.14.1's controller (chart values ``controller.image``, set by components/karpenter/controller.py;
#: the packaged chart's digest is empty). No digest: upstream's release commits stamp two different ones for
#: 1.14.1 into charts/karpenter/values.yaml (c88abbbad "Stable Release updates Release v1.14.1": sha256:445baefa...,
#: a later docs commit: sha256:72313094...), so neither is taken without a registry to ask.
KARPENTER_CONTROLLER_IMAGE = Image(repository="public.ecr.aws/karpenter/controller", tag="1.14.1")


# --- Prefix-aware routing: the Endpoint Picker, its proxy, and the CRDs their objects use ---------
#: llm-d-router's standalone chart (the Endpoint Picker with its own Envoy, no Gateway controller), as
#: ``hack/push-chart.sh`` publishes a release tag: version and appVersion ``v0.10.0`` (with the ``v``).
LLM_D_ROUTER_STANDALONE = HelmChart(chart="llm-d-router-standalone", version="v0.10.0", repository="oci://ghcr.io/llm-d/charts")
#: The chart's release-stamped picker image (values ``router.epp.image``); distroless, user 65532 (its
#: Dockerfile.epp). Tag only: no public source pins its digest.
ENDPOINT_PICKER_IMAGE = Image(repository="ghcr.io/llm-d/llm-d-router-endpoint-picker", tag="v0.10.0")
#: The chart's Envoy preset image (``router.proxy.presets.envoy.image``), set explicitly.
ENVOY_PROXY_IMAGE = Image(repository="docker.io/envoyproxy/envoy", tag="distroless-v1.33.2")


@dataclass(frozen=True)
class ReleaseManifest:
    """A YAML file a GitHub release attaches as an asset (CRDs that ship as manifests, not charts):
    ``name`` is the project, ``repository`` its ``owner/name`` on GitHub, ``tag`` the release."""

    name: str
    repository: str
    tag: str
    file: str

    @property
    def url(self) -> str:
        """Where the program reads it: the release's own download address, fixed by the tag."""
        return f"https://github.com/{self.repository}/releases/download/{self.tag}/{self.file}"

    @property
    def folder(self) -> str:
        """The folder holding the same bytes in ``../shared/manifests`` (its README): ``<name>-<tag>``."""
        return f"{self.name}-{self.tag}"


#: Gateway API standard channel: HTTPRoute and Gateway, with the ``safe-upgrades`` admission policy.
GATEWAY_API_CRDS = ReleaseManifest("gateway-api", "kubernetes-sigs/gateway-api", "v1.6.1", "standard-install.yaml")
#: InferencePool (``inference.networking.k8s.io/v1``): the pool each picker serves.
INFERENCE_POOL_CRDS = ReleaseManifest(
    "gateway-api-inference-extension", "kubernetes-sigs/gateway-api-inference-extension", "v1.6.0", "v1-manifests.yaml"
)
#: InferenceObjective and InferenceModelRewrite (``llm-d.ai/v1alpha2``), which the picker reads if present.
LLM_D_ROUTER_CRDS = ReleaseManifest("llm-d-router-crds", "llm-d/llm-d-router", "v0.10.0", "manifests.yaml")
#: In the order they are applied (all before any picker chart).
ROUTING_CRDS = (GATEWAY_API_CRDS, INFERENCE_POOL_CRDS, LLM_D_ROUTER_CRDS)
#: Cilium, the CNI of EKS Hybrid Nodes only (the VPC CNI cannot run on-prem): chart 1.18.12 from
#: https://helm.cilium.io (EKS Hybrid Nodes supports Cilium v1.17.x and v1.18.x). The images are AWS's
#: own Cilium build, which AWS supports on hybrid nodes (public.ecr.aws/eks/cilium, tags ``v<version>-<build>``),
#: instead of the chart's quay.io defaults; tag only, digest unverified (no reachable registry here).
CILIUM = HelmChart(chart="cilium", version="1.18.12", repository="https://helm.cilium.io")
CILIUM_IMAGE = Image(repository="public.ecr.aws/eks/cilium/cilium", tag="v1.18.12-0")
#: The chart appends ``-generic`` (the operator build for clusters outside a cloud IPAM) to the repository.
CILIUM_OPERATOR_IMAGE = Image(repository="public.ecr.aws/eks/cilium/operator", tag="v1.18.12-0")
