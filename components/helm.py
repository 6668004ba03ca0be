"""Helm releases, always from a chart pinned in :mod:`components.versions`."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.versions import HelmChart


def pinned_release(
    resource_name: str,
    chart: HelmChart,
    *,
    release_name: str,
    namespace: str,
    values: pulumi.Input[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    create_namespace: bool = True,
    skip_crds: bool = False,
    timeout: int = 600,
) -> k8s.helm.v3.Release:
    """An atomic Helm release of ``chart`` at its pinned version; OCI charts need no repository."""
    return k8s.helm.v3.Release(
        resource_name,
        name=release_name,
        chart=chart.ref,
        version=chart.version,
        repository_opts=None if chart.is_oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
        namespace=namespace,
        create_namespace=create_namespace,
        atomic=True,
        cleanup_on_fail=True,
        skip_crds=skip_crds,
        timeout=timeout,
        values=values,
        opts=opts,
    )
