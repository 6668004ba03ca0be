"""``images list`` and ``images resolve``: the image pins of ``components/versions.py`` and their digests.

``resolve`` asks each image's registry (OCI distribution API, anonymous pull tokens) for the digest its
tag points at and writes it into the pin; what cannot be reached from here is listed with the command
that reads it elsewhere (exit 6). See docs/images.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from automation import exit_codes
from automation.commands._arguments import host_override, seconds_up_to
from automation.commands._common import add_output_flags
from automation.console import stdout
from automation.errors import UsageError
from automation.images.pins import DEFAULT_VERSIONS_FILE, Pin, read_pins, read_source, rewrite, write_atomically
from automation.images.routing import DEFAULT_TIMEOUT


def declare(verbs: argparse._SubParsersAction) -> None:
    parser = verbs.add_parser(
        "images",
        help="image pins: list them, resolve their digests from the registries",
        description="The Image(...) pins of components/versions.py: list them with their digests, or resolve "
        "every tag to its digest through the OCI distribution API and write the digests into the file.",
    )
    actions = parser.add_subparsers(dest="images_verb", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every pinned image with its digest or 'tag only'",
                                 description="Print every Image(...) pin of the versions file: name, "
                                 "repository:tag, and its digest or 'tag only'. Reads the file; asks no registry.")
    _add_versions_file(listing)
    add_output_flags(listing)
    listing.set_defaults(run=_run_list)

    resolve = actions.add_parser(
        "resolve", help="resolve every pinned tag to its digest and write the digests into the versions file",
        description="Ask each image's registry (Docker Hub, ghcr.io, nvcr.io, public.ecr.aws, registry.k8s.io, "
        "...) which digest its tag points at (the index's digest for a multi-arch image), with anonymous pull "
        "tokens, and rewrite only the digest of each Image(...) pin. Images that cannot be resolved from here "
        "are listed with the command to run where the registry is reachable. Exit codes: 0 all resolved, "
        "2 bad command line or versions file, 6 some images unresolved (the rest written).",
    )
    _add_versions_file(resolve)
    resolve.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    resolve.add_argument("--only", action="append", default=[], metavar="NAME",
                         help="resolve only this pin: its name in the file (e.g. VLLM_IMAGE) or its repository; "
                         "repeatable")
    resolve.add_argument("--registry-override", action="append", default=[], metavar="HOST=URL", type=host_override,
                         help="send requests for registry (or token) host HOST to URL instead, e.g. a mirror or "
                         "a test registry: docker.io=http://127.0.0.1:5000; plain http is allowed only here; "
                         "repeatable")
    resolve.add_argument("--timeout", type=seconds_up_to(300), default=DEFAULT_TIMEOUT,
                         help="seconds each exchange with a registry or token server may take in all: connecting, the "
                         f"headers and the whole body (default {DEFAULT_TIMEOUT:g})")
    resolve.set_defaults(run=_run_resolve)


def _add_versions_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--versions-file", type=Path, default=DEFAULT_VERSIONS_FILE, metavar="PATH",
                        help="the versions module to read (default: components/versions.py)")




def _run_list(args: argparse.Namespace) -> int:
    pins = read_pins(read_source(args.versions_file), args.versions_file)
    if args.output == "json":
        print(json.dumps([{"name": p.name, "repository": p.repository, "tag": p.tag, "digest": p.digest}
                          for p in pins], indent=2))
        return exit_codes.OK
    console = stdout()
    width = max((len(p.name) for p in pins), default=0)
    for pin in pins:
        console.print(f"{pin.name:<{width}}  {pin.ref}  {pin.digest or 'tag only'}")
    return exit_codes.OK


def _selected(pins: list[Pin], only: list[str], path: Path) -> list[Pin]:
    if not only:
        return pins
    unknown = [name for name in only if not any(name in (p.name, p.repository) for p in pins)]
    if unknown:
        raise UsageError(f"--only {unknown[0]}: no Image pin of that name or repository in {path} "
                         "(see `python -m automation images list`)")
    return [p for p in pins if p.name in only or p.repository in only]


def _run_resolve(args: argparse.Namespace) -> int:
    from automation.images.registry import RegistryClient
    from automation.images.resolve import resolve_pins

    source = read_source(args.versions_file)
    pins = _selected(read_pins(source, args.versions_file), args.only, args.versions_file)
    console = stdout()
    width = max((len(p.name) for p in pins), default=0)

    def show(resolution) -> None:
        pin = resolution.pin
        if resolution.digest is None:
            console.print(f"unresolved {pin.name:<{width}}  {pin.ref}")
        elif resolution.status == "changed":
            console.print(f"changed    {pin.name:<{width}}  {pin.ref}  {pin.digest} -> {resolution.digest}")
        else:
            console.print(f"{resolution.status:<10} {pin.name:<{width}}  {pin.ref}  {resolution.digest}")

    client = RegistryClient(dict(args.registry_override), timeout=args.timeout)
    try:
        resolutions = resolve_pins(pins, client, show)
    finally:
        client.close()
    changes = {r.pin.name: r.digest for r in resolutions if r.digest is not None and r.status in ("new", "changed")}
    if changes:
        new = rewrite(source, changes, args.versions_file)
        if args.dry_run:
            console.print(f"dry run: would write {len(changes)} digest(s) into {args.versions_file}")
        else:
            write_atomically(args.versions_file, new)
            console.print(f"wrote {len(changes)} digest(s) into {args.versions_file}")
    else:
        console.print(f"no digest to change in {args.versions_file}")
    unresolved = [r for r in resolutions if r.digest is None]
    if not unresolved:
        return exit_codes.OK
    console.print(f"{len(unresolved)} image(s) unresolved; run where the registry is reachable, then pin the "
                  "digest (or run this command there):")
    for resolution in unresolved:
        console.print(f"  {resolution.pin.name}: {resolution.reason}; run: {resolution.command}")
    return exit_codes.INCOMPLETE
