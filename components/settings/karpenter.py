"""Karpenter and EKS Auto Mode settings: EC2NodeClasses, NodePools, disruption."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from components import contract, versions
from components.settings._base import (
    FAST_IMAGE_PULL_DESCRIPTION,
    GPU_ROOT_VOLUME_IOPS,
    GPU_ROOT_VOLUME_THROUGHPUT_MIBPS,
    _dns_name,
    _Model,
    keyed,
    repeated,
)
from components.settings.reservations import CapacityReservation
from policies.capacity.instances import Instance, load_instances

_DURATION_RE = re.compile(r"^([0-9]+(s|m|h))+$")
_BUDGET_DURATION_RE = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
#: Go's time.Duration (what Karpenter parses these into) overflows beyond ~2562047h.
_MAX_DURATION_SECONDS = 2562047 * 3600


def _duration_fits(value: str) -> bool:
    total = sum(int(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"([0-9]+)(s|m|h)", value))
    return total <= _MAX_DURATION_SECONDS
_BUDGET_NODES_RE = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_CRON_FIELD = r"(\*|[0-9a-zA-Z,/*-]+)"
_CRON_RE = re.compile(
    rf"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|{_CRON_FIELD}( {_CRON_FIELD}){{4}})$"
)


#: EKS Auto Mode's longest node lifetime (EKS user guide, Auto Mode: "a maximum lifetime of 21 days").
AUTO_MODE_MAX_NODE_LIFETIME = "504h"

CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)


_CRON_FIELDS = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    (0, 6, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)


def _cron_in_range(schedule: str) -> bool:
    """Each field of a five-field schedule within its bounds, as Karpenter's cron parser (the standard
    five fields, names for months and weekdays) requires; descriptors like ``@daily`` pass."""
    if schedule.startswith("@"):
        return True
    for text, (low, high, names) in zip(schedule.split(" "), _CRON_FIELDS):
        for part in text.split(","):
            span, _, step = part.partition("/")
            if step and not (step.isdigit() and 1 <= int(step) <= high):
                return False
            if span == "*":
                continue
            ends = span.split("-")
            if len(ends) > 2:
                return False
            values = []
            for end in ends:
                end = end.lower()
                if end in names:
                    values.append(names.index(end) + low)
                elif end.isdigit():
                    values.append(int(end))
                else:
                    return False
            if not all(low <= v <= high for v in values) or values != sorted(values):
                return False
    return True


_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
                "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


def _field_values(text: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    values: set[int] = set()
    for part in text.lower().split(","):
        span, _, step = part.partition("/")
        if span == "*":
            start, end = low, high
        else:
            ends = [names.index(e) + low if e in names else int(e) for e in span.split("-")]
            start, end = ends[0], ends[-1]  # a validated span has one or two ends
            if step and len(ends) == 1:
                end = high
        values.update(range(start, end + 1, int(step) if step else 1))
    return values


def cron_fires_at(schedule: str, when: datetime) -> bool:
    """Whether a budget schedule fires at the minute ``when`` (UTC). Karpenter parses schedules with
    robfig/cron's standard parser (kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go ``GetAllowedDisruptionsByReason``
    -> ``cron.ParseStandard``): five fields, names for months and weekdays, descriptors, and the day rule
    of cron: when both day of month and day of week are restricted, either may match."""
    fields = _DESCRIPTORS.get(schedule, schedule).split(" ")
    sets = [_field_values(text, low, high, names) for text, (low, high, names) in zip(fields, _CRON_FIELDS)]
    minute, hour, day, month, weekday = sets
    if when.minute not in minute or when.hour not in hour or when.month not in month:
        return False
    day_ok, weekday_ok = when.day in day, (when.isoweekday() % 7) in weekday
    if fields[2] != "*" and fields[4] != "*":
        return day_ok or weekday_ok
    return day_ok and weekday_ok


def _size_order(size: str) -> float:
    """xlarge < 2xlarge < ... < 48xlarge < metal, as AWS lists sizes."""
    number = re.match(r"(\d*)xlarge$", size)
    return {"medium": 0.25, "large": 0.5}.get(size, float(number.group(1) or 1) if number else 10_000.0)


def _gpu_families() -> dict[str, str]:
    """GPU instance family -> GPU model, from the catalog."""
    return {t.family: t.gpu_name or "" for t in load_instances().gpu_types()}


class DisruptionBudget(_Model):
    """At most ``nodes`` (``N`` or ``N%``) disrupted at once; during ``schedule`` (cron, UTC) for
    ``duration`` when both are set (they go together), otherwise at all times."""

    nodes: str = Field(
        description="Most of the pool's nodes disrupted at once: a count such as '2' or a percentage such as '10%'; "
        "'0' allows no disruption while the budget is active.",
    )
    schedule: str | None = Field(
        default=None,
        description="When the budget starts to apply: a cron schedule in UTC such as '0 9 * * mon-fri', or @daily; "
        "set together with duration (default unset: always active).",
    )
    duration: str | None = Field(
        default=None,
        description="How long the budget applies after each schedule firing, such as '8h', '30m' or '15h30m'; set "
        "together with schedule.",
    )
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = Field(
        default=None,
        description="The disruption reasons the budget limits (default unset: every reason).",
    )

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not _BUDGET_NODES_RE.match(value):
            raise ValueError(f"{value!r} is not a node count like '2' or a percentage like '10%'")
        return value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and not (_CRON_RE.match(value) and _cron_in_range(value)):
            raise ValueError(
                f"{value!r} is not a cron schedule like '0 9 * * mon-fri' (UTC) or '@daily'; fields: minute 0-59, "
                "hour 0-23, day of month 1-31, month 1-12 or jan-dec, day of week 0-6 or sun-sat"
            )
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and not (_BUDGET_DURATION_RE.match(value) and _duration_fits(value)):
            raise ValueError(f"{value!r} is not a budget duration like '8h', '30m' or '15h30m'")
        return value

    @model_validator(mode="after")
    def _together(self) -> DisruptionBudget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration must be set together (or neither, for an always-on budget)")
        return self

    @property
    def blocks_all(self) -> bool:
        """``nodes: "0"`` (or ``"0%"``): no node of the pool may be disrupted while this budget is active."""
        return self.nodes.rstrip("%") == "0"

    def covers(self, reason: str) -> bool:
        """A budget without ``reasons`` applies to every reason (Karpenter's disruption docs, Reasons)."""
        return self.reasons is None or reason in self.reasons

    def active_at(self, when: datetime) -> bool:
        """Always, without a schedule; else from a firing of ``schedule`` for ``duration`` (UTC)."""
        if self.schedule is None or self.duration is None:
            return True
        minutes = sum(int(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"([0-9]+)(h|m)", self.duration)) // 60
        start = when.replace(second=0, microsecond=0)
        return any(cron_fires_at(self.schedule, start - timedelta(minutes=back)) for back in range(minutes))


class Consolidation(_Model):
    """When Karpenter may remove or replace nodes to save cost."""

    policy: str = Field(
        default="WhenEmptyOrUnderutilized",
        description="Which nodes Karpenter consolidates: `WhenEmpty` (only empty ones), `WhenEmptyOrUnderutilized` "
        "(also ones whose pods fit elsewhere) or `Balanced` (new in the v1.14 CRD).",
    )
    after: str = Field(
        default="5m",
        description="How long a node must be a candidate before it is consolidated: a duration such as '30s' or "
        "'5m', or 'Never'.",
    )

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        if value == "WhenUnderutilized":
            raise ValueError(
                "WhenUnderutilized is the v1beta1 value and is invalid in karpenter.sh/v1; use WhenEmptyOrUnderutilized"
            )
        if value not in CONSOLIDATION_POLICIES:
            raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(CONSOLIDATION_POLICIES)}")
        return value

    @field_validator("after")
    @classmethod
    def _after(cls, value: str) -> str:
        if value != "Never" and not (_DURATION_RE.match(value) and _duration_fits(value)):
            raise ValueError(f"{value!r} is not a duration like '30s' or '5m', or 'Never'")
        return value


