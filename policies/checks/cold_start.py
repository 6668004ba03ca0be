"""A model's cold start fits its tier's budget: ``cold-start-budget``.

The stack's ``llm-platform:serving`` configuration (``PULUMI_CONFIG``, see :mod:`lib.stack_config`)
gives each tier an optional ``coldStartBudgetSeconds`` and lists the tier's models. For every model
Deployment of such a tier the pack finds the pool it lands on and the node type the autoscaler plans
with (:func:`capacity.simulate`), the pool's root volume throughput (EC2NodeClass, Auto Mode
NodeClass, or the managed group's launch template; gp3's baseline when none is set), the model's
weights (its architecture annotation or catalog entry), how they are loaded (downloaded by an init
container, or streamed from S3 by vLLM's ``--load-format runai_streamer``), its image and its startup
probe, and predicts the cold start with :mod:`capacity.cold_start`. A model over its budget is reported with
the step that dominates and every step's figure. Tiers without a budget are not judged against one, and
stacks whose deciding fields are not known yet (preview) are not judged at all.

Every model, budget or not, must also start within its own startup probe: the kubelet kills a container
whose startupProbe has failed ``failureThreshold`` times in a row, ``periodSeconds`` apart, after
``initialDelaySeconds`` (kubernetes pkg/kubelet/prober/worker.go ``doProbe``), so a server that needs
longer than that window to load, compile and answer is restarted before it is ever ready, again and again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from capacity import bounded_json
from capacity.cold_start import (
    GP3_BASELINE,
    fast_image_pull,
    gpu_software_of,
    root_volume_mibps,
    server_container,
    start,
    weight_loading,
)
from capacity.model import Workload
from lib.kit import MANDATORY, Stack, stack_policy
from lib.stack_config import NAMESPACE, StackConfigError, config_number, stack_config

from checks.capacity_simulation import stack_simulation

SERVING_KEY = f"{NAMESPACE}:serving"
BUDGET_FIELD = "coldStartBudgetSeconds"
#: Kubernetes' probe defaults (core/v1 Probe: periodSeconds 10, failureThreshold 3).
PROBE_PERIOD_DEFAULT, PROBE_FAILURES_DEFAULT = 10, 3


#: The program's (``components/specs/serving.py``); generated into config/<stack>.json as a program fact.
NAMESPACE_PREFIX_PARAM, TIER_NAMESPACE_PREFIX = "tierNamespacePrefix", "serving-"


def tier_budgets(config: dict[str, Any] | None = None) -> dict[str, tuple[str, float]]:
    """Model name -> (tier, ``coldStartBudgetSeconds``) for every tier that sets a budget.

    :class:`StackConfigError` names the key when the value is unreadable.
    """
    value = (stack_config() if config is None else config).get(SERVING_KEY)
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = bounded_json.loads(value)
        except ValueError:
            raise StackConfigError(f"{SERVING_KEY} is not a JSON object (the stack's configuration)") from None
    tiers = value.get("tiers") if isinstance(value, dict) else None
    budgets: dict[str, tuple[str, float]] = {}
    for index, tier in enumerate(tiers if isinstance(tiers, list) else []):
        if not isinstance(tier, dict) or tier.get(BUDGET_FIELD) is None:
            continue
        budget = config_number(tier[BUDGET_FIELD], integer=True)
        if budget is None or budget <= 0:
            raise StackConfigError(f"{SERVING_KEY}.tiers[{index}].{BUDGET_FIELD} must be a number of seconds > 0 "
                                   "(the stack's configuration)")
        name = str(tier.get("name") or f"tiers[{index}]")
        for model in tier.get("models") or []:
            if isinstance(model, dict) and model.get("name"):
                budgets[str(model["name"])] = (name, float(budget))
    return budgets


#: The steps that run inside the server container, under its startup probe (the weight copy runs before, in
#: the init container; a node and an image come before any container).
UNDER_PROBE = ("load", "compile", "readiness")


def model_cold_starts(stack: Stack) -> Iterator[tuple[Workload, str, dict[str, Any], Any]]:
    """Every model Deployment's cold start, with its name and its server's startup probe (the workload
    carries its namespace)."""
    simulated = stack_simulation(stack)
    if simulated is None:
        return
    cluster, simulation = simulated
    plans = {plan.pool.name: plan for plan in simulation.plans}
    # Per pool, worked out once: the type its autoscaler plans with, its nodes' root volume throughput.
    shapes = {name: plan.planning for name, plan in plans.items()}
    volumes: dict[str, float] = {}
    parallel_pulls: dict[str, bool] = {}
    paths: dict[str, str] = {}
    for workload in cluster.workloads:
        resource = stack.by_urn.get(workload.key)
        if resource is None or workload.kind != "Deployment" or workload.model is None:
            continue
        name = str((resource.props.get("metadata") or {}).get("name") or "")
        plan = plans.get(simulation.placements.get(workload.name, ""))
        shape = shapes.get(plan.pool.name) if plan else None
        if plan is None or shape is None:
            continue  # capacity-simulation reports a model that lands nowhere
        if plan.pool.key not in volumes:
            volumes[plan.pool.key] = root_volume_mibps(stack.resources, plan.pool.key) or GP3_BASELINE.value
            parallel_pulls[plan.pool.key] = fast_image_pull(stack.resources, plan.pool.key)
            paths[plan.pool.key] = gpu_software_of(stack.resources, plan.pool)
        pod = ((resource.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        server = server_container(pod) or {}
        probe = server.get("startupProbe") or {}
        yield workload, name, probe, start(
            name, f"{plan.pool.kind} '{plan.pool.name}'",
            weight_bytes=workload.model.architecture.weight_bytes(), instance=shape.instance,
            capacity_source=plan.pool.capacity_source, image=str(server.get("image") or ""),
            disk_throughput_mibps=volumes[plan.pool.key],
            startup_probe_period_seconds=float(probe.get("periodSeconds") or PROBE_PERIOD_DEFAULT),
            startup_probe_failures=int(probe.get("failureThreshold") or PROBE_FAILURES_DEFAULT),
            loading=weight_loading(pod), fast_image_pull=parallel_pulls[plan.pool.key],
            gpu_software=paths[plan.pool.key])


def _probe_overrun(name: str, probe: dict[str, Any], cold: Any) -> str | None:
    """The message when the server needs longer than its startup probe allows, else ``None``."""
    if not probe:
        return None  # no startup probe: the liveness/readiness probes are other policies' concern
    period = float(probe.get("periodSeconds") or PROBE_PERIOD_DEFAULT)
    failures = int(probe.get("failureThreshold") or PROBE_FAILURES_DEFAULT)
    delay = float(probe.get("initialDelaySeconds") or 0)
    window = delay + period * failures
    steps = [cold.step(step) for step in UNDER_PROBE]
    needed = sum(step.seconds for step in steps)
    if needed <= window:
        return None
    return (
        f"{name} needs about {needed:.0f} s from its server's start to ready ("
        + ", ".join(f"{step.name} {step.seconds:.0f} s" for step in steps)
        + f") on a {cold.instance} of {cold.pool}, but its startupProbe allows {window:.0f} s (initialDelaySeconds "
        f"{delay:g} + periodSeconds {period:g} x failureThreshold {failures}); the kubelet restarts it before it is "
        "ready, every time. Raise failureThreshold until the window covers the load, or stream the weights."
    )


def _check(stack: Stack, config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    try:
        budgets = tier_budgets()
    except StackConfigError as error:
        yield str(error), None
        return
    try:
        starts = list(model_cold_starts(stack))  # none while the stack's deciding fields are unknown
    except KeyError as error:  # an image without a size: the table must learn it first
        if budgets:
            yield f"{error.args[0]}; add its compressed and unpacked sizes there to predict its models' cold start.", None
        return
    prefix = str(config.get(NAMESPACE_PREFIX_PARAM) or TIER_NAMESPACE_PREFIX)
    for workload, name, probe, cold in starts:
        if (overrun := _probe_overrun(name, probe, cold)) is not None:
            yield overrun, workload.key
        if name not in budgets:
            continue
        tier, budget = budgets[name]
        if workload.namespace != f"{prefix}{tier}":
            continue  # a Deployment that only shares the model's name: not the tier's model
        if cold.seconds <= budget:
            continue
        dominant = cold.dominant
        yield (
            f"{cold.model} (tier {tier}) starts cold in {cold.seconds:.0f} s on a new {cold.instance} of {cold.pool}, "
            f"above its tier's {BUDGET_FIELD} of {budget:g}; the {dominant.name} step dominates with "
            f"{dominant.seconds:.0f} s ({dominant.detail}). Steps: "
            + ", ".join(f"{s.name} {s.seconds:.0f} s" for s in cold.steps)
            + ". Shorten the dominant step (docs/cold-start.md: pre-pull the image, cache or stream the weights, "
              "keep warm nodes or min replicas) or raise the budget."
        ), workload.key


POLICIES = [
    stack_policy(
        name="cold-start-budget",
        description=(
            "Keep each model's predicted cold start (node, image, weights, load, compile, readiness) within its "
            "tier's coldStartBudgetSeconds from the stack's serving configuration, and its load, compile and "
            "readiness within its startup probe's window (raise failureThreshold), or the kubelet restarts it forever."
        ),
        check=_check,
        enforcement=MANDATORY,
        params={NAMESPACE_PREFIX_PARAM: {
            "type": "string", "minLength": 1, "default": TIER_NAMESPACE_PREFIX,
            "description": "A serving tier's namespace is this prefix and the tier's name (the program's); a "
                           "budget applies to a model's Deployment in its tier's namespace only."}},
    ),
]
