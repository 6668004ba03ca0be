"""One check's outcome, as preflight and the post-deploy checks report it (PASS, FAIL or SKIP)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str
    skipped: bool = False

    @property
    def status(self) -> str:
        return "SKIP" if self.skipped else "PASS" if self.ok else "FAIL"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "status": self.status, "detail": self.detail}