class RootVolume(_Model):
    """Encrypted gp3 root volume sized for model images: 125-1000 MiB/s, 3000-16000 IOPS."""

    size_gib: int = Field(default=200, ge=20, le=16384, description="The root volume's size. Unit: GiB.")
    iops: int = Field(
        default=GPU_ROOT_VOLUME_IOPS, ge=3000, le=16000,
        description="Provisioned IOPS, above gp3's baseline of 3000 so model images pull fast. Unit: IOPS.",
    )
    throughput_mibps: int = Field(
        default=GPU_ROOT_VOLUME_THROUGHPUT_MIBPS, ge=125, le=1000,
        description="Provisioned throughput, above gp3's baseline of 125 so model images pull fast. Unit: MiB/s.",
    )


class Kubelet(_Model):
    """Kubelet settings of an EC2NodeClass (in Karpenter v1 they live there, not on the NodePool)."""

    max_pods: int | None = Field(
        default=None, ge=1, le=737,
        description="Most pods per node. Default unset: Karpenter derives it per instance type from ENI limits. A "
        "value above what the VPC CNI can give an instance type of a pool using this class is refused. Unit: pods.",
    )
    eviction_hard: dict[str, str] = Field(
        default_factory=lambda: {"memory.available": "5%", "nodefs.available": "10%", "imagefs.available": "10%"},
        description="The kubelet's hard eviction thresholds, by signal (memory.available, nodefs.available, "
        "nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available).",
    )
    image_gc_high_threshold_percent: int = Field(
        default=85, ge=1, le=100,
        description="Disk use at which the kubelet starts deleting unused images. Unit: %.",
    )
    image_gc_low_threshold_percent: int = Field(
        default=75, ge=0, le=99,
        description="Disk use the kubelet deletes unused images down to; below imageGcHighThresholdPercent. Unit: %.",
    )

    @field_validator("eviction_hard")
    @classmethod
    def _signals(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if k not in EVICTION_SIGNALS]
        if bad:
            raise ValueError(f"unknown eviction signal(s) {', '.join(bad)}; allowed: {', '.join(EVICTION_SIGNALS)}")
        return value

    @model_validator(mode="after")
    def _gc_order(self) -> Kubelet:
        if self.image_gc_low_threshold_percent >= self.image_gc_high_threshold_percent:
            raise ValueError(
                f"imageGcLowThresholdPercent ({self.image_gc_low_threshold_percent}) must be below "
                f"imageGcHighThresholdPercent ({self.image_gc_high_threshold_percent})"
            )
        return self


