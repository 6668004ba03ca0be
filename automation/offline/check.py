"""The offline check: settings, plan under mocks, policy pack, files, summary. Needs no cloud account.

One plain pipeline: the pack process is started first (it imports its policies while the program
does), the program is recorded under Pulumi's mock runtime with the pack analyzing each resource
as it is registered (as the engine does in a preview), then ``AnalyzeStack`` is sent and, while the
pack answers it in its own process, the summary and the manifests are made; once every answer is
in, the files are written, each under a temporary name renamed into place.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from automation import exit_codes
from automation.errors import DriverError
from automation.offline.files import render_manifests, write_files, write_json, write_plan
from automation.offline.pack.analysis import PlanAnalysis
from automation.offline.pack.config import WRITE_COMMAND, fact_disagreements
from automation.offline.pack.findings import PackReport, PolicyConfigError
from automation.offline.pack.runner import (
    MAX_ENVIRONMENT_STRING,
    PolicyPackRunner,
    environment_string_bytes,
    pack_environment,
)
from automation.offline.plan import PROJECT, ROOT, Plan, record_plan
from automation.offline.report import Summary, summarize
from automation.stacks import StackFileError, load_stack
from components.settings import config_strings, pack_config_disagreements
from policies.capacity import bounded_json
from policies.capacity.instances import InstanceCatalog, UnpricedInstanceError, load_instances

POLICY_PACK_DIR = ROOT / "policies"


class PolicyConfigMissing(Exception):
    """No ``policies/config/<stack>.json`` and no ``--policy-config`` given."""


class ConfigTooLargeForEngine(StackFileError):
    """The stack's configuration is longer than one environment variable may be, so the Pulumi CLI
    could not start the program or the policy pack with it."""


def engine_environment(stack: str, config: dict[str, str]) -> dict[str, str]:
    """The variables the engine adds to the policy pack's environment, refused (as the engine
    would fail) when ``PULUMI_CONFIG`` is longer than Linux takes in one environment string.

    The engine passes the whole configuration in that one variable to the pack (``constructEnv``
    in pulumi/pulumi sdk/go/common/resource/plugin/analyzer_plugin.go), as the language host does
    to the program, and the exec fails with "argument list too long" above the limit
    (pulumi/pulumi#20402, open). The program under mocks here reads its configuration in this
    process and would run; the engine would not start it.
    """
    env = pack_environment(PROJECT, stack, config)
    size = environment_string_bytes("PULUMI_CONFIG", env.get("PULUMI_CONFIG", ""))
    if size > MAX_ENVIRONMENT_STRING:
        largest = max(config, key=lambda key: len(config[key].encode()))
        raise ConfigTooLargeForEngine(
            f"stack {stack!r}: its configuration is {size:,} bytes as PULUMI_CONFIG (largest key {largest}, "
            f"{len(config[largest].encode()):,} bytes), above the {MAX_ENVIRONMENT_STRING:,} bytes Linux allows one "
            f"environment variable; the Pulumi CLI passes it that way to the program and to the policy pack, which "
            f"would fail to start (argument list too long, pulumi/pulumi#20402); make the largest settings smaller")
    return env


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
    #: each resource beside it), ``summary`` (the summary and the manifests' text, while the pack
    #: answers ``AnalyzeStack``), ``analyze`` (the pack's answers still outstanding after that) and
    #: ``write`` (the files).
    seconds: dict[str, float] = field(default_factory=dict)
    #: Why the GPU budget could not be judged (the catalog has no prices for the stack's region), with
    #: the command that fills them; every policy still ran.
    budget_unknown: str | None = None

    @property
    def passed(self) -> bool:
        return not self.policies.has_mandatory

    @property
    def exit_code(self) -> int:
        """FAILED on a mandatory violation; else BUDGET_UNKNOWN where nothing could be priced; else OK."""
        if not self.passed:
            return exit_codes.FAILED
        return exit_codes.BUDGET_UNKNOWN if self.budget_unknown else exit_codes.OK


def unpriced_catalog(region: str) -> InstanceCatalog:
    """The catalog for a region it has no prices for, every type at $0: the summary's GPU counts and
    placements, whose costs the report then shows as unknown (``Summary.prices_unknown``)."""
    catalog = load_instances(region=region)
    return replace(catalog, instances={name: replace(i, hourly_usd=0.0, on_demand_offered=True)
                                       for name, i in catalog.instances.items()})  # one price: smallest first


def without_unpriced_findings(report: PackReport, region: str) -> PackReport:
    """The pack's findings less the ones that only say a type has no price in ``region`` (the cap and
    budget policies' "cannot be bounded"): the check reports the budget as unknown once instead."""
    marker = f"in {region} in policies/instance_catalog.json"
    kept = [v for v in report.violations if not ("no on-demand price for" in v.message and marker in v.message)]
    return replace(report, violations=kept)


#: Collector thresholds for one large recording (``gc.set_threshold``; the interpreter's defaults are
#: 700, 10, 10): a young pass once this many objects have been allocated net ...
YOUNG_OBJECTS = 100_000
#: ... the middle generation every this many young passes ...
MIDDLE_PASS_EVERY = 8
#: ... and the oldest practically never within one check (it holds the SDK and what the program keeps).
OLD_PASS_EVERY = 1_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Fewer, larger collections for one large recording; the thresholds it found are restored afterwards
    (a nested block finds and restores the raised ones).

    The SDK's modules and every registered resource's outputs and futures stay alive until the
    check ends, and with the default thresholds the collector rescans them over and over. Within
    the block, what existed when it started is frozen out of later collections (``gc.freeze``) and
    the thresholds are raised (``gc.set_threshold``): the program's temporaries in cycles still die
    young, each object is scanned about once, and the long-lived heap is not rescanned.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, MIDDLE_PASS_EVERY, OLD_PASS_EVERY)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        # Everything made meanwhile is young; moved with the rest to the oldest generation, so
        # the first collection after the block is not a pass over the whole check.
        gc.freeze()
        gc.unfreeze()



