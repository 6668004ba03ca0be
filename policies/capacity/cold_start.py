"""How long a model takes from its first request to its first token: cold (no node) and warm (node up).

A start is a sum of named steps, in the order the kubelet runs them for the model server's pod:

1. ``node``: a GPU node is provisioned by the pool's capacity source and advertises its GPUs;
2. ``image``: the model server's image is downloaded and unpacked (``images.json`` holds its size);
3. ``weights``: the weights are copied from S3 to the node's disk (the init container), unless a
   node-local cache already holds them; nothing when vLLM streams them (``load`` carries the copy);
4. ``load``: the weights are read from the node's disk into GPU memory, or, streamed (vLLM's Run:ai
   model streamer, ``--load-format runai_streamer``), read from S3 straight into GPU memory;
5. ``compile``: vLLM's ``torch.compile`` and CUDA graph capture before it serves;
6. ``readiness``: the startup probe sees the server up (at most one probe period later).

Each step carries a typical figure (``seconds``: the prediction) and a planning bound
(``bound_seconds``: the worst case the program waits for before it calls a rollout failed), both
worked out from :class:`Figure` s that name their source: a documented measurement, a published
number, or an estimate that says why it is one. :func:`await_budget` sums the bounds into the four
parts the model server's ``pulumi.com/timeoutSeconds`` and ``progressDeadlineSeconds`` use, so the
prediction and the bound come from one place.

Pure Python (no Pulumi): the program's settings import it as ``policies.capacity.cold_start`` and
the pack as ``capacity.cold_start``. Facts that live in the program (the root volume's throughput,
the startup probe) are parameters, never imported; the readers at the end (:func:`weight_loading`,
:func:`root_volume_mibps`, :func:`image_prepulled`) find them in the emitted objects, for the pack and
the offline report alike.
"""

from __future__ import annotations

import base64
import email
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import bounded_json
from .instances import Instance
from .kinds import DAEMONSET, EC2NODECLASS, HELM_TYPES, LAUNCH_TEMPLATE, NODEPOOL, helm_chart_name
from .model import Pool, Selection, quantity, untolerated

IMAGES_PATH = Path(__file__).resolve().parent / "images.json"
MIB = 1024**2

#: The cases a start is predicted for.
COLD, WARM = "cold", "warm"
#: Capacity sources, spelled as :attr:`capacity.model.Pool.capacity_source` spells them.
KARPENTER, CLUSTER_AUTOSCALER, AUTO_MODE, FIXED_NODES = "Karpenter", "Cluster Autoscaler", "EKS Auto Mode", "fixed nodes"
CAPACITY_SOURCES = (KARPENTER, CLUSTER_AUTOSCALER, AUTO_MODE, FIXED_NODES)
#: How a model's weights reach the GPU: ``download`` (an init container copies them to the node's disk,
#: vLLM loads them from there) or ``stream`` (vLLM's Run:ai model streamer reads them from S3 into GPU
#: memory, no disk step).
DOWNLOAD, STREAM = "download", "stream"
WEIGHT_LOADINGS = (DOWNLOAD, STREAM)
#: How the emitted server container says it streams: vLLM's ``--load-format runai_streamer`` (docs.vllm.ai,
#: models/extensions/runai_model_streamer) with the model given as its ``s3://`` URI.
LOAD_FORMAT_FLAG, STREAMER_LOAD_FORMAT = "--load-format", "runai_streamer"
#: The streamer's own settings (run-ai/runai-model-streamer docs/src/env-vars.md). vLLM's
#: ``--model-loader-extra-config {"concurrency": N, "memory_limit": B}`` only copies its values into these
#: very variables (vllm-project/vllm, vllm/model_executor/model_loader/runai_streamer_loader.py,
#: ``RunaiModelStreamerLoader.__init__``), so the variables work whatever the loader version.
STREAMER_CONCURRENCY_ENV = "RUNAI_STREAMER_CONCURRENCY"
STREAMER_MEMORY_LIMIT_ENV = "RUNAI_STREAMER_MEMORY_LIMIT"
#: The loader's distributed mode. vLLM's ``RunaiModelStreamerLoader`` keeps ``_is_distributed`` False unless
#: ``--model-loader-extra-config`` holds ``"distributed": true`` (vllm-project/vllm,
#: vllm/model_executor/model_loader/runai_streamer_loader.py, ``__init__`` and ``_get_weights_iterator``, which
#: hands it to weight_utils.py ``runai_safetensors_weights_iterator``). Without it every tensor-parallel rank
#: (one worker process per GPU) streams every safetensors file into host memory and keeps its own slice in
#: ``load_weights``: a node pulls ranks x the checkpoint. With it the ranks split the files and stream into
#: their GPUs (run-ai/runai-model-streamer docs/src/usage.md, "Distributed streaming"; CUDA/ROCm only).
LOADER_EXTRA_CONFIG_FLAG, DISTRIBUTED_KEY = "--model-loader-extra-config", "distributed"
TENSOR_PARALLEL_FLAG = "--tensor-parallel-size"
#: nodeadm's feature gate that switches containerd to the SOCI snapshotter in parallel pull and unpack mode
#: (awslabs/amazon-eks-ami ``nodeadm/api/v1alpha1/nodeconfig_types.go``, ``Feature`` enum; off unless set), and
#: the MIME part type nodeadm reads a NodeConfig from (``nodeadm/doc``: user data "embedded within a MIME
#: multi-part document"). The program writes both (components/specs/node_pools.py); :func:`fast_image_pull`
#: reads them back from the emitted user data.
FAST_IMAGE_PULL_GATE = "FastImagePull"
NODEADM_CONTENT_TYPE = "application/node.eks.aws"


