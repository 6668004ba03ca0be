"""Run the real program under Pulumi's mock runtime and record what the engine would receive.

The program runs as the SDK's unit-testing guide runs one: ``pulumi.runtime.set_mocks`` with our
:class:`PlatformMocks` and a monitor of our own (``monitor=``, the SDK's hook for recording), the
program's code inside a function decorated with ``pulumi.runtime.test``, which waits until every
registration has been answered. The recording monitor is a ``MockMonitor`` subclass: it keeps each
``RegisterResource`` request as the engine gets it (the inputs Struct as plain JSON, camelCase
keys, secrets and resource references in their wire form; the parent, provider and dependencies)
and answers with what the mocks return, shaped per resource type, so the program's ``apply``
chains run as in a deployment.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import runpy
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf.struct_pb2 import ListValue, Struct
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.proto import provider_pb2, resource_pb2

from automation.offline.wire import RESOURCE_REF_SIG, SIG_KEY
from automation.paths import ROOT
from policies.capacity.kinds import AWS_NODE_GROUP, EKS_CLUSTER, EKS_MANAGED_NODE_GROUP, HELM_TYPES, LAUNCH_TEMPLATE

PROJECT = "llm-platform"
ACCOUNT_ID = "123456789012"



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

    def to_json(self) -> dict[str, Any]:
        """The plan file's content (before secrets are redacted). Each resource's entry is a new
        dict, its inputs and dependencies those of the plan (not copied): treat it as read-only."""
        return {"project": self.project, "stack": self.stack,
                "resources": [{name: getattr(r, name) for name in PLAN_FIELDS} for r in self.resources]}


def plain(struct: Struct) -> dict[str, Any]:
    """A Struct as plain JSON data. Struct numbers are doubles; whole numbers become ``int`` (as the
    engine's JSON writes them: ``3``, not ``3.0``). Strings are interned: reading a Struct makes a
    new string each time, and the plan repeats the same few thousand keys and values (``metadata``,
    label keys and values, image references) over every resource: at 500 models one string in 17
    is distinct."""
    return {sys.intern(key): _plain(value) for key, value in struct.items()}


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return sys.intern(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind is Struct:
        return plain(value)
    if kind is ListValue:
        return [_plain(item) for item in value]
    return value


def _refs_to_urns(value: Any) -> Any:
    """Resource references as plain URNs, for the mocks: their state then holds no reference the
    SDK would rehydrate as a resource the program never created. Copies only the dicts and lists on
    the way to a reference; ``value`` itself when it holds none."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == RESOURCE_REF_SIG:
            return value.get("urn", "")
        changed = {k: v2 for k, v in value.items() if (v2 := _refs_to_urns(v)) is not v}
        return {**value, **changed} if changed else value
    if isinstance(value, list):
        items = [_refs_to_urns(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value)) else value
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
        if typ == EKS_CLUSTER:
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
        elif typ == LAUNCH_TEMPLATE:
            outputs = {"latestVersion": 1, "arn": f"arn:aws:ec2:{region}:{account}:launch-template/{_fake_id('lt', name)}"}
            return _fake_id("lt", name), {**inputs, **outputs}
        elif typ == "random:index/randomPassword:RandomPassword":
            outputs = {"result": hashlib.sha256(name.encode()).hexdigest()[: int(inputs.get("length", 32))]}
        elif typ in HELM_TYPES:
            outputs = {"status": {"status": "deployed", "version": inputs.get("version")}}
        elif typ.startswith("aws:"):
            outputs = {"arn": f"arn:aws:{typ.split(':')[1].split('/')[0]}:{region}:{account}:{name}"}
        kind = _ID_PREFIX.get(typ, typ.split(":")[-1].lower())
        return _fake_id(kind, name), {**inputs, **outputs}

    def call(self, args: MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        """(outputs, no check failures), the form ``Mocks.call`` declares."""
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{zone}" for zone in "abcdef"]
            return {"names": names, "zoneIds": [f"use1-az{i + 1}" for i in range(6)], "id": self.region}, None
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, None
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/offline", "id": ACCOUNT_ID}, None
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}, None
        raise NotImplementedError(f"offline mocks do not answer {args.token}; add it to PlatformMocks.call")


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, keeping every registration in engine form.

    ``RegisterResource``, ``Invoke`` and ``RegisterResourceOutputs`` are the monitor's public
    methods (the ``ResourceMonitor`` service's calls); the SDK calls them from its executor's
    threads, so the plan is appended to under a lock. Inputs are read from the request's Struct as
    plain JSON (:func:`plain`) rather than deserialized into SDK objects as ``MockMonitor`` does:
    the plan keeps the engine's form (secrets and references in wire form), and nothing of the
    program's runtime runs inside the monitor.
    """

    def __init__(self, mocks: Mocks, plan: Plan, on_record: Callable[[PlannedResource], None] | None = None):
        super().__init__(mocks)
        self.plan = plan
        self.on_record = on_record
        self.lock = threading.Lock()

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        inputs = plain(request.object)
        args = MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=_refs_to_urns(inputs),
            provider=request.provider,
            resource_id=request.importId,
            custom=request.custom or False,
        )
        resource_id, state = self.mocks.new_resource(args)
        if request.type == EKS_MANAGED_NODE_GROUP:
            state = {**state, **self._add_node_group_child(urn, request.name, inputs)}
        resource_id = resource_id or ""  # PlatformMocks names every resource; the SDK's type allows None
        response = resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id)
        response.object.update(state)
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
        with self.lock:
            self.resources[urn] = MockMonitor.ResourceRegistration(urn, resource_id, state)
            self.plan.resources.append(resource)
        if self.on_record is not None:
            self.on_record(resource)
        return response

    def Invoke(self, request):  # noqa: N802 - gRPC method name
        args = plain(request.args)
        failures = None
        answer: dict[str, Any]
        if request.tok == "pulumi:pulumi:getResource":
            registered = self.resources.get(args["urn"])
            if registered is None:
                raise KeyError(f"unknown resource {args['urn']}")
            answer = {"urn": registered.urn, "id": registered.id, "state": registered.state}
        else:
            answer, failed = self.mocks.call(MockCallArgs(token=request.tok, args=args, provider=request.provider))
            if failed:
                failures = [provider_pb2.CheckFailure(property=prop, reason=reason) for prop, reason in failed]
        response = resource_pb2.ResourceInvokeResponse(failures=failures)
        getattr(response, "return").update(answer)
        return response

    def RegisterResourceOutputs(self, request):  # noqa: N802 - gRPC method name
        outputs = plain(request.outputs)
        with self.lock:
            self.plan.outputs[request.urn] = outputs
        return super().RegisterResourceOutputs(request)

    def _add_node_group_child(self, parent: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """pulumi-eks's ManagedNodeGroup is a remote component: in a deployment its provider creates
        the ``aws.eks.NodeGroup`` and returns it as the ``nodeGroup`` output (a resource reference),
        whose ``resources[0].autoscalingGroups[0].name`` is the Auto Scaling group EKS made. Under
        mocks nobody creates that child, so it is registered here (the SDK reads it back through
        ``pulumi:pulumi:getResource``); the output that refers to it is returned."""
        urn = self.make_urn(parent, AWS_NODE_GROUP, name)
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
        with self.lock:
            self.resources[urn] = MockMonitor.ResourceRegistration(urn, node_group_id, state)
        return {"nodeGroup": {SIG_KEY: RESOURCE_REF_SIG, "urn": urn, "id": node_group_id, "packageVersion": ""}}


def record_plan(
    stack: str,
    config: Mapping[str, str],
    *,
    region: str,
    program: Path = ROOT / "__main__.py",
    into: Plan | None = None,
    on_record: Callable[[PlannedResource], None] | None = None,
) -> Plan:
    """Run ``program`` for ``stack`` with ``config`` (the language host's string map) under mocks;
    the plan's resources sorted by URN.

    Resources are recorded into ``into`` when given, so a caller can see what was registered
    before the program failed; ``on_record`` is called with each resource as it is registered
    (from the SDK's executor threads). The program's own error is raised as it is.
    """
    plan = into if into is not None else Plan(project=PROJECT, stack=stack)
    monitor = RecordingMonitor(PlatformMocks(region), plan, on_record)
    # A context of its own: the SDK keeps the configuration, its settings and the root stack
    # resource in context variables, so each recording starts from none of another's.
    try:
        contextvars.Context().run(_run_program, program, stack, dict(config), monitor)
    finally:
        with monitor.lock:
            plan.resources.sort(key=lambda r: r.urn)
    return plan


def _run_program(program: Path, stack: str, config: dict[str, str], monitor: RecordingMonitor) -> None:
    pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)

    @pulumi.runtime.test
    def run() -> None:
        runpy.run_path(str(program), run_name="__main__")

    with _language_host_environment(program, config):
        run()


@contextmanager
def _language_host_environment(program: Path, config: Mapping[str, str]) -> Iterator[None]:
    """What the Python language host gives a program: its configuration in ``PULUMI_CONFIG`` (a
    JSON object of ``namespace:key`` -> string) and ``PULUMI_CONFIG_SECRET_KEYS``, and the
    program's directory on ``sys.path``; restored afterwards."""
    saved = {key: os.environ.get(key) for key in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS")}
    os.environ["PULUMI_CONFIG"] = json.dumps(dict(config))
    os.environ["PULUMI_CONFIG_SECRET_KEYS"] = "[]"
    directory = str(program.parent)
    added_path = directory not in sys.path
    if added_path:
        sys.path.insert(0, directory)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if added_path:
            sys.path.remove(directory)
