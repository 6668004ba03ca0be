"""Streamed weights: the Run:ai model streamer's CPU buffers must leave the server container room to run.

vLLM's ``--load-format runai_streamer`` reads safetensors from object storage through a CPU buffer of
``RUNAI_STREAMER_MEMORY_LIMIT`` bytes (run-ai/runai-model-streamer docs/src/env-vars.md), one streamer per
tensor-parallel rank (``--tensor-parallel-size``), all in the server container. The program's settings
refuse buffers that take more than half of the container's memory limit (vLLM's own host state needs the
rest); this policy applies the same rule to what a stack holds, the program's objects and hand-written
ones alike, so an edit after the settings cannot slip past. A container without a memory limit, or a
streamer without the variable, is not judged here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity.cold_start import LOAD_FORMAT_FLAG, STREAMER_LOAD_FORMAT, STREAMER_MEMORY_LIMIT_ENV, flag_value
from lib.kit import MANDATORY, resource_policy
from lib.pod_templates import POD_TEMPLATE_PATHS, pod_templates
from lib.resources import Resource
from lib.values import UNKNOWN, contains_unknown, quantity

GIB = 1024**3


def _problem(container: dict[str, Any]) -> str | None:
    args = [a for a in [*(container.get("command") or []), *(container.get("args") or [])] if isinstance(a, str)]
    if flag_value(args, LOAD_FORMAT_FLAG) != STREAMER_LOAD_FORMAT:
        return None
    env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
    limit = quantity(env.get(STREAMER_MEMORY_LIMIT_ENV))
    memory = quantity(((container.get("resources") or {}).get("limits") or {}).get("memory"))
    if limit is None or memory is None or limit <= 0:
        return None
    try:
        ranks = max(1, int(flag_value(args, "--tensor-parallel-size") or 1))
    except ValueError:
        ranks = 1
    buffers = ranks * limit
    if buffers * 2 <= memory:
        return None
    return (f"container '{container.get('name', '?')}' streams its weights with {ranks} streamer buffer(s) of "
            f"{limit / GIB:g} GiB ({STREAMER_MEMORY_LIMIT_ENV}, one per tensor-parallel rank), "
            f"{buffers / GIB:g} GiB in all, more than half of its memory limit of {memory / GIB:g} GiB: vLLM's "
            f"own host-side state needs the rest. Lower {STREAMER_MEMORY_LIMIT_ENV} (streaming.memoryLimitGib) or "
            "raise the memory limit.")


def _check(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    for template in pod_templates(resource, config):
        if template.spec is UNKNOWN:
            continue
        for container in template.containers("containers"):
            if contains_unknown(container):
                continue
            if (problem := _problem(container)) is not None:
                yield f"{template.label}: {problem}"


POLICIES = [
    resource_policy(
        name="weight-streamer-buffers-fit",
        description=(
            "Keep the Run:ai model streamer's CPU buffers (RUNAI_STREAMER_MEMORY_LIMIT x tensor-parallel ranks) at "
            "most half of the server container's memory limit: lower streaming.memoryLimitGib or raise memory."
        ),
        types=frozenset(POD_TEMPLATE_PATHS),
        check=_check,
        enforcement=MANDATORY,
        custom_workloads=True,
    ),
]
