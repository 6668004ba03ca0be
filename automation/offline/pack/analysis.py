"""The policy pack analyzing a plan while the program records it, as the engine does in a preview.

Under ``pulumi preview --policy-pack``, the engine sends ``Analyze`` for each resource as its
registration arrives, and ``AnalyzeStack`` once the program is done. :class:`PlanAnalysis` does
the same with a :class:`~automation.offline.pack.runner.PolicyPackRunner`: ``submit`` (called by
the recording monitor for each registration) sends ``Analyze`` without waiting for the answer, so
the pack, a process of its own, works on the other core while the program goes on; ``send_stack``
sends ``AnalyzeStack`` the same way, and ``finish`` collects every answer, findings in the plan's
order.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from automation.offline.pack.findings import PackReport, PolicyPackError, Violation, resource_dict
from automation.offline.pack.runner import PolicyPackRunner, Structs, provider_urn


class PlanAnalysis:
    """One pack run over a plan: the pack is configured with ``config`` when the first resource
    arrives (it has been importing its policies meanwhile), then analyzes each resource handed to
    ``submit``. Start-up and configuration errors are raised by ``finish``."""

    def __init__(self, runner: PolicyPackRunner, config: str | os.PathLike[str] | Mapping[str, Any] | None) -> None:
        self.runner = runner
        self.config = config
        self._lock = threading.Lock()
        self._ready = False
        self._error: BaseException | None = None
        self._structs = Structs()
        self._by_urn: dict[str, dict[str, Any]] = {}
        self._calls: dict[str, grpc.Future] = {}
        self._items: list[dict[str, Any]] = []
        self._stack: grpc.Future | None = None

    def _configured(self) -> bool:
        """Connect to and configure the pack once; ``False`` if that failed (the error is kept)."""
        if not self._ready and self._error is None:
            try:
                self.runner.connect()
                self.runner.configure(self.config)
                self._ready = True
            except BaseException as error:  # noqa: BLE001 - raised by finish(), where the caller expects it
                self._error = error
        return self._ready

    def submit(self, resource: Any) -> None:
        """Send ``Analyze`` for one registered resource (its provider is registered before it)."""
        r = resource_dict(resource)
        with self._lock:
            self._by_urn[r["urn"]] = r
            if self._configured():
                try:
                    self._calls[r["urn"]] = self.runner.analyze_async(
                        r, self._by_urn.get(provider_urn(r)), structs=self._structs)
                except BaseException as error:  # noqa: BLE001 - raised by finish()
                    self._error = error

    def send_stack(self, resources: Iterable[Any]) -> None:
        """``Analyze`` any of ``resources`` not submitted, then send ``AnalyzeStack`` over all of them
        without waiting: the pack works on it in its own process while the caller goes on."""
        self._items = [resource_dict(r) for r in resources]
        for r in self._items:
            if r["urn"] not in self._calls:
                self.submit(r)
        with self._lock:
            self._configured()
            if self._error is not None:
                raise self._error
        by_urn: dict[str, Any] = {r["urn"]: r for r in self._items}
        self._stack = self.runner.analyze_stack_async(self._items, by_urn, structs=self._structs)
        # Sent: the marshalled inputs are not needed again.
        self._structs = Structs()

    def finish(self, resources: Iterable[Any] | None = None) -> PackReport:
        """Every answer: the findings of each resource in ``resources``' order (those given to
        :meth:`send_stack`, which this calls first when ``resources`` is given), then the stack's."""
        if resources is not None:
            self.send_stack(resources)
        if self._stack is None:
            raise RuntimeError("finish() before send_stack()")
        violations: list[Violation] = []
        for r in self._items:
            violations += self.runner.violations_of(self._calls.pop(r["urn"]), r["urn"])
        violations += self.runner.violations_of(self._stack, "")
        self._by_urn.clear()
        self._items, self._stack = [], None
        info = self.runner.info()
        return PackReport(pack=f"{info.name}@{info.version}", config=self.runner.config_source, violations=violations)


__all__ = ["PlanAnalysis", "PolicyPackError"]
