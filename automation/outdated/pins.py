"""Every pin of a versions module, with the source that knows its newest version.

Charts (``HelmChart``): the repository's ``index.yaml``, or the OCI tag list for an ``oci://``
repository. Images (``Image``): the registry's tag list. EKS add-ons (``EKS_ADDONS``, one build per
add-on and Kubernetes minor): ``aws eks describe-addon-versions``. The Karpenter AMI alias
(``al2023@vYYYYMMDD``): the EKS AMI release in SSM's public parameter, per minor the stack list
supports. The Cluster Autoscaler image per minor (``CLUSTER_AUTOSCALER_IMAGES``): the tag list,
keeping the minor.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import Any

from components import versions as shipped

DEFAULT_VERSIONS_FILE = Path(shipped.__file__)

#: EksAddons field -> the add-on's name in the EKS API.
ADDON_NAMES = {"coredns": "coredns", "kube_proxy": "kube-proxy", "vpc_cni": "vpc-cni",
               "ebs_csi_driver": "aws-ebs-csi-driver", "pod_identity_agent": "eks-pod-identity-agent"}
#: The AMI release Karpenter's ``al2023@<version>`` alias names, per Kubernetes minor: the accelerated
#: (NVIDIA) variant's parameter, since GPU nodes are why the alias is pinned; all variants of one
#: release share its date (awslabs/amazon-eks-ami releases are tagged ``vYYYYMMDD`` for every variant).
AMI_RELEASE_PARAMETER = "/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/x86_64/nvidia/recommended/release_version"


class VersionsFileError(Exception):
    """The versions file cannot be loaded."""


@dataclass(frozen=True)
class Pin:
    """One pinned version: its name in the versions module, what kind it is and where to ask."""

    name: str
    kind: str  #: chart, image, addon, ami
    pinned: str
    subject: Any  #: the HelmChart or Image; the add-on's API name; the SSM parameter
    minor: str | None = None  #: set for a pin made for one Kubernetes minor

    @property
    def source(self) -> str:
        """Where the newest version is read, as a user would name it."""
        if self.kind == "chart":
            chart = self.subject
            return f"{chart.repository}/{chart.chart} (tags)" if chart.is_oci else f"{chart.repository}/index.yaml"
        if self.kind == "image":
            return f"{self.subject.repository} (tags)"
        if self.kind == "addon":
            return f"aws eks describe-addon-versions --addon-name {self.subject} --kubernetes-version {self.minor}"
        return f"aws ssm get-parameter --name {self.subject}"


def load(path: Path = DEFAULT_VERSIONS_FILE) -> ModuleType:
    """The versions module at ``path`` (the shipped one unless a copy is named)."""
    if path.resolve() == DEFAULT_VERSIONS_FILE.resolve():
        return shipped
    if not path.is_file():
        raise VersionsFileError(f"--versions-file {path}: no such file")
    name = f"_versions_under_check_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise VersionsFileError(f"--versions-file {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of a user's file is one line
        sys.modules.pop(name, None)
        raise VersionsFileError(f"--versions-file {path}: {type(exc).__name__}: {str(exc)[:200]}") from None
    return module


def collect(module: ModuleType) -> list[Pin]:
    """Every pin of ``module``, in file order; an object also listed per minor keeps its own name."""
    names: dict[int, str] = {}
    pins: list[Pin] = []
    per_minor_images = getattr(module, "CLUSTER_AUTOSCALER_IMAGES", {}) or {}
    minor_of = {id(image): minor for minor, image in per_minor_images.items()}
    for name, value in vars(module).items():
        if name.startswith("_") or id(value) in names:
            continue
        kind = type(value).__name__  # by name: a copy of the file defines its own classes
        if kind == "HelmChart":
            names[id(value)] = name
            pins.append(Pin(name, "chart", value.version, value))
        elif kind == "Image":
            names[id(value)] = name
            pins.append(Pin(name, "image", value.tag, value, minor_of.get(id(value))))
    for minor, image in per_minor_images.items():
        if id(image) not in names:
            pins.append(Pin(f"CLUSTER_AUTOSCALER_IMAGES[{minor}]", "image", image.tag, image, minor))
    for minor, addons in (getattr(module, "EKS_ADDONS", {}) or {}).items():
        for field in fields(addons):
            pins.append(Pin(f"EKS_ADDONS[{minor}].{field.name}", "addon", getattr(addons, field.name),
                            ADDON_NAMES.get(field.name, field.name.replace("_", "-")), minor))
    alias = getattr(module, "KARPENTER_AMI_ALIAS", None)
    if isinstance(alias, str) and "@" in alias:
        for minor in getattr(module, "SUPPORTED_KUBERNETES_VERSIONS", ()):
            pins.append(Pin(f"KARPENTER_AMI_ALIAS[{minor}]", "ami", alias.split("@", 1)[1],
                            AMI_RELEASE_PARAMETER.format(minor=minor), minor))
    return pins
