"""Resolve every pin of a versions file and say, for what could not be resolved here, what to run.

Each distinct ``repository:tag`` is asked once. An image that cannot be resolved keeps its pin as it
is (a digest already there stays); the rest are written. The command printed for an unresolved
image is ``crane digest <domain/path:tag>``: crane sends the same ``Accept`` list, so for a
multi-arch image it prints the index's digest, the one the pin needs (docs/images.md gives the
equivalent ``curl`` commands).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from automation.images.pins import Pin
from automation.images.reference import ReferenceError, parse
from automation.images.registry import RegistryClient
from automation.images.routing import Unresolved


@dataclass(frozen=True)
class Resolution:
    """What became of one pin: the digest read from its registry, or why there is none."""

    pin: Pin
    digest: str | None = None
    reason: str | None = None

    @property
    def status(self) -> str:
        if self.digest is None:
            return "unresolved"
        if self.pin.digest is None:
            return "new"
        return "unchanged" if self.pin.digest == self.digest else "changed"

    @property
    def command(self) -> str:
        """The one command that reads this digest where the registry is reachable."""
        if self.pin.problem or self.pin.repository is None or self.pin.tag is None:  # a pin without both has a problem
            return f"edit {self.pin.name} by hand ({self.pin.problem})"
        try:
            return f"crane digest {parse(self.pin.repository, self.pin.tag).qualified}"
        except ReferenceError:
            return f"fix {self.pin.name}'s repository or tag"

    def to_json(self) -> dict:
        return {"name": self.pin.name, "image": self.pin.ref, "pinned": self.pin.digest, "status": self.status,
                "digest": self.digest, "reason": self.reason,
                "command": self.command if self.digest is None else None}


def resolve_pins(pins: Iterable[Pin], client: RegistryClient,
                 on_resolution: Callable[[Resolution], None] = lambda _r: None) -> list[Resolution]:
    """Ask the registry for each pin's digest, in file order; ``on_resolution`` sees each as it lands."""
    answers: dict[tuple[str, str, str], tuple[str | None, str | None]] = {}
    resolutions = []
    for pin in pins:
        if pin.problem or pin.repository is None or pin.tag is None:  # a pin without both has a problem
            resolution = Resolution(pin, reason=pin.problem)
        else:
            try:
                ref = parse(pin.repository, pin.tag)
            except ReferenceError as exc:
                resolution = Resolution(pin, reason=str(exc))
            else:
                key = (ref.domain, ref.path, ref.tag)
                if key not in answers:
                    try:
                        answers[key] = (client.digest(ref), None)
                    except Unresolved as exc:
                        answers[key] = (None, str(exc))
                resolution = Resolution(pin, *answers[key])
        on_resolution(resolution)
        resolutions.append(resolution)
    return resolutions