#: Karpenter 1.14.1's EC2NodeClass CRD: ``capacityReservationSelectorTerms`` ``maxItems: 30``, tag maps
#: ``maxProperties: 20`` with no empty keys or values (../shared/schemas/crds/karpenter.k8s.aws_ec2nodeclasses.yaml).
MAX_RESERVATION_TERMS, MAX_TERM_TAGS = 30, 20


class KarpenterNodeClass(_Model):
    """An EC2NodeClass: the AMI, root volume, kubelet and capacity reservations of the nodes its
    NodePools launch. Its reservations become ``capacityReservationSelectorTerms``: a NodePool that
    lists ``reserved`` needs at least one."""

    name: str = Field(
        description="The class's name, which nodePools refer to: 2-32 lowercase letters, digits or '-'.",
    )
    ami: Literal["pinned", "latest"] = Field(
        default="pinned",
        description="`pinned`: the dated AL2023 alias in components/versions.py. `latest`: drifts every node on each "
        "AMI release; allowed only with karpenter.allowLatestAmi.",
    )
    root_volume: RootVolume = Field(
        default_factory=RootVolume,
        description="The nodes' encrypted gp3 root volume, sized for model images.",
    )
    kubelet: Kubelet = Field(default_factory=Kubelet, description="The nodes' kubelet settings.")
    capacity_reservations: list[CapacityReservation] = Field(
        default_factory=list,
        description="Capacity reservations by id, with what each holds, so the check can count and date them "
        "(default none).",
    )
    capacity_reservation_tags: list[dict[str, str]] = Field(
        default_factory=list,
        description="Tag maps that select capacity reservations, for reservations bought later; each map 1-20 "
        "tags, '*' for any value (default none).",
    )
    fast_image_pull: bool = Field(
        default=True,
        description=FAST_IMAGE_PULL_DESCRIPTION.format(what="class's userData, so Karpenter drifts its nodes"),
    )

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("capacity_reservation_tags")
    @classmethod
    def _tag_terms(cls, terms: list[dict[str, str]]) -> list[dict[str, str]]:
        for i, tags in enumerate(terms):
            if not tags or len(tags) > MAX_TERM_TAGS:
                raise keyed(f"a tag term holds 1-{MAX_TERM_TAGS} tags (Karpenter's CRD), got {len(tags)}", i)
            empty = [k for k, v in tags.items() if not k or not v]
            if empty:
                raise keyed("empty tag keys or values are not allowed (Karpenter's CRD); use '*' for any value", i)
        return terms

    @model_validator(mode="after")
    def _terms(self) -> KarpenterNodeClass:
        ids = [r.id for r in self.capacity_reservations]
        for rid in repeated(ids):
            raise keyed(f"reservation {rid} is listed twice", "capacityReservations", ids.index(rid, ids.index(rid) + 1),
                        "id")
        total = len(self.capacity_reservations) + len(self.capacity_reservation_tags)
        if total > MAX_RESERVATION_TERMS:
            raise keyed(f"{total} capacity reservation selector terms; Karpenter's EC2NodeClass takes at most "
                        f"{MAX_RESERVATION_TERMS}", "capacityReservations")
        return self

    @property
    def selects_reservations(self) -> bool:
        return bool(self.capacity_reservations or self.capacity_reservation_tags)

    def reservation_selector_terms(self) -> list[dict[str, Any]]:
        """``capacityReservationSelectorTerms``: one ``id`` term per reservation (an id stands alone in its
        term, per the CRD's rule), then one ``tags`` term per tag map; terms are ORed."""
        return ([{"id": r.id} for r in self.capacity_reservations]
                + [{"tags": dict(tags)} for tags in self.capacity_reservation_tags])

    @property
    def ami_alias(self) -> str:
        return versions.KARPENTER_AMI_ALIAS if self.ami == "pinned" else versions.KARPENTER_LATEST_AMI_ALIAS


