"""Run the real program under Pulumi's mock runtime and record what the engine would receive.

The recording monitor captures each ``RegisterResource`` request as the engine gets it: the inputs
Struct converted to JSON (camelCase keys, secrets and resource references in their wire form), the
parent, and whether the resource is custom. Mocks answer with realistic outputs so the program's
``apply`` chains run exactly as in a deployment.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import os
import runpy
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks, _resolve_callbacks
from google.protobuf.struct_pb2 import Struct
from pulumi.runtime.proto import provider_pb2, resource_pb2
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import run_pulumi_func

from automation.offline.recording import sdk_shortcuts
from automation.offline.recording.eager import EagerLoop, finished_gathers
from automation.offline.recording.struct_wire import (  # noqa: F401 - the wire markers, re-exported
    RESOURCE_REF_SIG,
    SECRET_SIG,
    SENT,
    SPECIAL_SIG_KEY,
    merge_into,
    plain_of,
)

PROJECT = "llm-platform"
ROOT = Path(__file__).resolve().parents[2]
ACCOUNT_ID = "123456789012"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"


@dataclass
class PlannedResource:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    provider: str = ""
    dependencies: list[str] = field(default_factory=list)


#: A plan entry's keys, in the plan file's order.
PLAN_FIELDS = tuple(f.name for f in fields(PlannedResource))


@dataclass
class Plan:
    project: str
    stack: str
    resources: list[PlannedResource] = field(default_factory=list)
    #: Component outputs as registered with ``register_outputs``, by URN (engine form).
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def of_type(self, type_: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_]

    def named(self, type_: str, name: str) -> PlannedResource:
        matches = [r for r in self.resources if r.type == type_ and r.name == name]
        if len(matches) != 1:
            raise KeyError(f"expected one {type_} named {name!r}, found {len(matches)}")
        return matches[0]

    def children_of(self, urn: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.parent == urn]

    def to_json(self, *, copy: bool = True) -> dict[str, Any]:
        """The plan file's content. ``copy=False`` shares the resources' inputs instead of deep-copying
        them, for a caller that only reads the result (the check redacts it into a new structure)."""
        if copy:
            return {"project": self.project, "stack": self.stack, "resources": [asdict(r) for r in self.resources]}
        resources = [{name: getattr(r, name) for name in PLAN_FIELDS} for r in self.resources]
        return {"project": self.project, "stack": self.stack, "resources": resources}


def _refs_to_urns(value: Any) -> Any:
    """Resource references as plain URNs. The mock monitor would otherwise rehydrate each reference
    as a resource on a worker thread's event loop, which deadlocks the program's own loop."""
    if isinstance(value, dict):
        if value.get(SPECIAL_SIG_KEY) == RESOURCE_REF_SIG:
            return value.get("urn", "")
        return {k: _refs_to_urns(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_refs_to_urns(v) for v in value]
    return value


def _fake_id(kind: str, name: str) -> str:
    return f"{kind}-{hashlib.sha256(name.encode()).hexdigest()[:17]}"


_ID_PREFIX = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
}


class PlatformMocks(Mocks):
    """Outputs a real deployment would return, shaped per resource type; deterministic per name."""

    def __init__(self, region: str):
        self.region = region

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        region, account = self.region, ACCOUNT_ID
        outputs: dict[str, Any] = {}
        if typ == "eks:index:Cluster":
            cluster = inputs.get("name", name)
            issuer = f"oidc.eks.{region}.amazonaws.com/id/{hashlib.sha256(cluster.encode()).hexdigest()[:32].upper()}"
            kubeconfig = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": cluster, "cluster": {"server": f"https://{cluster}.eks.example"}}],
                "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "aws"}}],
                "current-context": cluster,
                "users": [{"name": "aws", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}}],
            }
            outputs = {
                "kubeconfig": kubeconfig,
                "kubeconfigJson": json.dumps(kubeconfig),
                "oidcProviderArn": f"arn:aws:iam::{account}:oidc-provider/{issuer}",
                "oidcProviderUrl": f"https://{issuer}",
                "oidcIssuer": issuer,
                "clusterSecurityGroupId": _fake_id("sg", f"{cluster}-cluster"),
                "nodeSecurityGroupId": _fake_id("sg", f"{cluster}-node"),
            }
            return f"{cluster}-id", outputs
        if typ == "aws:iam/role:Role":
            outputs = {"arn": f"arn:aws:iam::{account}:role/{name}", "name": name, "uniqueId": _fake_id("AROA", name)}
        elif typ == "aws:kms/key:Key":
            key_id = hashlib.sha256(name.encode()).hexdigest()[:32]
            outputs = {"arn": f"arn:aws:kms:{region}:{account}:key/{key_id}", "keyId": key_id}
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outputs = {"latestVersion": 1, "arn": f"arn:aws:ec2:{region}:{account}:launch-template/{_fake_id('lt', name)}"}
            return _fake_id("lt", name), {**inputs, **outputs}
        elif typ == "random:index/randomPassword:RandomPassword":
            outputs = {"result": hashlib.sha256(name.encode()).hexdigest()[: int(inputs.get("length", 32))]}
        elif typ.startswith("kubernetes:helm.sh/"):
            outputs = {"status": {"status": "deployed", "version": inputs.get("version")}}
        elif typ.startswith("aws:"):
            outputs = {"arn": f"arn:aws:{typ.split(':')[1].split('/')[0]}:{region}:{account}:{name}"}
        kind = _ID_PREFIX.get(typ, typ.split(":")[-1].lower())
        return _fake_id(kind, name), {**inputs, **outputs}

    def call(self, args: MockCallArgs) -> dict:
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{zone}" for zone in "abcdef"]
            return {"names": names, "zoneIds": [f"use1-az{i + 1}" for i in range(6)], "id": self.region}
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/offline", "id": ACCOUNT_ID}
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}
        raise NotImplementedError(f"offline mocks do not answer {args.token}; add it to PlatformMocks.call")


def _answer(answer: Struct, state: dict[str, Any], inputs: dict[str, Any] | None, sent: Struct) -> None:
    """``answer.update(state)``. A mock's state is mostly the inputs it was given, the very values
    (``{**inputs, **outputs}``): the registration's own Struct (``sent``, of which ``inputs`` is the
    plain form) is copied in C and only the keys the mock added or changed are written."""
    if inputs is None or any(key not in state for key in inputs):
        merge_into(answer, state)
        return
    answer.CopyFrom(sent)
    merge_into(answer, {key: value for key, value in state.items() if inputs.get(key, _ABSENT) is not value})


_ABSENT = object()


class RecordingMonitor(MockMonitor):
    """A mock monitor that keeps each registration in engine form, in registration order, and
    hands each recorded resource to ``on_record`` (e.g. the policy pack) as soon as it exists, with
    what it knows of its inputs' form for analyzers (see ``StreamingAnalysis.submit``): the Struct,
    ``True`` (the plain inputs are that form), or ``None`` (they are to be marshalled).

    It answers as the SDK's ``MockMonitor`` does (``Mocks.new_resource`` and ``Mocks.call`` give
    the outputs) but works on plain data throughout: the inputs come back from the stand-in the
    SDK was handed (``struct_wire.SentStructs``; a Struct of its own is walked once), the mocks get
    them as plain JSON (secrets and resource references in wire form), and the answer is a stand-in
    for the state they return, built only if the program reads an output. ``MockMonitor``
    deserialized every request into SDK objects and serialized the answer again on an event loop
    of its own, per resource; that was most of the recording's CPU, and it held a second,
    deserialized copy of every resource's state.
    """

    def __init__(
        self, mocks: Mocks, plan: Plan, on_record: Callable[[PlannedResource, Struct | bool | None], None] | None = None
    ):
        super().__init__(mocks)
        self.plan = plan
        self.on_record = on_record

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        urn = self.make_urn(request.parent, request.type, request.name)
        response = resource_pb2.RegisterResourceResponse(urn=urn)
        if request.type == "pulumi:pulumi:Stack":
            return response
        sent = SENT.take(request.object)
        inputs, refs, analyzer_form = sent or plain_of(request.object)
        # Resource references reach the mocks, and come back in outputs, as plain URNs: rehydrating
        # them would register resources on the SDK's side that the program never created.
        args = MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=_refs_to_urns(inputs) if refs else inputs,
            provider=request.provider,
            resource_id=request.importId,
            custom=request.custom or False,
            transforms=_resolve_callbacks(request.transforms) if request.transforms else [],
        )
        resource_id, state = self.mocks.new_resource(args)
        response.id = resource_id
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, resource_id, state)
        answer = state
        if request.type == MANAGED_NODE_GROUP:
            answer = {**state, **self._add_node_group_child(urn, request.name, inputs)}
        if sent is not None:  # the SDK reads the answer only if the program reads an output
            SENT.answer(answer, into=response.object)
        else:
            _answer(response.object, answer, args.inputs if args.inputs is inputs else None, request.object)
        resource = PlannedResource(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            custom=bool(request.custom),
            inputs=inputs,
            provider=request.provider,
            dependencies=sorted(request.dependencies),
        )
        self.plan.resources.append(resource)
        if self.on_record is not None:
            # Where the inputs are what analyzers get as they are: the Struct when it is one of its
            # own, else True (the plain inputs are written as a Struct); None: the pack's feeder
            # marshals the plain inputs as the engine does (references, engine keys).
            self.on_record(resource, (True if sent is not None else request.object) if analyzer_form else None)
        return response

    def ReadResource(self, request):  # noqa: N802 - gRPC method name
        return super().ReadResource(_with_real_structs(request, "properties"))

    def Invoke(self, request):  # noqa: N802 - gRPC method name
        args = (SENT.take(request.args) or plain_of(request.args)).value
        if request.tok == "pulumi:pulumi:getResource":
            registered = self.resources.get(args["urn"])
            if registered is None:
                raise KeyError(f"unknown resource {args['urn']}")
            answer, failures = registered._asdict(), None
        else:
            answer = self.mocks.call(MockCallArgs(token=request.tok, args=args, provider=request.provider))
            failures = None
            if not isinstance(answer, dict):
                answer, failures = answer[0], [
                    provider_pb2.CheckFailure(property=prop, reason=reason) for prop, reason in answer[1]
                ]
        response = resource_pb2.ResourceInvokeResponse(failures=failures)
        getattr(response, "return").update(answer)
        return response

    def _add_node_group_child(self, parent: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """pulumi-eks's ManagedNodeGroup is a remote component: in a deployment its provider creates
        the ``aws.eks.NodeGroup`` and returns it as the ``nodeGroup`` output (a resource reference),
        whose ``resources[0].autoscalingGroups[0].name`` is the Auto Scaling group EKS made. Under
        mocks nobody creates that child, so register it here; the output that refers to it is returned."""
        urn = self.make_urn(parent, "aws:eks/nodeGroup:NodeGroup", name)
        node_group_id = _fake_id("ng", name)
        asg_name = f"eks-{name}-{hashlib.sha256(name.encode()).hexdigest()[:8]}-{node_group_id[-8:]}"
        state = {
            "nodeGroupName": name,
            "amiType": inputs.get("amiType", ""),
            "version": inputs.get("version", ""),
            "labels": inputs.get("labels", {}),
            "resources": [{"autoscalingGroups": [{"name": asg_name}], "remoteAccessSecurityGroupId": ""}],
            "status": "ACTIVE",
        }
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, node_group_id, state)
        return {"nodeGroup": {SPECIAL_SIG_KEY: RESOURCE_REF_SIG, "urn": urn, "id": node_group_id, "packageVersion": ""}}

    def RegisterResourceOutputs(self, request):  # noqa: N802 - gRPC method name
        self.plan.outputs[request.urn] = (SENT.take(request.outputs) or plain_of(request.outputs)).value
        return super().RegisterResourceOutputs(request)


def _with_real_structs(request: Any, field: str) -> Any:
    """``request`` with its ``field`` Struct built if it is a stand-in (``SentStructs``), for the mock
    monitor's own method, which reads it."""
    struct = getattr(request, field)
    if SENT.take(struct) is None:
        return request
    real = type(request)()
    real.CopyFrom(request)
    getattr(real, field).CopyFrom(SENT.real(struct))
    return real