@dataclass(frozen=True)
class Figure:
    """One number a step is worked out from, with its unit and where it comes from."""

    name: str
    value: float
    unit: str
    source: str

    def describe(self) -> str:
        return f"{self.name} {self.value:g} {self.unit}"


# --- the published and estimated figures ------------------------------------------------------

KARPENTER_BATCH_IDLE = Figure(
    "Karpenter batch idle duration", 1, "s",
    "Karpenter settings reference: BATCH_IDLE_DURATION defaults to 1s (the window Karpenter waits for more "
    "pending pods before it launches)")
CLUSTER_AUTOSCALER_SCAN = Figure(
    "Cluster Autoscaler scan interval", 10, "s",
    "kubernetes/autoscaler cluster-autoscaler FAQ and main.go: --scan-interval defaults to 10s (how often "
    "pending pods are looked at)")
ASG_SCALE_OUT = Figure(
    "Auto Scaling group scale-out activity", 30, "s",
    "estimate: Cluster Autoscaler raises the group's desired capacity and EC2 Auto Scaling starts the "
    "launch in its next activity; AWS publishes no latency for it")
INSTANCE_LAUNCH_AND_JOIN = Figure(
    "EC2 launch, boot and node join", 90, "s",
    "estimate: RunInstances/CreateFleet to a Ready kubelet on the EKS AL2023 NVIDIA AMI (boot, nodeadm, "
    "VPC CNI); no published figure for GPU AMIs; consistent with the 3-5 minutes docs/first-deploy.md "
    "gives for a node with its GPUs advertised")
# What advertises a new node's GPUs, per GPU software path. The scheduler binds a GPU pod only once the node
# shows them: ``nvidia.com/gpu`` in the Node's allocatable (a device plugin, through the kubelet) or DRA
# ResourceSlices. No path has a published timing; the figures below are either read from the components' source
# (poll intervals, the order of the steps) or estimates that say so.
DEVICE_PLUGIN_START = Figure(
    "device plugin pod start and kubelet registration", 20, "s",
    "estimate: the DaemonSet pod is placed when the node is Ready, pulls its image and starts; the plugin then "
    "serves its socket and registers with the kubelet with no wait in between beyond 5 s dial timeouts "
    "(NVIDIA/k8s-device-plugin v0.20.0 internal/plugin/server.go Start, Serve, Register)")
KUBELET_NODE_STATUS = Figure(
    "kubelet node status update", 10, "s",
    "Kubernetes kubelet configuration reference: nodeStatusUpdateFrequency defaults to 10s; a registered device "
    "plugin's GPUs reach the Node's allocatable, which the scheduler reads, at the kubelet's next status update "
    "(counted whole: the worst case of one period)")
NFD_GPU_LABEL = Figure(
    "NFD labels the node as a GPU node", 15, "s",
    "estimate; the order is source: the GPU Operator deploys its operands only on nodes carrying NFD's "
    "feature.node.kubernetes.io/pci-10de.present (NVIDIA/gpu-operator v26.7.0 controllers/state_manager.go "
    "gpuNodeLabels, hasGPULabels), so the nfd-worker pod must start on the new node and label it first")
OPERATOR_VALIDATIONS = Figure(
    "GPU Operator driver and toolkit validations", 15, "s",
    "estimate; the order is source: the nvidia-operator-validator pod's init containers run driver-validation "
    "then toolkit-validation (NVIDIA/gpu-operator v26.7.0 assets/state-operator-validation/0500_daemonset.yaml), "
    "each one nvidia-smi run that passes at once where the AMI ships the driver (cmd/nvidia-validator/main.go "
    "retries every 5 s only on failure); the validator image is pulled first")
TOOLKIT_READY_POLL = Figure(
    "operator's device plugin waits for toolkit-ready", 5, "s",
    "NVIDIA/gpu-operator v26.7.0 assets/state-device-plugin/0500_daemonset.yaml: the device plugin's init "
    "container toolkit-validation checks /run/nvidia/validations/toolkit-ready every 5 s (sleep 5; counted whole)")
DRA_PLUGIN_START = Figure(
    "DRA kubelet plugin start and ResourceSlice publication", 20, "s",
    "estimate, as the device plugin's start: the kubelet plugin publishes the node's GPUs as ResourceSlices "
    "through the API server, which the scheduler watches; no kubelet node-status period in between (Kubernetes "
    "docs, Dynamic Resource Allocation: ResourceSlices)")
NODE_BOUND = Figure(
    "node planning bound", 600, "s",
    "planning bound, about twice the typical time (the await budget's node figure since issue 28)")

IMAGE_UNPACK = Figure(
    "layer unpack rate", 150, "MiB/s",
    "estimate: containerd decompresses each gzip layer on one core (no pigz by default) and writes it to the "
    "node's disk; 28.6 GB at this rate takes about 3 minutes, within the 3-5 minutes docs/first-deploy.md "
    "gives for the vLLM image")
IMAGE_BOUND = Figure(
    "image planning bound", 600, "s",
    "planning bound, about twice the typical time (the await budget's image figure since issue 28)")
#: SOCI parallel pull and unpack (nodeadm's ``FastImagePull`` gate on the AL2023 EKS AMI): the snapshotter
#: downloads an image's layers in 16 MB ranges, up to 20 layers at once, and unpacks up to 12 layers at once
#: with unpigz (awslabs/amazon-eks-ami ``nodeadm/internal/containerd/snapshotter/soci-snapshotter.config.toml``),
#: where containerd alone unpacks one layer after the other. No published model of that pipeline exists, so the
#: step takes the measured share of a containerd pull of a vLLM image of the same kind.
SOCI_PARALLEL_PULL = Figure(
    "SOCI parallel pull time as a share of a containerd pull", 0.532, "x",
    "aws-samples/karpenter-blueprints blueprints/soci-snapshotter/README.md, Results: AWS's vLLM Deep Learning "
    "Container (10,778,400,361 bytes) pulled in 1m52.33s by containerd and in 59.813s with FastImagePull on AL2023 "
    "(59.813 / 112.33 = 0.532; 44.974 s on Bottlerocket), on nodes with over 8000 Mbps of network and EBS bandwidth, "
    "gp3 at 1000 MiB/s, NVMe RAID0")
