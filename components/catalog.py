"""EC2 instance facts and prices, read from the one table the policy pack also uses.

The table is ``policies/instance_catalog.json``: the pack must be self-contained when published,
so the data lives with it and the program reads it from there rather than keeping a second copy.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

CATALOG_PATH = Path(__file__).resolve().parent.parent / "policies" / "instance_catalog.json"


class InstanceType(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    name: str = ""
    category: str
    family: str
    vcpu: int
    memory_mib: int = Field(alias="memoryMiB")
    gpus: int
    gpu_name: str | None = Field(default=None, alias="gpuName")
    gpu_memory_mib: int | None = Field(default=None, alias="gpuMemoryMiB")
    on_demand_hourly_usd: float = Field(alias="onDemandHourlyUsd")
    #: Pods the VPC CNI can give an IP without prefix delegation: ENIs x (IPv4 per ENI - 1) + 2
    #: (awslabs/amazon-eks-ami eni-max-pods.txt).
    max_pods: int | None = Field(default=None, alias="maxPods")

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    description: str
    region: str
    hours_per_month: int = Field(alias="hoursPerMonth")
    instances: dict[str, InstanceType]

    def get(self, name: str) -> InstanceType | None:
        return self.instances.get(name)

    def known(self) -> list[str]:
        return sorted(self.instances)

    def gpu_types(self) -> list[str]:
        return sorted(n for n, t in self.instances.items() if t.is_gpu)


@lru_cache(maxsize=1)
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    raw = json.loads(path.read_text())
    raw["instances"] = {name: {**spec, "name": name} for name, spec in raw["instances"].items()}
    return Catalog.model_validate(raw)