@contextmanager
def _environment(config: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS")}
    os.environ["PULUMI_CONFIG"] = json.dumps(dict(config))
    os.environ["PULUMI_CONFIG_SECRET_KEYS"] = "[]"
    added_path = str(ROOT) not in sys.path
    if added_path:
        sys.path.insert(0, str(ROOT))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if added_path:
            sys.path.remove(str(ROOT))


def record_plan(
    stack: str,
    config: Mapping[str, str],
    *,
    region: str,
    program: Path = ROOT / "__main__.py",
    into: Plan | None = None,
    on_record: Callable[[PlannedResource, Struct | bool | None], None] | None = None,
    fast: bool = True,
) -> Plan:
    """Run ``program`` for ``stack`` with ``config`` (the language host's string map) under mocks.

    Resources are recorded into ``into`` when given, so a caller can see what was registered
    before the program failed; ``on_record`` is called with each resource as it is registered.
    ``fast=False`` records on the SDK's own runtime (a plain event loop, none of the shortcuts of
    :mod:`automation.offline.recording.eager` and :mod:`automation.offline.recording.sdk_shortcuts`): the reference
    the fast recording is tested against.
    """
    plan = into if into is not None else Plan(project=PROJECT, stack=stack)
    mocks = PlatformMocks(region)
    with _environment(config):
        # A context of its own: the SDK keeps the root stack resource in a context variable, and a
        # second recording in one process would otherwise parent its resources to the first's stack.
        monitor = RecordingMonitor(mocks, plan, on_record)
        contextvars.Context().run(_run_program, program, stack, mocks, monitor, fast)
    return plan


def _run_program(program: Path, stack: str, mocks: Mocks, monitor: RecordingMonitor, fast: bool) -> None:
    """The program on an :class:`EagerLoop` with the SDK shortcuts (``fast``), else on a plain loop.

    On the eager loop a registration whose inputs are known completes inside the resource's
    constructor, so nothing waits in flight for the program's end (at 500 models that was 4,700
    registrations, 417 MiB at the peak) and the pack gets each resource as the program creates it.
    """
    loop = EagerLoop() if fast else asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    _forget_outputs()
    try:
        with ExitStack() as shortcuts:
            if fast:
                shortcuts.enter_context(finished_gathers())
                shortcuts.enter_context(sdk_shortcuts.installed())
            pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
            loop.run_until_complete(run_pulumi_func(lambda: runpy.run_path(str(program), run_name="__main__")))
    finally:
        _forget_outputs()
        SENT.clear()
        loop.close()
        asyncio.set_event_loop(None)


def _forget_outputs() -> None:
    """Empty the SDK's set of outputs a program's end waits for. It is process-wide and keeps failed
    outputs for that end to report; a program that failed leaves them there, bound to its closed
    loop, and the next recording in the process would wait on them."""
    with SETTINGS.lock:
        SETTINGS.outputs.clear()
