"""Managed node group settings: the system pool and GPU pools."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from components import contract
from components.settings._base import (
    FAST_IMAGE_PULL_DESCRIPTION,
    GPU_ROOT_VOLUME_IOPS,
    GPU_ROOT_VOLUME_THROUGHPUT_MIBPS,
    _check_known_types,
    _check_labels,
    _dns_name,
    _Model,
    keyed,
)
from components.settings.reservations import CapacityReservation
from policies.capacity.instances import Instance, load_instances


class Scaling(_Model):
    """Node counts of a managed node group: ``minSize <= desiredSize <= maxSize``."""

    min_size: int = Field(ge=0, le=1000, description="Fewest nodes the group keeps. Unit: nodes.")
    desired_size: int = Field(
        ge=0, le=1000,
        description="Nodes the group starts with; Cluster Autoscaler moves it between minSize and maxSize. "
        "Unit: nodes.",
    )
    max_size: int = Field(ge=1, le=1000, description="Most nodes the group may grow to. Unit: nodes.")

    @model_validator(mode="after")
    def _ordered(self) -> Scaling:
        if not self.min_size <= self.desired_size <= self.max_size:
            key = "desiredSize" if self.min_size <= self.max_size else "minSize"
            raise keyed(
                f"need minSize <= desiredSize <= maxSize, got {self.min_size} <= {self.desired_size} <= {self.max_size}",
                key,
            )
        return self


class SystemPool(_Model):
    """The untainted CPU pool for controllers and add-ons: on-demand, at least two nodes, two AZs."""

    instance_types: list[str] = Field(
        min_length=1, max_length=20,
        description="CPU instance types from the instance catalog (policies/instance_catalog.json), such as m7i.xlarge.",
    )
    capacity_type: Literal[contract.ON_DEMAND] = Field(  # type: ignore[valid-type]
        default=contract.ON_DEMAND,
        description="On-demand only: the controllers must not lose their nodes to a Spot reclaim.",
    )
    scaling: Scaling = Field(description="Node counts; minSize at least 2, in 2 zones.")
    disk_size_gib: int = Field(default=50, ge=20, le=1000, description="Each node's root volume. Unit: GiB.")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Kubernetes labels on the pool's nodes; the scheduling contract's keys are reserved "
        "(default none).",
    )

    _labels = field_validator("labels")(_check_labels)

    @field_validator("instance_types")
    @classmethod
    def _cpu_types(cls, types: list[str]) -> list[str]:
        _check_known_types(types)
        gpu = [t for t in types if load_instances().instances[t].gpus]
        if gpu:
            raise ValueError(f"{', '.join(gpu)} carry GPUs; the system pool takes CPU types only")
        return types

    @field_validator("scaling")
    @classmethod
    def _two_nodes(cls, scaling: Scaling) -> Scaling:
        if scaling.min_size < 2:
            raise ValueError(f"minSize is {scaling.min_size}; the system pool keeps at least 2 nodes in 2 AZs")
        return scaling


class GpuPool(_Model):
    """A tainted GPU managed node group. ``name`` becomes the pool label and part of resource names."""

    name: str = Field(
        description="The pool label models select (pool), also part of resource names: 2-32 lowercase letters, "
        "digits or '-', unique across every GPU pool.",
    )
    instance_types: list[str] = Field(
        min_length=1, max_length=20,
        description="GPU instance types from the catalog, all of one GPU model (so the pool's labels stay true). "
        "Cluster Autoscaler sizes an empty group by the first.",
    )
    capacity_type: contract.CapacityType = Field(
        default=contract.ON_DEMAND,
        description="`ON_DEMAND`, `SPOT` (needs 2 or more instance types) or `CAPACITY_BLOCK` (needs a "
        "capacity-block reservation).",
    )
    scaling: Scaling = Field(
        description="Node counts; minSize 0 (the pool scales to zero), or at least 1 for gpu-dra.",
    )
    purpose: contract.GpuPurpose = Field(
        default=contract.GPU_INFERENCE_PURPOSE,
        description="What the pool runs: `gpu-inference`, `gpu-training`, or `gpu-dra` (pods that claim GPUs "
        "through Dynamic Resource Allocation).",
    )
    disk_size_gib: int = Field(
        default=200, ge=50, le=4000,
        description="Each node's encrypted gp3 root volume (6000 IOPS, 500 MiB/s): vLLM images are several GB. "
        "Unit: GiB.",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Kubernetes labels on the pool's nodes; the scheduling contract's keys are reserved "
        "(default none).",
    )
    reservation: CapacityReservation | None = Field(
        default=None,
        description="The capacity reservation the group launches into (docs/reserved-capacity.md): a Capacity Block "
        "with capacityType CAPACITY_BLOCK, or an On-Demand Capacity Reservation (type default) with ON_DEMAND. The "
        "group's launch template then targets it and its subnets are the reservation's zone (default none).",
    )
    fast_image_pull: bool = Field(
        default=True,
        description=FAST_IMAGE_PULL_DESCRIPTION.format(what="group's launch template, so its nodes roll"),
    )

    _labels = field_validator("labels")(_check_labels)

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("instance_types")
    @classmethod
    def _gpu_types_of_one_model(cls, types: list[str]) -> list[str]:
        catalog = load_instances()
        _check_known_types(types)
        cpu = [t for t in types if not catalog.instances[t].gpus]
        if cpu:
            raise ValueError(f"{', '.join(cpu)} have no GPU; allowed: {', '.join(catalog.gpu_names())}")
        models = sorted({catalog.instances[t].gpu_name or "" for t in types})
        if len(models) > 1:
            raise ValueError(
                f"mixes GPU models {', '.join(models)}; a pool holds one GPU model so its labels stay true"
            )
        return types

    @model_validator(mode="after")
    def _min_size(self) -> GpuPool:
        minimum = self.scaling.min_size
        if self.purpose == contract.GPU_DRA_PURPOSE:
            if minimum < 1:
                raise keyed(
                    f"scaling.minSize is 0 on gpu-dra pool {self.name!r}; Cluster Autoscaler builds an empty group's "
                    "node from its ASG tags, which cannot describe DRA devices (ResourceSlices), so a DRA pool at "
                    "zero never grows: keep minSize >= 1", "scaling", "minSize"
                )
        elif minimum != 0:
            raise keyed(f"scaling.minSize is {minimum}; GPU pools scale to minSize 0", "scaling", "minSize")
        return self

    @model_validator(mode="after")
    def _spot_diversity(self) -> GpuPool:
        if self.capacity_type == "SPOT" and len(self.instance_types) < 2:
            raise keyed(
                f"SPOT pool {self.name!r} lists {len(self.instance_types)} instance type; "
                "list at least 2 types with the same GPU model so Spot can find capacity", "instanceTypes"
            )
        return self

    @model_validator(mode="after")
    def _reservation_fits(self) -> GpuPool:
        """A reservation is launched into only by a group that asks for it the way EC2 requires.

        EKS user guide, "Create a managed node group with Capacity Blocks for ML": ``capacityType:
        CAPACITY_BLOCK`` with a launch template whose ``InstanceMarketOptions.MarketType`` is
        ``capacity-block`` and whose ``CapacityReservationTarget`` names the block, subnets in the block's
        AZ. An On-Demand Capacity Reservation is targeted the same way without the market option, by an
        on-demand group. A targeted launch runs only the reserved type, and at most the reserved count."""
        reservation, capacity = self.reservation, self.capacity_type
        if reservation is None:
            if capacity == contract.CAPACITY_BLOCK:
                raise keyed(f"capacityType CAPACITY_BLOCK on pool {self.name!r} needs a reservation (id, type: "
                            "capacity-block, availabilityZone, instanceType, instanceCount, endDate): without the "
                            "block's id and market option the group cannot launch", "reservation")
            return self
        if reservation.type == contract.RESERVATION_CAPACITY_BLOCK and capacity != contract.CAPACITY_BLOCK:
            raise keyed(f"{capacity} with a capacity-block reservation; a Capacity Block launches only with "
                        "capacityType CAPACITY_BLOCK", "capacityType")
        if reservation.type == contract.RESERVATION_ODCR and capacity != contract.ON_DEMAND:
            raise keyed(f"{capacity} with an On-Demand Capacity Reservation (type default); it is used by "
                        "ON_DEMAND launches (for a Capacity Block set type: capacity-block and CAPACITY_BLOCK)",
                        "capacityType")
        if reservation.instance_type not in self.instance_types:
            raise keyed(f"{reservation.instance_type} is not among the pool's instanceTypes "
                        f"({', '.join(self.instance_types)}); the reservation holds only that type",
                        "reservation", "instanceType")
        if self.instance_types != [reservation.instance_type]:
            others = [t for t in self.instance_types if t != reservation.instance_type]
            raise keyed(f"{', '.join(others)} besides the reserved {reservation.instance_type}: a launch that "
                        "targets the reservation fails for any other type; list only the reserved type",
                        "instanceTypes")
        if self.scaling.max_size > reservation.instance_count:
            raise keyed(f"maxSize {self.scaling.max_size} is above the reservation's instanceCount "
                        f"{reservation.instance_count}; launches past it fail (the target admits no other "
                        "capacity)", "scaling", "maxSize")
        return self

    @property
    def instances(self) -> list[Instance]:
        """The catalog entries of ``instance_types`` (one GPU model, validated above)."""
        catalog = load_instances()
        return [catalog.instances[t] for t in self.instance_types]

    @property
    def accelerator(self) -> str:
        return self.instances[0].gpu_name or ""

    @property
    def disk_iops(self) -> int:
        return GPU_ROOT_VOLUME_IOPS

    @property
    def disk_throughput_mibps(self) -> int:
        return GPU_ROOT_VOLUME_THROUGHPUT_MIBPS

    @property
    def gpu_memory_mib(self) -> int:
        return self.instances[0].gpu_memory_mib or 0

    @property
    def min_gpus_per_node(self) -> int:
        """GPUs on the smallest node the group may launch (what Cluster Autoscaler's template promises)."""
        return min(t.gpus for t in self.instances)
