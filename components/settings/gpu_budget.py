"""The stack's GPU ceilings (``gpuBudget``): the worst-case GPU count and monthly spend it may reach.

They sit in the stack file next to ``gpuHoursMonthlyBudget``; the policy pack enforces the same two
numbers (``gpu-capacity-cap.maxGpus``, ``gpu-monthly-budget.monthlyBudgetUsd`` in
``policies/config/<stack>.json``), and the offline check refuses a pack config that disagrees. The
worst case is the capacity model's (``policies.capacity``), the calculator the pack and report use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from components.settings._base import NAMESPACE, _Model

#: Stack-file field -> (pack policy, its parameter).
PACK_PARAMS = {
    "maxGpus": ("gpu-capacity-cap", "maxGpus"),
    "monthlyBudgetUsd": ("gpu-monthly-budget", "monthlyBudgetUsd"),
}


class GpuBudget(_Model):
    """Most GPUs the stack may ever run at once, and its monthly GPU budget in USD at on-demand prices."""

    max_gpus: int = Field(
        ge=0, le=100_000,
        description="Most GPUs the stack may ever run at once, at its worst case (every pool at its maximum); the "
        "pack's gpu-capacity-cap enforces the same number. Unit: GPUs.",
    )
    monthly_budget_usd: float = Field(
        ge=0, le=1_000_000_000,
        description="The stack's monthly GPU budget: its worst case at on-demand prices over 730 hours may not "
        "exceed it; the pack's gpu-monthly-budget enforces the same number. Unit: USD per month.",
    )

    def by_key(self) -> dict[str, float]:
        return {"maxGpus": self.max_gpus, "monthlyBudgetUsd": self.monthly_budget_usd}


def pack_config_disagreements(budget: GpuBudget | None, pack_config: Mapping[str, Any] | Path) -> list[str]:
    """One line per ``gpuBudget`` number the pack config (``policies/config/<stack>.json``, parsed or its
    path) overrides with another value. The pack reads the stack's own ``gpuBudget`` from the
    configuration the engine hands it (``PULUMI_CONFIG``), so a config that leaves the numbers out
    agrees; one that sets them explicitly must set the same. A value that is not a number is left to
    the pack, whose config schema names it, as is an unreadable file."""
    if budget is None:
        return []
    if isinstance(pack_config, Path):
        try:
            pack_config = json.loads(pack_config.read_text())
        except (OSError, ValueError):
            return []
    if not isinstance(pack_config, Mapping):
        return []
    lines = []
    for key, want in budget.by_key().items():
        policy, param = PACK_PARAMS[key]
        entry = pack_config.get(policy)
        have = entry.get(param) if isinstance(entry, Mapping) else None
        if have is None or isinstance(have, bool) or not isinstance(have, (int, float)):
            continue
        if float(have) != float(want):
            lines.append(f"{NAMESPACE}:gpuBudget.{key} is {want:g} but the policy config's {policy}.{param} "
                         f"sets {have:g}; drop the override (the pack reads the stack's gpuBudget) or make them agree")
    return lines