#: nodeadm turns the gate into the SOCI snapshotter only on instances with at least 4 vCPUs and 7 GiB of memory
#: the kernel sees; below that it leaves containerd's own snapshotter, silently (awslabs/amazon-eks-ami
#: ``nodeadm/internal/containerd/config.go``, ``UseSOCISnapshotter``).
SOCI_MIN_VCPUS = Figure("vCPUs nodeadm needs for SOCI", 4, "vCPUs",
                        "awslabs/amazon-eks-ami nodeadm/internal/containerd/config.go UseSOCISnapshotter: >= 4000 "
                        "millicores")
SOCI_MIN_MEMORY = Figure("memory nodeadm needs for SOCI", 7, "GiB",
                         "awslabs/amazon-eks-ami nodeadm/internal/containerd/config.go UseSOCISnapshotter: >= 7 GiB "
                         "online memory")

S3_PER_CONNECTION = Figure(
    "S3 throughput per connection", 85, "MB/s",
    "AWS, Amazon S3 performance guidelines (optimizing-performance-guidelines, 'Horizontally scale storage "
    "connections'): make one concurrent request for each 85-90 MB/s of desired network throughput")
S3_CONNECTIONS = Figure(
    "concurrent S3 requests of aws s3 sync", 10, "connections",
    "AWS CLI S3 configuration reference (topic s3-config): max_concurrent_requests defaults to 10; the "
    "fetch-weights init container runs aws s3 sync with the default")
STREAMER_DEFAULT_CONCURRENCY = Figure(
    "Run:ai model streamer concurrency (unset)", 8, "connections",
    "run-ai/runai-model-streamer docs/src/env-vars.md: RUNAI_STREAMER_CONCURRENCY defaults to 8 when reading "
    "from object storage (each thread holds one S3 client)")
WEIGHTS_BOUND_RATE = Figure(
    "weights planning copy rate", 100, "MiB/s",
    "planning bound: a conservative copy rate, below one S3 connection's guideline figure, kept from the "
    "await budget of issue 28")

HOST_TO_GPU = Figure(
    "host-to-GPU copy rate", 25, "GB/s",
    "estimate: PCIe 4.0 x16 (A10G, L4, L40S, A100) carries 32 GB/s raw and about 25 GB/s in NVIDIA's "
    "bandwidthTest; the node's disk is the slower side on every catalog GPU type")
TORCH_COMPILE = Figure(
    "torch.compile", 60, "s",
    "estimate: vLLM compiles the model on its first start and caches it under ~/.cache/vllm/torch_compile_cache "
    "(docs.vllm.ai design/torch_compile); the model server's HOME is an emptyDir, so every pod compiles afresh")
CUDA_GRAPHS = Figure(
    "CUDA graph capture", 30, "s",
    "estimate: vLLM captures one CUDA graph per batch size it serves; a published capture of 371 sizes took 43 s "
    "(huggingface.co nvidia/Nemotron-3-Embed-1B-NVFP4 discussion #4, vLLM 0.25.0), the default capture list is shorter")

GP3_BASELINE = Figure(
    "gp3 baseline throughput", 125, "MiB/s",
    "AWS, Amazon EBS volume types: a gp3 volume delivers 125 MiB/s unless provisioned higher (up to 1000 MiB/s)")


#: GPU software paths: the standalone NVIDIA device plugin, the GPU Operator (its device plugin behind its
#: validator), EKS Auto Mode's own device plugin, a DRA kubelet plugin.
DEVICE_PLUGIN_PATH, GPU_OPERATOR_PATH, AUTO_MODE_PLUGIN_PATH, DRA_PATH = (
    "device-plugin", "gpu-operator", "auto-mode-device-plugin", "dra")
GPU_SOFTWARE_PATHS = (DEVICE_PLUGIN_PATH, GPU_OPERATOR_PATH, AUTO_MODE_PLUGIN_PATH, DRA_PATH)
#: The chart whose release puts the GPU Operator's operands on the stack's GPU nodes.
GPU_OPERATOR_CHART = "gpu-operator"


def gpus_advertised(path: str) -> tuple[Figure, ...]:
    """The figures from a Ready node to GPUs the scheduler can bind to, in the order they happen.

    The GPU Operator gates its device plugin on the validator's driver and toolkit steps only (the plugin's
    init container waits for ``toolkit-ready``). Its cuda-validation (a workload pod, polled every 5 s) and
    plugin-validation (which polls the node's allocatable for ``nvidia.com/gpu`` every 5 s, so it can only
    pass once the GPUs are advertised) run after and gate nothing a model's pod waits for
    (NVIDIA/gpu-operator v26.7.0 cmd/nvidia-validator/main.go, podCreationSleepIntervalSeconds and
    gpuResourceDiscoveryIntervalSeconds)."""
    if path in (DEVICE_PLUGIN_PATH, AUTO_MODE_PLUGIN_PATH):
        return (DEVICE_PLUGIN_START, KUBELET_NODE_STATUS)
    if path == GPU_OPERATOR_PATH:
        return (NFD_GPU_LABEL, OPERATOR_VALIDATIONS, TOOLKIT_READY_POLL, DEVICE_PLUGIN_START, KUBELET_NODE_STATUS)
    if path == DRA_PATH:
        return (DRA_PLUGIN_START,)
    raise ValueError(f"no GPU software path {path!r}; expected one of {', '.join(GPU_SOFTWARE_PATHS)}")