class KarpenterNodePool(_Model):
    """A GPU NodePool: one GPU model (its families share it, so the pool labels stay true), the
    contract's taints and labels, a GPU limit, consolidation, expiry, weight and disruption budgets.
    ``expireAfter`` is ``Never`` wherever a budget allows no disruption (``nodes: "0"``): expiry ignores
    budgets, so nodes of such a pool rotate through drift instead (see the rule below)."""

    name: str = Field(
        description="The pool label models select (pool), also the NodePool's name: 2-32 lowercase letters, digits "
        "or '-', unique across every GPU pool.",
    )
    node_class: str | None = Field(
        default=None,
        description="The nodeClasses entry (its name) the pool launches with; required under karpenter.nodePools, "
        "not used under autoMode.gpuNodePools (the built-in NodeClass).",
    )
    purpose: contract.NodePoolPurpose = Field(
        default=contract.GPU_INFERENCE_PURPOSE,
        description="What the pool runs: inference or training workloads (gpu-dra belongs in gpuPools).",
    )
    instance_families: list[str] = Field(
        min_length=1,
        description="GPU instance families from the catalog, such as g5 or g6e, all of one GPU model.",
    )
    instance_sizes: list[str] | None = Field(
        default=None, min_length=1,
        description="Sizes the pool may launch (Karpenter's instance-size label: xlarge, 2xlarge, 12xlarge, ...), "
        "each sold in at least one of instanceFamilies. Default: every size of the families, which Karpenter will "
        "launch when it fits pending pods best, so the budget counts them all. Restrict the sizes here, not by "
        "leaving types out of the catalog.",
    )
    capacity_types: list[contract.KarpenterCapacityType] = Field(
        default_factory=lambda: [contract.KARPENTER_ON_DEMAND], min_length=1,
        description="Capacity the pool may buy: `on-demand`, `spot`, `reserved` (needs capacity reservations on "
        "its node class).",
    )
    gpu_limit: int = Field(
        ge=1, le=10000,
        description="Most GPUs the pool's nodes may hold together (the NodePool's limit). Unit: GPUs.",
    )
    consolidation: Consolidation = Field(
        default_factory=Consolidation,
        description="When Karpenter removes or replaces the pool's nodes to save cost.",
    )
    expire_after: str = Field(
        default="720h",
        description="How long a node lives before Karpenter replaces it: a duration such as '720h', or 'Never' "
        "(required where a budget allows no disruption).",
    )
    weight: int = Field(
        default=10, ge=1, le=100,
        description="The pool's priority when several fit a pod: Karpenter tries higher weights first.",
    )
    budgets: list[DisruptionBudget] = Field(
        default_factory=lambda: [DisruptionBudget(nodes="10%")], min_length=1,
        description="How many nodes Karpenter may disrupt at once, and when (default: 10% at any time).",
    )

    _name = field_validator("name")(lambda v: _dns_name(v))

    @field_validator("purpose", mode="before")
    @classmethod
    def _no_dra(cls, value: Any) -> Any:
        if value == contract.GPU_DRA_PURPOSE:
            raise ValueError(
                "gpu-dra is not allowed on Karpenter or Auto Mode capacity: Karpenter does not provision for pods "
                "with resourceClaims and Auto Mode has no DRA; put DRA pools in gpuPools (managed groups grown by "
                "Cluster Autoscaler)"
            )
        return value

    @field_validator("instance_families")
    @classmethod
    def _families(cls, families: list[str]) -> list[str]:
        known = _gpu_families()
        unknown = [f for f in families if f not in known]
        if unknown:
            raise ValueError(f"unknown GPU instance family {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        models = sorted({known[f] for f in families})
        if len(models) > 1:
            raise ValueError(
                f"mixes GPU models {', '.join(models)}; a pool holds one GPU model so its labels stay true"
            )
        return families

    @field_validator("expire_after")
    @classmethod
    def _expire(cls, value: str) -> str:
        if value != "Never" and not (_DURATION_RE.match(value) and _duration_fits(value)):
            raise ValueError(f"{value!r} is not a duration like '720h', or 'Never'")
        return value

    @model_validator(mode="after")
    def _sizes_are_sold(self) -> KarpenterNodePool:
        if self.instance_sizes is None:
            return self
        sold = [t.name.split(".", 1)[1] for t in load_instances().gpu_types() if t.family in self.instance_families]
        unknown = [size for size in self.instance_sizes if size not in sold]
        if unknown:
            raise keyed(f"{', '.join(repr(u[:20]) for u in unknown)} not sold in {', '.join(self.instance_families)}; "
                        f"sizes: {', '.join(dict.fromkeys(sorted(sold, key=_size_order)))}", "instanceSizes")
        for size in repeated(self.instance_sizes):
            raise keyed(f"{size!r} is repeated", "instanceSizes")
        return self

    @model_validator(mode="after")
    def _expiry_keeps_out_of_protected_windows(self) -> KarpenterNodePool:
        """A pool whose budgets allow no disruption (``nodes: "0"``) at some time must not expire nodes.

        The textbook reading of budgets is "nothing is disrupted while nodes is 0". Karpenter v1's engine
        differs: expiration is forceful. The expiration controller deletes a NodeClaim as soon as
        ``creationTimestamp + expireAfter`` has passed, consulting no budget and launching no
        replacement first (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/expiration/controller.go
        ``Reconcile``; disruption docs: "Automated forceful methods ... blow past NodePool Disruption
        Budgets"). Nodes launched together (a morning scale-out) expire together 30 days later, inside
        the window too, each replica a cold GPU start. A ``terminationGracePeriod`` does not help: it
        only bounds the drain after the deletion, and past it pods go even against their PDB.

        Decided: such a pool sets ``expireAfter: Never`` and its nodes rotate through drift (moving the
        pinned AMI alias in versions.py drifts every node), which is a graceful method: budgets apply
        to it (reason ``Drifted``) and a replacement is launched and ready before a node is drained.
        So drift must be allowed at some time: an always-on zero budget that covers drift is refused."""
        guarding = [(i, b) for i, b in enumerate(self.budgets) if b.blocks_all]
        if guarding and self.expire_after != "Never":
            i, budget = guarding[0]
            when = f"during '{budget.schedule}' for {budget.duration}" if budget.schedule else "at any time"
            raise keyed(
                f"{self.expire_after} while budgets[{i}] allows no disruption {when}: Karpenter v1 expiration is "
                "forceful (budgets do not apply to it and no replacement is launched first), so nodes launched "
                "together expire together, inside that window too; a terminationGracePeriod only bounds the drain "
                "that follows. Set expireAfter: Never and rotate nodes through drift (a new pinned AMI), which the "
                "budgets hold to the hours they allow", "expireAfter")
        for i, budget in guarding:
            if budget.schedule is None and budget.covers("Drifted"):
                raise keyed(
                    "0 at all times for drift while expireAfter is Never: nodes would never be replaced, not even "
                    "for a new AMI; schedule the zero budget (schedule and duration) or leave Drifted out of its "
                    "reasons", "budgets", i, "nodes")
        return self

    @property
    def accelerator(self) -> str:
        return _gpu_families()[self.instance_families[0]]

    @property
    def gpu_memory_mib(self) -> int:
        return next(t.gpu_memory_mib or 0 for t in self.instances if t.family == self.instance_families[0])

    @property
    def instances(self) -> list[Instance]:
        """The catalog's GPU types in ``instance_families`` (of ``instance_sizes`` when set): what the pool
        may launch, so what its worst case is priced on."""
        return [t for t in load_instances().gpu_types() if t.family in self.instance_families
                and (self.instance_sizes is None or t.name.split(".", 1)[1] in self.instance_sizes)]


class Karpenter(_Model):
    """Karpenter controller and its GPU capacity. Off by default; ``nodePools`` name a ``nodeClass``."""

    enabled: bool = Field(
        default=False,
        description="Whether Karpenter runs and its nodePools exist (default false); needs at least one nodePool.",
    )
    allow_latest_ami: bool = Field(
        default=False,
        description="Whether node classes may use `ami: latest` (default false; refused in production).",
    )
    replicas: int = Field(default=2, ge=1, le=5, description="Karpenter controller replicas. Unit: replicas.")
    node_classes: list[KarpenterNodeClass] = Field(
        default_factory=list,
        description="EC2NodeClasses the nodePools launch with (default none).",
    )
    node_pools: list[KarpenterNodePool] = Field(
        default_factory=list,
        description="GPU NodePools, each naming a nodeClass (default none).",
    )

    @model_validator(mode="after")
    def _references(self) -> Karpenter:
        classes = [c.name for c in self.node_classes]
        for name in repeated(classes):
            raise keyed(f"nodeClass name {name!r} is repeated; nodeClasses names must be unique",
                        "nodeClasses", len(classes) - 1 - classes[::-1].index(name), "name")
        pools = [p.name for p in self.node_pools]
        for name in repeated(pools):
            raise keyed(f"nodePool name {name!r} is repeated; nodePools names must be unique",
                        "nodePools", len(pools) - 1 - pools[::-1].index(name), "name")
        for i, pool in enumerate(self.node_pools):
            if pool.node_class not in classes:
                raise keyed(
                    f"nodePools {pool.name!r} names nodeClass {pool.node_class!r}; defined: {', '.join(classes) or 'none'}",
                    "nodePools", i, "nodeClass",
                )
        by_name = {c.name: c for c in self.node_classes}
        for pool in self.node_pools:
            assert pool.node_class is not None  # refused above: a Karpenter pool names a defined nodeClass
            max_pods = by_name[pool.node_class].kubelet.max_pods
            if max_pods is None:
                continue
            fitting = [
                t for t in load_instances().instances.values() if t.family in pool.instance_families
            ]
            smallest = min(fitting, key=lambda t: t.max_pods, default=None)
            if smallest is not None and max_pods > smallest.max_pods:
                raise ValueError(
                    f"nodeClasses {pool.node_class!r} sets kubelet.maxPods {max_pods}, but the VPC CNI gives "
                    f"{smallest.name} (nodePools {pool.name!r}) only {smallest.max_pods} pod IPs; remove maxPods "
                    f"(Karpenter derives it per instance type) or set it to at most {smallest.max_pods}"
                )
        problem = self._reserved_capacity(by_name)
        if problem is not None:
            raise problem
        latest = [c.name for c in self.node_classes if c.ami == "latest"]
        if latest and not self.allow_latest_ami:
            raise ValueError(
                f"nodeClasses {', '.join(latest)} use ami: latest, which drifts every node on each AMI release; "
                "use ami: pinned or set allowLatestAmi: true (never in production)"
            )
        if self.enabled and not self.node_pools:
            raise keyed("enabled is true but no nodePools are defined", "nodePools")
        return self


    def _reserved_capacity(self, by_name: dict[str, KarpenterNodeClass]) -> Exception | None:
        """``reserved`` in a NodePool's capacity types needs reservations selected on its node class (else
        Karpenter has no reserved offering and the value is dead), and each reservation selected by id must
        hold an instance type some ``reserved`` pool on that class may launch (Karpenter docs, tasks/odcrs)."""
        for i, pool in enumerate(self.node_pools):
            node_class = by_name.get(pool.node_class or "")
            if node_class is None:  # an unknown class is reported by its own rule
                continue
            if contract.KARPENTER_RESERVED in pool.capacity_types and not node_class.selects_reservations:
                return keyed(f"nodePools {pool.name!r} lists reserved, but nodeClasses {node_class.name!r} selects "
                             "no capacity reservation: add capacityReservations (ids) or capacityReservationTags "
                             "there, or drop reserved", "nodePools", i, "capacityTypes")
        for c, node_class in enumerate(self.node_classes):
            users = [p for p in self.node_pools
                     if p.node_class == node_class.name and contract.KARPENTER_RESERVED in p.capacity_types]
            for r, reservation in enumerate(node_class.capacity_reservations):
                if not any(reservation.instance_type in [t.name for t in p.instances] for p in users):
                    where = ", ".join(f"{p.name} ({', '.join(p.instance_families)})" for p in users) or "none"
                    return keyed(f"{reservation.instance_type} is in no NodePool that lists reserved on this class "
                                 f"(pools with reserved: {where}); Karpenter would never launch into the "
                                 "reservation", "nodeClasses", c, "capacityReservations", r, "instanceType")
        return None


class AutoMode(_Model):
    """EKS Auto Mode: AWS runs the node lifecycle (and its own GPU device plugin) on the built-in
    NodeClass. ``gpuNodePools`` are NodePools on that NodeClass (``nodeClass`` is not used)."""

    enabled: bool = Field(default=False, description="Whether the cluster runs EKS Auto Mode (default false).")
    gpu_node_pools: list[KarpenterNodePool] = Field(
        default_factory=list,
        description="GPU NodePools on Auto Mode's built-in NodeClass (nodeClass is not used); needs enabled "
        "(default none).",
    )

    @model_validator(mode="after")
    def _pools(self) -> AutoMode:
        if self.gpu_node_pools and not self.enabled:
            raise keyed("gpuNodePools are set but enabled is false", "enabled")
        for i, pool in enumerate(self.gpu_node_pools):
            if contract.KARPENTER_RESERVED in pool.capacity_types:
                raise keyed("reserved needs capacityReservationSelectorTerms on the pool's NodeClass, and Auto Mode "
                            "pools here use the built-in default NodeClass, which selects none; use a Karpenter "
                            "nodePool on a nodeClass with capacityReservations", "gpuNodePools", i, "capacityTypes")
            for j, budget in enumerate(pool.budgets):
                if budget.blocks_all:
                    raise keyed(
                        f"a window with no disruption cannot hold on Auto Mode: EKS Auto Mode replaces every node "
                        f"within {AUTO_MODE_MAX_NODE_LIFETIME} (21 days) whatever expireAfter says, by expiry, which "
                        "no budget stops; use a Karpenter nodePool with expireAfter: Never for a protected window, "
                        "or allow at least '1' here", "gpuNodePools", i, "budgets", j, "nodes")
        return self
