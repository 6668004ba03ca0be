"""The offline check: settings, plan under mocks, manifests, summary. Needs no cloud account."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.settings import config_strings, pack_config_disagreements
from components.settings.stack import parsed_once

from automation.offline.pack.feeder import NICENESS as PACK_NICENESS
from automation.offline.pack.findings import PackReport, PolicyConfigError, resource_dict
from automation.offline.pack.streaming import StreamingAnalysis, feeder_properties
from automation.offline.emit import write_json
from automation.offline.files import StreamedFiles
from automation.offline.frames import resource_frame
from automation.offline.plan import PROJECT, ROOT, Plan, record_plan
from automation.offline.report import Summary, summarize
from automation.stacks import load_stack


POLICY_PACK_DIR = ROOT / "policies"

#: How much less of the machine the forked file writer asks for: less than the pack too. While the
#: program records it renders each resource on the core the pack leaves idle, and the recording
#: (the check's own process) is the critical path; when the recording ends, the pack's AnalyzeStack
#: is the longest work left (at 500 models, 0.2 s against the writer's 0.05 s of writing).
WRITER_NICENESS = PACK_NICENESS + 5


class PolicyConfigMissing(Exception):
    """No ``policies/config/<stack>.json`` and no ``--policy-config`` given."""


class CheckOutputError(Exception):
    """The check's files cannot be written where ``--out`` says (a file in the way, no permission,
    a full disk)."""


@contextmanager
def _writing_to(out: Path) -> Iterator[None]:
    try:
        yield
    except OSError as error:
        where = error.filename or out
        raise CheckOutputError(f"cannot write the check's files to {out} ({error.strerror or error}: {where}); "
                               f"choose another --out") from None


@dataclass
class CheckResult:
    plan: Plan
    summary: Summary
    plan_path: Path
    manifest_paths: list[Path]
    policies: PackReport
    #: Wall seconds of the check's phases: ``record`` (the program under mocks, the pack analyzing
    #: and the file writer rendering beside it), ``write`` (the summary, and the writer writing
    #: plan.json and manifests) and ``pack_wait`` (the pack's answers still
    #: outstanding after the files were written).
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.policies.has_mandatory


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The cyclic garbage collector tuned for one large recording, restored afterwards (by the
    outermost of nested blocks).

    The SDK modules (types by the ten thousand) and every registered resource's outputs and
    futures stay alive until the check ends, and the collector rescans them over and over: with
    the default thresholds that was a third of the check's CPU at 100 models; with young objects
    collected every 50,000 allocations, still half a second at 500 models, for a few MiB of
    garbage cycles. So the collector is off within the block (the check's peak at 500 models
    214 -> 218 MiB) and what exists when the block starts is frozen out of later collections.
    """
    global _collections_tuned
    if _collections_tuned:  # nested: the outermost block restores
        yield
        return
    was_enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    _collections_tuned = True
    try:
        yield
    finally:
        _collections_tuned = False
        # Everything made meanwhile is young; moved with the rest to the oldest generation, so
        # the first collection after the block is not a pass over the whole check.
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


_collections_tuned = False


def default_out_dir(stack: str) -> Path:
    return ROOT / "build" / stack


def policy_config_for(stack: str, override: Path | None = None) -> Path:
    path = override or POLICY_PACK_DIR / "config" / f"{stack}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (POLICY_PACK_DIR / "config").glob("*.json")))
        raise PolicyConfigMissing(f"no policy config {path}; configs here: {known}; pass --policy-config FILE")
    return path


def run_check(
    stack: str, out_dir: Path | None = None, *, stack_file: Path | None = None, policy_config: Path | None = None
) -> CheckResult:
    """Validate the stack's settings, record its plan, write ``plan.json`` and ``manifests/``, and
    run the policy pack over the plan the way ``pulumi preview --policy-pack`` would.

    Raises StackFileError, SettingsError or PolicyConfigMissing before any resource is registered.
    """
    # The program parses the same settings again; that parse is this one. The collector stays tuned
    # to the end: the first collection with default settings after the block scanned the whole heap
    # (0.4 s at 500 models) for the report's last lines.
    with parsed_once(), fewer_collections():
        return _check(stack, out_dir, stack_file, policy_config)


def _check(stack: str, out_dir: Path | None, stack_file: Path | None, policy_config: Path | None) -> CheckResult:
    config, settings = load_stack(stack, path=stack_file)
    config_path = policy_config_for(stack, policy_config)
    # The stack's own pack config must repeat its gpuBudget; an explicit --policy-config is an override.
    disagreements = [] if policy_config else pack_config_disagreements(settings.gpu_budget, config_path)
    if disagreements:
        raise PolicyConfigError(f"{config_path.name}: " + "; ".join(disagreements))
    # The pack starts now and analyzes each resource as the program registers it.
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return round(clock[-1] - clock[-2], 3)

    out = out_dir or default_out_dir(stack)
    with _writing_to(out):  # before anything runs: an --out that cannot be written stops here
        (out / "manifests").mkdir(parents=True, exist_ok=True)
    # The file writer is forked first, while the process is small (and before the feeder's pipe exists).
    with StreamedFiles(out, PROJECT, stack, niceness=WRITER_NICENESS) as files, \
            StreamingAnalysis(config_path, POLICY_PACK_DIR) as pack:

        def recorded_resource(resource: Any, properties: Any) -> None:
            # One frame, pickled once, for both helpers.
            frame = resource_frame(resource_dict(resource), feeder_properties(properties))
            pack.submit_frame(resource.urn, frame)
            files.submit(resource, frame)

        plan = record_plan(stack, config_strings(config), region=settings.region, on_record=recorded_resource)
        plan.resources.sort(key=lambda r: r.urn)
        pack.end(plan.resources)  # AnalyzeStack runs in the pack while the files are written
        recorded = lap()
        with _writing_to(out):
            # The writer has rendered the resources as they were registered: it writes the files in
            # the plan's order while the summary is worked out here.
            files.end(plan.resources)
            summary = summarize(plan)
            manifest_paths = files.finish()
        written = lap()
        policies = pack.finish()
        waited = lap()
    with _writing_to(out):
        write_json(out / "policy-report.json", policies.to_json())
    return CheckResult(
        plan=plan, summary=summary, plan_path=out / "plan.json", manifest_paths=manifest_paths, policies=policies,
        seconds={"record": recorded, "write": written, "pack_wait": waited},
    )