def gpu_software_path(provider: str, *, capacity_source: str | None, dra: bool = False) -> str:
    """The path a pool's nodes take: EKS's own plugin on Auto Mode whatever the stack installs (the program
    keeps the operator's plugin off Auto Mode nodes), a DRA kubelet plugin on a DRA pool, else the stack's
    ``gpuSoftware.provider`` (``none``: whatever the AMI brings, counted as a device plugin)."""
    if capacity_source == AUTO_MODE:
        return AUTO_MODE_PLUGIN_PATH
    if dra:
        return DRA_PATH
    return GPU_OPERATOR_PATH if provider == GPU_OPERATOR_PATH else DEVICE_PLUGIN_PATH


# --- steps ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One named step of a start: the prediction, the planning bound, and the figures behind both.

    ``bound_seconds`` is ``None`` when another step's bound already covers this one (the startup probe's
    window bounds load, compile and readiness together).
    """

    name: str
    seconds: float
    bound_seconds: float | None
    figures: tuple[Figure, ...]
    detail: str

    def describe(self) -> str:
        return f"{self.name} {_seconds(self.seconds)} ({self.detail})"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 100 or float(value).is_integer() else f"{value:.1f} s"


def _bytes(value: float) -> str:
    return f"{value / 1e9:.2f} GB"


def _rate(bytes_per_second: float) -> str:
    return f"{bytes_per_second / MIB:.0f} MiB/s"


def network_bytes_per_second(instance: Instance) -> float:
    """The instance's network bandwidth (catalog ``networkBandwidthMbps``, megabits) in bytes per second."""
    if not instance.network_bandwidth_mbps:
        raise ValueError(f"policies/instance_catalog.json has no networkBandwidthMbps for {instance.name}")
    return instance.network_bandwidth_mbps * 1e6 / 8


def _network_figure(instance: Instance) -> Figure:
    return Figure(f"{instance.name} network bandwidth", float(instance.network_bandwidth_mbps or 0), "Mbps",
                  "policies/instance_catalog.json networkBandwidthMbps (Karpenter's instance-network-bandwidth, "
                  "from ec2:DescribeInstanceTypes)")


def _disk_figure(disk_throughput_mibps: float) -> Figure:
    return Figure("node root volume throughput", disk_throughput_mibps, "MiB/s",
                  "the pool's root volume as the stack emits it (EC2NodeClass blockDeviceMappings or the managed "
                  "group's launch template); gp3's 125 MiB/s baseline when it sets none")


def node_provisioning(capacity_source: str | None, gpu_software: str = DEVICE_PLUGIN_PATH) -> Step:
    """A node of the pool, from the pending pod to GPUs the scheduler can bind to: the capacity source's
    launch, then what the GPU software path (:func:`gpus_advertised`) needs before the GPUs show."""
    if capacity_source == FIXED_NODES:
        return Step("node", 0.0, 0.0, (), "fixed nodes: already up")
    figures: tuple[Figure, ...]
    if capacity_source == KARPENTER:
        figures = (KARPENTER_BATCH_IDLE, INSTANCE_LAUNCH_AND_JOIN)
    elif capacity_source == CLUSTER_AUTOSCALER:
        figures = (CLUSTER_AUTOSCALER_SCAN, ASG_SCALE_OUT, INSTANCE_LAUNCH_AND_JOIN)
    elif capacity_source == AUTO_MODE:
        # Auto Mode is Karpenter run by EKS: the same batching and launch; its GPU AMI runs EKS's device plugin.
        figures = (KARPENTER_BATCH_IDLE, INSTANCE_LAUNCH_AND_JOIN)
        gpu_software = AUTO_MODE_PLUGIN_PATH
    else:
        raise ValueError(f"no capacity source {capacity_source!r}; expected one of {', '.join(CAPACITY_SOURCES)}")
    figures += gpus_advertised(gpu_software)
    seconds = float(sum(f.value for f in figures))
    return Step("node", seconds, NODE_BOUND.value, (*figures, NODE_BOUND),
                f"{capacity_source}: " + " + ".join(f"{f.name} {f.value:g} s" for f in figures))


@dataclass(frozen=True)
class ImageSize:
    reference: str
    compressed_bytes: int
    uncompressed_bytes: int
    source: str


def image_key(image: str) -> str:
    """``repository:tag`` of an image reference (a digest after ``@`` dropped). An untagged reference
    stays as written: no size is known for a floating image, so its lookup fails by name rather than
    being sized as some ``latest``."""
    return image.split("@", 1)[0]


@lru_cache(maxsize=1)
def _images() -> dict[str, Any]:
    return json.loads(IMAGES_PATH.read_text())["images"]


def image_size(image: str) -> ImageSize:
    """The image's sizes from ``images.json``; :class:`KeyError` naming the image and the file when absent."""
    key = image_key(image)
    entry = _images().get(key)
    if entry is None:
        raise KeyError(f"image {key} has no size in policies/capacity/images.json")
    return ImageSize(key, int(entry["compressedBytes"]), int(entry["uncompressedBytes"]), str(entry["source"]))


def soci_snapshotter_runs(instance: Instance) -> bool:
    """Whether nodeadm switches a node with the ``FastImagePull`` gate to the SOCI snapshotter: only an
    instance with :data:`SOCI_MIN_VCPUS` and :data:`SOCI_MIN_MEMORY` (the catalog's memory stands for what the
    kernel sees, a little less on a real node)."""
    return instance.vcpu >= SOCI_MIN_VCPUS.value and instance.memory_mib >= SOCI_MIN_MEMORY.value * 1024


