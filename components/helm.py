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
    wait: bool = True,
) -> k8s.helm.v3.Release:
    """An atomic Helm release of ``chart`` at its pinned version; OCI charts need no repository.

    ``wait`` False: neither Helm nor Pulumi waits for the release's pods (and so it is not atomic), for
    a chart whose pods can only run on nodes that join after the release (Cilium on hybrid nodes)."""
    return k8s.helm.v3.Release(
        resource_name,
        name=release_name,
        chart=chart.ref,
        version=chart.version,
        repository_opts=None if chart.is_oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
        namespace=namespace,
        create_namespace=create_namespace,
        atomic=wait,
        skip_await=None if wait else True,
        cleanup_on_fail=True,
        skip_crds=skip_crds,
        timeout=timeout,
        values=values,
        opts=opts,
    )
