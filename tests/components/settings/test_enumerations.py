"""Settings' enumerations are the contract's sets, not retyped copies."""

from __future__ import annotations

from typing import get_args

from components import contract
from components.settings.cluster import GpuSoftware
from components.settings.karpenter import KarpenterNodePool
from components.settings.managed_pools import GpuPool
from components.specs.gpu_software import Provider


def _allowed(model, field: str) -> tuple[str, ...]:
    annotation = model.model_fields[field].annotation
    args = get_args(annotation)
    return get_args(args[0]) if args and get_args(args[0]) else args


def test_pool_purposes_come_from_the_contract():
    assert _allowed(GpuPool, "purpose") == contract.GPU_PURPOSES
    assert _allowed(KarpenterNodePool, "purpose") == tuple(
        p for p in contract.GPU_PURPOSES if p != contract.GPU_DRA_PURPOSE)


def test_capacity_types_come_from_the_contract():
    assert _allowed(GpuPool, "capacity_type") == tuple(contract.CAPACITY_TYPES)
    assert _allowed(KarpenterNodePool, "capacity_types") == tuple(contract.CAPACITY_TYPES.values())
    assert {contract.capacity_label_value(t) for t in contract.CAPACITY_TYPES} == set(contract.CAPACITY_TYPES.values())


def test_gpu_software_providers_are_one_set():
    assert _allowed(GpuSoftware, "provider") == contract.GPU_SOFTWARE_PROVIDERS == get_args(Provider)