def image_pull(image: str, instance: Instance, disk_throughput_mibps: float, *, present: bool = False,
               fast_image_pull: bool = False) -> Step:
    """Download the compressed layers over the lesser of the node's network and its disk, then unpack
    them onto the disk at the lesser of the disk and the unpack rate, one layer after the other: the
    textbook's size over bandwidth leaves the unpack out, which is most of the step.

    ``fast_image_pull`` (the pool's nodeadm ``FastImagePull`` gate): where nodeadm honours it
    (:func:`soci_snapshotter_runs`), the SOCI snapshotter overlaps downloads and unpacks several layers at
    once, and the step takes :data:`SOCI_PARALLEL_PULL` of the serial pull. Its bound stays the same."""
    if present:
        return Step("image", 0.0, 0.0, (), f"{image_key(image)} already on the node")
    size = image_size(image)
    disk = disk_throughput_mibps * MIB
    download_rate = min(network_bytes_per_second(instance), disk)
    unpack_rate = min(disk, IMAGE_UNPACK.value * MIB)
    seconds = size.compressed_bytes / download_rate + size.uncompressed_bytes / unpack_rate
    figures: tuple[Figure, ...] = (
        Figure(f"{size.reference} compressed", size.compressed_bytes, "bytes", size.source),
        Figure(f"{size.reference} unpacked", size.uncompressed_bytes, "bytes", size.source),
        _network_figure(instance), _disk_figure(disk_throughput_mibps), IMAGE_UNPACK, IMAGE_BOUND)
    detail = (f"{size.reference}: {_bytes(size.compressed_bytes)} at {_rate(download_rate)}, "
              f"{_bytes(size.uncompressed_bytes)} unpacked at {_rate(unpack_rate)}")
    if fast_image_pull:
        figures += (SOCI_MIN_VCPUS, SOCI_MIN_MEMORY)
        if soci_snapshotter_runs(instance):
            seconds *= SOCI_PARALLEL_PULL.value
            figures += (SOCI_PARALLEL_PULL,)
            detail += f", in parallel (SOCI) at {SOCI_PARALLEL_PULL.value:g} of that"
        else:
            detail += f"; nodeadm ignores FastImagePull on a {instance.name} ({instance.vcpu} vCPUs)"
    return Step("image", seconds, IMAGE_BOUND.value, figures, detail)


def s3_bytes_per_second() -> float:
    """What one node's ``aws s3 sync`` draws from S3: connections x throughput per connection."""
    return S3_CONNECTIONS.value * S3_PER_CONNECTION.value * 1e6


def weights_bound_seconds(weight_bytes: float) -> int:
    """The planning bound of the weight copy: the weights at the conservative copy rate, whole seconds up."""
    return math.ceil(weight_bytes / (WEIGHTS_BOUND_RATE.value * MIB))


@dataclass(frozen=True)
class WeightLoading:
    """How the weights reach the GPU (:data:`DOWNLOAD` or :data:`STREAM`) and, streamed, how many
    concurrent S3 readers each rank's streamer runs, how many tensor-parallel ranks (worker processes)
    stream on the node, and whether they share the files (``distributed``) or each read all of them."""

    mode: str = DOWNLOAD
    concurrency: int = int(STREAMER_DEFAULT_CONCURRENCY.value)
    ranks: int = 1
    distributed: bool = False

    def __post_init__(self) -> None:
        if self.mode not in WEIGHT_LOADINGS:
            raise ValueError(f"weight loading must be one of {', '.join(WEIGHT_LOADINGS)}, not {self.mode!r}")
        if self.concurrency < 1:
            raise ValueError(f"streamer concurrency must be at least 1, not {self.concurrency}")
        if self.ranks < 1:
            raise ValueError(f"tensor-parallel ranks must be at least 1, not {self.ranks}")

    @property
    def copies(self) -> int:
        """How many times the node pulls the checkpoint: once when the ranks share it, once per rank otherwise."""
        return 1 if self.distributed else self.ranks

    @property
    def streamed(self) -> bool:
        return self.mode == STREAM


def weight_fetch(weight_bytes: float, instance: Instance, disk_throughput_mibps: float, *,
                 cached: bool = False, streamed: bool = False) -> Step:
    """Copy the weights from S3 onto the node's disk, at the lesser of S3 per node, the node's network
    and the disk's write throughput; nothing when the node-local cache holds them, or when vLLM streams
    them (:func:`gpu_load` then carries the whole transfer)."""
    if streamed:
        return Step("weights", 0.0, 0.0, (), "streamed from S3 during load: no copy to disk")
    if cached:
        return Step("weights", 0.0, 0.0, (), "node-local cache holds them")
    rate = min(s3_bytes_per_second(), network_bytes_per_second(instance), disk_throughput_mibps * MIB)
    figures = (Figure("weights", weight_bytes, "bytes", "policies/capacity/model_catalog.json: parameters x bits "
                      "per weight of the quantization (policies/capacity/llm.py Architecture.weight_bytes)"),
               S3_PER_CONNECTION, S3_CONNECTIONS, _network_figure(instance), _disk_figure(disk_throughput_mibps),
               WEIGHTS_BOUND_RATE)
    return Step("weights", weight_bytes / rate, float(weights_bound_seconds(weight_bytes)), figures,
                f"{_bytes(weight_bytes)} from S3 at {_rate(rate)}")


