"""``versions outdated``: every pin of ``components/versions.py`` against its source (docs/versions.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from automation import exit_codes
from automation.commands._arguments import host_override, seconds_up_to
from automation.commands._common import add_output_flags, stack_flag
from automation.console import err, stdout
from automation.errors import UsageError
from automation.outdated.pins import DEFAULT_VERSIONS_FILE

_DEFAULT_TIMEOUT = 30.0


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "versions", help="pinned versions: what is behind upstream",
        description="The pins of components/versions.py (charts, images, EKS add-ons, the AMI alias) and their "
        "sources.",
    )
    actions = parser.add_subparsers(dest="versions_verb", required=True, metavar="ACTION")
    outdated = actions.add_parser(
        "outdated", help="print each pin against the newest version its source offers",
        description="Ask each pin's source for its newest version: a Helm repository's index.yaml, an OCI "
        "registry's tag list (charts and images), `aws eks describe-addon-versions` (add-ons per Kubernetes "
        "minor) and the EKS AMI release in SSM (the AMI alias), through the aws CLI with your credentials. "
        "Prints pinned vs newest, the newest's release date where the source gives one, and whether it supports "
        "the Kubernetes version. Exit codes: 0 every pin current, 7 some pin behind, 1 a source could not be "
        "read (each named on stderr), 2 bad command line or versions file.",
    )
    outdated.add_argument("--only", action="append", default=[], metavar="NAME",
                          help="check only this pin: its name (KEDA, VLLM_IMAGE, EKS_ADDONS[1.35].vpc_cni, "
                          "KARPENTER_AMI_ALIAS[1.35]) or a name prefix ending in '*'; repeatable")
    outdated.add_argument("--stack", type=stack_flag,
                          help="judge Kubernetes support against this stack's kubernetesVersion, and ask the aws "
                          "CLI in its region")
    outdated.add_argument("--kubernetes-version", metavar="MINOR", type=_minor,
                          help="the Kubernetes minor charts and images must support (default: the stack's, else "
                          "the versions file's DEFAULT_KUBERNETES_VERSION)")
    outdated.add_argument("--region", help="AWS region for the aws CLI (default: the stack's, else us-east-1)")
    outdated.add_argument("--source-override", action="append", default=[], metavar="HOST=URL", type=host_override,
                          help="send requests for HOST (a Helm repository, a registry or its token realm) to URL, "
                          "e.g. a mirror: kedacore.github.io=https://mirror.example/kedacore; plain http is "
                          "allowed only here; repeatable")
    outdated.add_argument("--timeout", type=seconds_up_to(600), default=_DEFAULT_TIMEOUT,
                          help="seconds one source may take to answer completely, redirects and every byte "
                          f"included (default {_DEFAULT_TIMEOUT:g})")
    outdated.add_argument("--versions-file", type=Path, default=DEFAULT_VERSIONS_FILE, metavar="PATH",
                          help="the versions module to read (default: components/versions.py)")
    add_output_flags(outdated)
    outdated.set_defaults(run=_run_outdated)




def _minor(text: str) -> str:
    import re

    if not re.match(r"^1\.\d{1,3}$", text):
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a Kubernetes minor such as 1.35")
    return text


def _region(text: str) -> str:
    from components.settings._base import check_region

    try:
        return check_region(text)
    except ValueError as exc:
        raise UsageError(f"--region: {exc}") from None


def _run_outdated(args: argparse.Namespace) -> int:
    from automation.outdated.pins import collect, load
    from automation.outdated.sources import Sources

    module = load(args.versions_file)
    kubernetes, region = args.kubernetes_version, args.region
    if args.stack:
        from automation.stacks import load_stack

        _, settings = load_stack(args.stack)
        kubernetes = kubernetes or settings.kubernetes_version
        region = region or settings.region
    kubernetes = kubernetes or getattr(module, "DEFAULT_KUBERNETES_VERSION", None)
    if not kubernetes:
        raise UsageError("--kubernetes-version: the versions file has no DEFAULT_KUBERNETES_VERSION; name a minor")
    region = _region(region) if region else "us-east-1"
    pins = _selected(collect(module), args.only, args.versions_file)

    sources = Sources(dict(args.source_override), timeout=args.timeout, region=region)
    findings = [sources.check(pin, kubernetes) for pin in pins]
    failed = [f for f in findings if f.status == "error"]
    for finding in failed:
        err.print(f"error: {finding.pin.name}: {finding.error}")
    if args.output == "json":
        print(json.dumps({"kubernetesVersion": kubernetes, "region": region,
                          "pins": [f.to_json() for f in findings]}, indent=2))
    else:
        _print_table([f for f in findings if f.status != "error"], kubernetes)
    if failed:
        return exit_codes.FAILED
    return exit_codes.OUTDATED if any(f.status == "behind" for f in findings) else exit_codes.OK


def _selected(pins, only: list[str], path: Path):
    if not only:
        return pins

    def matches(name: str, pattern: str) -> bool:
        return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern

    unknown = [p for p in only if not any(matches(pin.name, p) for pin in pins)]
    if unknown:
        raise UsageError(f"--only {unknown[0][:60]}: no pin of that name in {path}")
    return [pin for pin in pins if any(matches(pin.name, p) for p in only)]


def _support(finding) -> str:
    newest = finding.newest
    answer = {True: "yes", False: "NO", None: "unknown"}[newest.supports]
    return f"Kubernetes {finding.kubernetes}: {answer} ({newest.basis})"


def _print_table(findings, kubernetes: str) -> None:
    console = stdout()
    width = max((len(f.pin.name) for f in findings), default=0)
    for finding in findings:
        newest = finding.newest
        if finding.status == "behind":
            released = f" released {newest.released}" if newest.released else ""
            console.print(f"behind   {finding.pin.name:<{width}}  {finding.pin.pinned} -> {newest.version}{released}; "
                          f"{_support(finding)}")
        else:
            console.print(f"current  {finding.pin.name:<{width}}  {finding.pin.pinned}")
    behind = sum(f.status == "behind" for f in findings)
    console.print(f"{behind} of {len(findings)} pin(s) behind (charts and images judged on Kubernetes {kubernetes})")