def default_out_dir(stack: str) -> Path:
    return ROOT / "build" / stack


def policy_config_for(stack: str, override: Path | None = None) -> Path:
    path = override or POLICY_PACK_DIR / "config" / f"{stack}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (POLICY_PACK_DIR / "config").glob("*.json")))
        raise PolicyConfigMissing(f"no policy config {path}; configs here: {known}; pass --policy-config FILE")
    return path


def _stale_facts(stack: str, path: Path) -> list[str]:
    """The program facts ``path`` disagrees on, with the command that regenerates it; an unreadable
    file is left to the pack, whose config reader names it."""
    try:
        config = bounded_json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    lines = fact_disagreements(config) if isinstance(config, dict) else []
    if lines:
        lines.append(f"regenerate it with `{WRITE_COMMAND} --stack {stack}`")
    return lines


def run_check(
    stack: str, out_dir: Path | None = None, *, stack_file: Path | None = None, policy_config: Path | None = None
) -> CheckResult:
    """Validate the stack's settings, record its plan, run the policy pack over it the way
    ``pulumi preview --policy-pack`` would, and write ``plan.json``, ``manifests/`` and
    ``policy-report.json``.

    Raises StackFileError (ConfigTooLargeForEngine included), SettingsError, PolicyConfigMissing or
    PolicyConfigError before any resource is registered, CheckOutputError when the files cannot be written.
    """
    with fewer_collections():
        return _check(stack, out_dir, stack_file, policy_config)


def _check(stack: str, out_dir: Path | None, stack_file: Path | None, policy_config: Path | None) -> CheckResult:
    config, settings = load_stack(stack, path=stack_file)
    config_path = policy_config_for(stack, policy_config)
    # The pack reads the stack's gpuBudget itself (PULUMI_CONFIG); the stack's own policy config, if it
    # sets the numbers anyway, must set the stack's, or the pack would judge by a stale copy. An explicit
    # --policy-config is a deliberate override (what-if), not compared.
    # Its program facts (contract keys, agent placement) are generated from the program's sources; a
    # stale or hand-edited copy would make the pack judge by other labels than the program writes.
    disagreements = [] if policy_config else [
        *pack_config_disagreements(settings.gpu_budget, config_path), *_stale_facts(stack, config_path)]
    if disagreements:
        raise PolicyConfigError(f"{config_path.name}: " + "; ".join(disagreements))
    strings = config_strings(config)
    environment = engine_environment(stack, strings)
    out = out_dir or default_out_dir(stack)
    with _writing_to(out):  # before anything runs: an --out that cannot be written stops here
        (out / "manifests").mkdir(parents=True, exist_ok=True)
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return round(clock[-1] - clock[-2], 3)

    # The engine gives a policy pack the stack's configuration in its environment.
    pack = PolicyPackRunner(POLICY_PACK_DIR, env=environment)
    try:
        pack.launch()  # it imports its policies while the program imports the SDK
        analysis = PlanAnalysis(pack, config_path)
        plan = record_plan(stack, strings, region=settings.region, on_record=analysis.submit)
        recorded = lap()
        # The program is done: what the SDK made for it (outputs, futures, tasks, the RPC list) is
        # garbage now, in cycles only the collector frees, and it is off here. One pass, so the
        # AnalyzeStack request, the summary and the files reuse that memory instead of adding to it.
        gc.collect()
        analysis.send_stack(plan.resources)
        # While the pack answers AnalyzeStack in its own process: the summary and the manifests' text.
        budget_unknown = None
        try:
            summary = summarize(plan, load_instances(region=settings.region))
        except UnpricedInstanceError as error:  # never another region's prices
            if not error.region_unpriced:
                raise DriverError(str(error), exit_codes.USAGE) from None
            budget_unknown = str(error)
            summary = summarize(plan, unpriced_catalog(settings.region))
            summary.prices_unknown = budget_unknown
        manifests = render_manifests(plan)
        summarized = lap()
        policies = analysis.finish()
        if budget_unknown is not None:
            policies = without_unpriced_findings(policies, settings.region)
    finally:
        pack.close()
    analyzed = lap()
    # Written only once the pack has answered: a check that fails before leaves the last check's files.
    with _writing_to(out):
        plan_path = write_plan(plan, out)
        manifest_paths = write_files(out / "manifests", manifests)
        write_json(out / "policy-report.json", policies.to_json())
    written = lap()
    return CheckResult(
        plan=plan, summary=summary, plan_path=plan_path, manifest_paths=manifest_paths, policies=policies,
        budget_unknown=budget_unknown,
        seconds={"record": recorded, "summary": summarized, "analyze": analyzed, "write": written},
    )