def gpu_load(weight_bytes: float, disk_throughput_mibps: float, *, probe_window_seconds: float,
             instance: Instance | None = None, loading: WeightLoading | None = None) -> Step:
    """Read the weights from the node's disk into GPU memory (the slower of the disk and the host-to-GPU
    link). Its bound is the startup probe's whole window, which also covers compile and readiness.

    Streamed (``loading.streamed``; ``instance`` then required): the streamer's threads read S3 into a CPU
    buffer that is copied to the GPU as it fills (run-ai/runai-model-streamer docs/src/usage.md), so the
    copy and the load overlap and the disk plays no part. Each tensor-parallel rank runs its own streamer.
    Without vLLM's distributed mode every rank reads the whole checkpoint (:data:`DISTRIBUTED_KEY`): the
    node pulls ranks x the weights over ranks x concurrency connections, all through its one network
    interface. Distributed, the ranks split the files: the weights once, the concurrency counted once (the
    real rate is at least that). The rate is the lesser of the connections x the per-connection guideline,
    the node's network and the host-to-GPU link."""
    window = Figure("startup probe window", probe_window_seconds, "s",
                    "the model server's startupProbe: periodSeconds x failureThreshold, after which the kubelet "
                    "restarts the container (Kubernetes pod lifecycle: container probes)")
    if loading is not None and loading.streamed:
        if instance is None:
            raise ValueError("a streamed load is bounded by the node's network: pass the instance")
        connections = Figure("Run:ai model streamer concurrency", loading.concurrency, "connections",
                             f"the server container's {STREAMER_CONCURRENCY_ENV} (unset: "
                             f"{STREAMER_DEFAULT_CONCURRENCY.value:g}, {STREAMER_DEFAULT_CONCURRENCY.source})")
        copies = loading.copies
        readers = loading.concurrency * copies
        ranks = Figure("checkpoint copies the node streams", copies, "copies",
                       f"{loading.ranks} tensor-parallel rank(s), {'distributed' if loading.distributed else 'each'} "
                       "streaming (vllm runai_streamer_loader.py, RunaiModelStreamerLoader)")
        pulled = weight_bytes * copies
        rate = min(readers * S3_PER_CONNECTION.value * 1e6, network_bytes_per_second(instance), HOST_TO_GPU.value * 1e9)
        how = (f"{loading.ranks} ranks share it" if loading.distributed and loading.ranks > 1
               else f"{copies} ranks each read it" if copies > 1 else "one rank")
        return Step("load", pulled / rate, probe_window_seconds,
                    (S3_PER_CONNECTION, connections, ranks, _network_figure(instance), HOST_TO_GPU, window),
                    f"{_bytes(pulled)} streamed from S3 to the GPUs at {_rate(rate)} "
                    f"({readers} connections, {how})")
    rate = min(disk_throughput_mibps * MIB, HOST_TO_GPU.value * 1e9)
    return Step("load", weight_bytes / rate, probe_window_seconds, (_disk_figure(disk_throughput_mibps), HOST_TO_GPU, window),
                f"{_bytes(weight_bytes)} from disk at {_rate(rate)}")


def compile_and_capture() -> Step:
    return Step("compile", TORCH_COMPILE.value + CUDA_GRAPHS.value, None, (TORCH_COMPILE, CUDA_GRAPHS),
                f"torch.compile {TORCH_COMPILE.value:g} s + CUDA graphs {CUDA_GRAPHS.value:g} s")


def readiness(startup_probe_period_seconds: float) -> Step:
    figure = Figure("startup probe period", startup_probe_period_seconds, "s",
                    "the model server's startupProbe.periodSeconds: the server is seen up at most one period after it is")
    return Step("readiness", float(startup_probe_period_seconds), None, (figure,),
                f"startup probe every {startup_probe_period_seconds:g} s")


# --- a start ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """One model's start on one pool's node type, cold or warm, as named steps."""

    model: str
    pool: str
    instance: str
    case: str
    steps: tuple[Step, ...]

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def bound_seconds(self) -> float:
        return sum(s.bound_seconds or 0.0 for s in self.steps)

    @property
    def dominant(self) -> Step:
        """The longest step (the first of equals), where shortening the start pays most."""
        return max(self.steps, key=lambda s: s.seconds)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def describe(self) -> str:
        return (f"{self.model} starts {self.case} in {_seconds(self.seconds)} on {self.instance} ({self.pool}): "
                + ", ".join(s.describe() for s in self.steps))


def start(model: str, pool: str, *, weight_bytes: float, instance: Instance, capacity_source: str | None, image: str,
          disk_throughput_mibps: float, startup_probe_period_seconds: float, startup_probe_failures: int,
          case: str = COLD, weights_cached: bool = False, loading: WeightLoading | None = None,
          image_prepulled: bool = True, fast_image_pull: bool = False,
          gpu_software: str = DEVICE_PLUGIN_PATH) -> Start:
    """The model's start. ``cold``: a new node (provisioned, image pulled, nothing cached). ``warm``: a pod
    rescheduled or scaled out onto a node that is up; the image is there when ``image_prepulled`` (a
    pre-pull DaemonSet covers the pool, or the caller knows the node ran the server before), else it is
    pulled as on a cold node. The weights are fetched again unless ``weights_cached`` (a node-local cache
    that outlives the pod), or streamed during load (``loading``: :data:`STREAM`), cold or warm.

    A pre-pull does not shorten ``cold``: on a node that has just joined, the pre-pull DaemonSet's pod and
    the model's pod start together and the image arrives no sooner for either. ``fast_image_pull``: the
    pool's nodes pull with SOCI parallel pull (:func:`image_pull`); it changes the image step only.
    ``gpu_software``: the pool's GPU software path (:func:`gpu_software_path`), part of the node step."""
    if case not in (COLD, WARM):
        raise ValueError(f"case must be {COLD!r} or {WARM!r}, not {case!r}")
    cold = case == COLD
    streamed = loading is not None and loading.streamed
    steps = (
        node_provisioning(capacity_source, gpu_software) if cold else Step("node", 0.0, 0.0, (), "node already up"),
        image_pull(image, instance, disk_throughput_mibps, present=not cold and image_prepulled,
                   fast_image_pull=fast_image_pull),
        weight_fetch(weight_bytes, instance, disk_throughput_mibps, cached=weights_cached and not cold, streamed=streamed),
        gpu_load(weight_bytes, disk_throughput_mibps,
                 probe_window_seconds=startup_probe_period_seconds * startup_probe_failures,
                 instance=instance, loading=loading),
        compile_and_capture(),
        readiness(startup_probe_period_seconds),
    )
    return Start(model, pool, instance.name, case, steps)


