"""The instance catalog (GPU counts, GPU memory, prices) the program and the pack share.

The pack reads ``instance_catalog.json`` beside this file, so a published pack carries its own copy,
priced for the stack's region (``llm-platform:region`` in ``PULUMI_CONFIG``): a type without a price
there is a finding naming the refresh command, never another region's price.
GPU families outside the catalog are still recognised by name (``capacity.node_pools.is_gpu_instance_type``),
but counts and prices come only from the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from capacity.instances import (
    CATALOG_PATH,
    DEFAULT_REGION,
    Instance,
    InstanceCatalog,
    load_instances,
)
from capacity.node_pools import admits

from lib.placement import requirement_constraint
from lib.stack_config import stack_region


@dataclass(frozen=True)
class Catalog(InstanceCatalog):
    """The one catalog (``capacity.instances``) plus what the pool policies ask of it: selection."""

    def selectable(self, requirements: list[Any]) -> list[Instance] | None:
        """Catalog types a Karpenter requirement list admits (``capacity.node_pools.admits``, the rule
        the capacity model uses too); ``None`` if a requirement is unknown. Requirements on keys the
        catalog does not describe (zone, capacity type, custom labels) do not narrow the set.
        """
        if any(requirement_constraint(requirement) is None for requirement in requirements):
            return None
        return [instance for instance in self.instances.values() if admits(instance.labels(), requirements)]



def load_catalog(path: Path = CATALOG_PATH, region: str | None = None) -> Catalog:
    """The catalog priced for ``region``, by default the stack's (``PULUMI_CONFIG``); a pack started
    without a stack configuration prices the shipped file's default region."""
    return _load_catalog(path, region or stack_region() or DEFAULT_REGION)


@lru_cache(maxsize=8)
def _load_catalog(path: Path, region: str) -> Catalog:
    shared = load_instances(path, region)
    return Catalog(hours_per_month=shared.hours_per_month, instances=shared.instances, region=shared.region,
                   priced_regions=shared.priced_regions)