@dataclass(frozen=True)
class AwaitBudget:
    """The planning bound of a cold start in the four parts the model server's Deployment is given
    (``pulumi.com/timeoutSeconds`` and ``progressDeadlineSeconds``): node, image, weights, and the startup
    probe's window for load, compile and readiness."""

    node_ready: int
    image_pull: int
    weights: int
    load: int

    @property
    def total(self) -> int:
        return self.node_ready + self.image_pull + self.weights + self.load


def await_budget(cold: Start) -> AwaitBudget:
    """The bound of a cold :class:`Start`, as whole seconds."""
    if cold.case != COLD:
        raise ValueError("the await budget bounds a cold start")
    bound = {s.name: math.ceil(s.bound_seconds or 0) for s in cold.steps}
    return AwaitBudget(node_ready=bound["node"], image_pull=bound["image"], weights=bound["weights"],
                       load=bound["load"])


# --- what the emitted objects say -------------------------------------------------------------
# The pack (engine resources with ``props``) and the offline report (plan resources with ``inputs``)
# read the same facts from the same objects: one reader each, here.

#: Karpenter's Auto Mode NodeClass (its root volume is ``spec.ephemeralStorage``).
AUTO_MODE_NODECLASS = "kubernetes:eks.amazonaws.com/v1:NodeClass"


def _props(resource: Any) -> dict[str, Any]:
    props = getattr(resource, "props", None)
    if props is None:
        props = getattr(resource, "inputs", None)
    return props if isinstance(props, dict) else {}


def _containers(pod: dict[str, Any], *fields: str) -> list[dict[str, Any]]:
    return [c for f in fields for c in pod.get(f) or [] if isinstance(c, dict)]


def server_container(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The model server's container of a pod spec: the one running a vLLM image, else the first."""
    containers = _containers(pod, "containers")
    return next((c for c in containers if "vllm" in str(c.get("image") or "")), containers[0] if containers else None)


def flag_value(args: list[Any], flag: str) -> str | None:
    """The value of a command-line flag as vLLM's argument parser reads it: ``--flag value`` or
    ``--flag=value`` (the first occurrence); ``None`` when absent."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return str(args[i + 1])
        if isinstance(arg, str) and arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def weight_loading(pod: dict[str, Any]) -> WeightLoading:
    """How the emitted pod loads its weights: streamed when its server container runs vLLM with
    ``--load-format runai_streamer`` (the concurrency from its ``RUNAI_STREAMER_CONCURRENCY``, the
    streamer's default when unset or unreadable; the ranks from ``--tensor-parallel-size``; distributed
    when ``--model-loader-extra-config`` says ``"distributed": true``), downloaded otherwise."""
    server = server_container(pod) or {}
    args = [a for a in [*(server.get("command") or []), *(server.get("args") or [])] if isinstance(a, str)]
    if flag_value(args, LOAD_FORMAT_FLAG) != STREAMER_LOAD_FORMAT:
        return WeightLoading(DOWNLOAD)
    env = {e.get("name"): e.get("value") for e in server.get("env") or [] if isinstance(e, dict)}
    try:
        concurrency = int(str(env.get(STREAMER_CONCURRENCY_ENV)))
    except ValueError:
        concurrency = 0
    try:
        ranks = int(str(flag_value(args, TENSOR_PARALLEL_FLAG) or 1))
    except ValueError:
        ranks = 1
    try:
        extra = bounded_json.loads(flag_value(args, LOADER_EXTRA_CONFIG_FLAG) or "{}")
    except ValueError:
        extra = {}
    distributed = isinstance(extra, dict) and extra.get(DISTRIBUTED_KEY) is True
    return WeightLoading(STREAM, concurrency if concurrency >= 1 else int(STREAMER_DEFAULT_CONCURRENCY.value),
                         ranks=max(ranks, 1), distributed=distributed)


def _ebs_throughput(ebs: Any) -> float | None:
    number = quantity(ebs.get("throughput")) if isinstance(ebs, dict) else None
    return number if number else None


def _node_class(resources: list[Any], nodepool: Any, types: tuple[str, ...]) -> Any | None:
    """The node class (of one of ``types``) a NodePool's ``nodeClassRef`` names, if the stack has it."""
    spec = ((_props(nodepool).get("spec") or {}).get("template") or {}).get("spec") or {}
    name = (spec.get("nodeClassRef") or {}).get("name")
    return next((c for c in resources if c.type in types and (_props(c).get("metadata") or {}).get("name") == name), None)


def _group_launch_templates(resources: list[Any], by_urn: dict[str, Any], group: Any) -> list[Any]:
    """The launch templates a managed group boots from: children of its parent or of any ancestor."""
    owners: set[str] = set()
    parent = getattr(group, "parent", None)
    while parent and parent not in owners:
        owners.add(parent)
        parent = getattr(by_urn.get(parent), "parent", None)
    return [t for t in resources if t.type == LAUNCH_TEMPLATE and getattr(t, "parent", None) in owners]


def root_volume_mibps(resources: Any, pool_key: str) -> float | None:
    """The root volume throughput (MiB/s) the pool's nodes get, ``None`` when the stack sets none (the
    caller then takes :data:`GP3_BASELINE`). ``pool_key`` is the pool's resource URN
    (:attr:`capacity.model.Pool.key`): a NodePool reads its EC2NodeClass's root (or first) block device
    mapping, or its Auto Mode NodeClass's ``ephemeralStorage``; a managed group reads the launch
    template that is a child of its parent or of any ancestor."""
    resources = list(resources)
    by_urn = {r.urn: r for r in resources}
    resource = by_urn.get(pool_key)
    if resource is None:
        return None
    if resource.type == NODEPOOL:
        node_class = _node_class(resources, resource, (EC2NODECLASS, AUTO_MODE_NODECLASS))
        if node_class is None:
            return None
        class_spec = _props(node_class).get("spec") or {}
        if node_class.type == AUTO_MODE_NODECLASS:
            return _ebs_throughput(class_spec.get("ephemeralStorage"))
        mappings = [m for m in class_spec.get("blockDeviceMappings") or [] if isinstance(m, dict)]
        root = next((m for m in mappings if m.get("rootVolume")), mappings[0] if mappings else None)
        return _ebs_throughput((root or {}).get("ebs"))
    for template in _group_launch_templates(resources, by_urn, resource):
        for mapping in _props(template).get("blockDeviceMappings") or []:
            if isinstance(mapping, dict) and (found := _ebs_throughput(mapping.get("ebs"))):
                return found
    return None


def _node_configs(user_data: str) -> list[dict[str, Any]]:
    """The NodeConfigs nodeadm would read from user data: each ``application/node.eks.aws`` part of a MIME
    multipart document, or the whole text. Only JSON is read here (the pack has no YAML parser); a YAML
    NodeConfig reads as none, so a start is never predicted faster than the emitted objects prove."""
    texts = [user_data]
    if user_data.lstrip().startswith("MIME-Version") or "Content-Type: multipart" in user_data:
        message = email.message_from_string(user_data)
        texts = [str(part.get_payload()) for part in message.walk()
                 if part.get_content_type() == NODEADM_CONTENT_TYPE]
    found = []
    for text in texts:
        try:
            document = bounded_json.loads(text.strip())
        except ValueError:
            continue
        if isinstance(document, dict) and document.get("kind") == "NodeConfig":
            found.append(document)
    return found


def _user_data(resources: list[Any], by_urn: dict[str, Any], pool_key: str) -> str | None:
    """The user data the pool's nodes boot with: its EC2NodeClass's ``userData``, or the launch template
    (base64) that is a child of the managed group's parent or of any ancestor."""
    resource = by_urn.get(pool_key)
    if resource is None:
        return None
    if resource.type == NODEPOOL:
        node_class = _node_class(resources, resource, (EC2NODECLASS,))
        data = (_props(node_class).get("spec") or {}).get("userData") if node_class is not None else None
        return data if isinstance(data, str) else None
    for template in _group_launch_templates(resources, by_urn, resource):
        data = _props(template).get("userData")
        if isinstance(data, str):
            try:
                return base64.b64decode(data, validate=True).decode()
            except (ValueError, UnicodeDecodeError):
                return None
    return None


def fast_image_pull(resources: Any, pool_key: str) -> bool:
    """Whether the pool's nodes boot with nodeadm's ``FastImagePull`` gate on (a NodeConfig in their user
    data whose ``spec.featureGates`` sets it true; nodeadm merges every NodeConfig, the later winning).
    ``pool_key`` is the pool's resource URN, as for :func:`root_volume_mibps`. Auto Mode's NodeClass takes
    no user data: never."""
    resources = list(resources)
    user_data = _user_data(resources, {r.urn: r for r in resources}, pool_key)
    enabled = False
    for config in _node_configs(user_data or ""):
        gates = (config.get("spec") or {}).get("featureGates")
        if isinstance(gates, dict) and FAST_IMAGE_PULL_GATE in gates:
            enabled = gates[FAST_IMAGE_PULL_GATE] is True
    return enabled


def gpu_software_of(resources: Any, pool: Pool) -> str:
    """The GPU software path of ``pool`` as the emitted objects show it: EKS's plugin on an Auto Mode pool,
    the GPU Operator's when the stack releases its chart, the standalone device plugin otherwise. DRA pools
    advertise no ``nvidia.com/gpu``, so no model server (which requests it) ever starts on one."""
    operator = any(r.type in HELM_TYPES and helm_chart_name(_props(r)) == GPU_OPERATOR_CHART for r in resources)
    return gpu_software_path(GPU_OPERATOR_PATH if operator else DEVICE_PLUGIN_PATH,
                             capacity_source=pool.capacity_source)


def image_prepulled(resources: Any, image: str, pool: Pool) -> bool:
    """Whether a DaemonSet in the stack runs ``image`` (as an init or main container) on the pool's nodes:
    it tolerates the pool's taints and its node selection admits the pool's labels. Then a node of the pool
    that has been up for a while holds the image before a model's pod lands on it (a warm start)."""
    key = image_key(image)
    for resource in resources:
        if resource.type != DAEMONSET:
            continue
        pod = (((_props(resource).get("spec") or {}).get("template") or {}).get("spec")) or {}
        if not any(image_key(str(c.get("image") or "")) == key for c in _containers(pod, "initContainers", "containers")):
            continue
        tolerations = [t for t in pod.get("tolerations") or [] if isinstance(t, dict)]
        terms = ((((pod.get("affinity") or {}).get("nodeAffinity") or {})
                  .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
        if untolerated(tolerations, pool.taints):
            continue
        if Selection.of(pod.get("nodeSelector") or {}, terms).admits(pool.labels, pool.flexible):
            return True
    return False
