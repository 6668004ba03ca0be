"""Stack locks of self-managed (DIY) backends: who holds one, since when, and whether it is stale.

The CLI locks a stack for every update by writing
``.pulumi/locks/organization/<project>/<stack>/<id>.json`` (``{pid, username, hostname, timestamp}``,
``pkg/backend/diy/lock.go``) and deletes it when the update ends, also after a graceful cancel. A
CLI killed outright leaves it behind, and every later update of the stack fails with "the stack is
currently locked by N lock(s) ... created by USER@HOST (pid N) at TIME". ``pulumi cancel`` on a DIY
backend deletes every lock of the stack without looking at the holder
(``diyBackend.CancelCurrentUpdate``); :func:`stale` is the check it skips.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from policies.capacity import bounded_json

_LOCK_LINE = re.compile(
    r"^\s*(?P<where>\S+): created by (?P<user>[^@\s]*)@(?P<host>\S*) \(pid (?P<pid>-?\d+)\) at (?P<time>\S+)\s*$"
)


@dataclass(frozen=True)
class LockInfo:
    where: str
    pid: int
    username: str
    hostname: str
    timestamp: datetime | None

    @property
    def on_this_host(self) -> bool:
        return self.hostname == socket.gethostname()

    def holder_alive(self) -> bool | None:
        """True/False for a holder on this host (signal 0 probe), None when it runs elsewhere."""
        if not self.on_this_host:
            return None
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @property
    def stale(self) -> bool:
        """Held by a process of this host that no longer runs: safe to clear."""
        return self.holder_alive() is False

    def age_seconds(self, now: datetime | None = None) -> int | None:
        if self.timestamp is None:
            return None
        return max(0, int(((now or datetime.now(UTC)) - self.timestamp).total_seconds()))

    def state(self) -> str:
        alive = self.holder_alive()
        return "stale" if alive is False else "held" if alive else "held elsewhere"

    def describe(self, now: datetime | None = None) -> str:
        age = self.age_seconds(now)
        since = f" for {_short(age)}" if age is not None else ""
        verdict = {
            "stale": "its process is gone (stale)",
            "held": "its process is still running",
            "held elsewhere": "on another host: cannot tell whether it still runs",
        }[self.state()]
        return f"locked by {self.username or '?'}@{self.hostname or '?'} (pid {self.pid}){since}; {verdict}"

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        return {
            "where": self.where,
            "pid": self.pid,
            "username": self.username,
            "hostname": self.hostname,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "ageSeconds": self.age_seconds(now),
            "state": self.state(),
        }


def _short(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def _parse_time(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def file_backend_root(backend_url: str) -> Path | None:
    """The directory of a ``file://`` backend, or None for any other backend."""
    if not backend_url.startswith("file://"):
        return None
    return Path(unquote(urlparse(backend_url).path))


def lock_dir(root: Path, project: str, stack: str) -> Path:
    return root / ".pulumi" / "locks" / "organization" / project / stack


def read_locks(backend_url: str, project: str, stack: str) -> list[LockInfo]:
    """The stack's lock files on a file backend (empty for other backends: their locks are read from
    the CLI's error message instead, see :func:`from_error`)."""
    root = file_backend_root(backend_url)
    if root is None:
        return []
    directory = lock_dir(root, project, stack)
    found = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            content = bounded_json.loads(path.read_text())
        except (OSError, ValueError):
            content = {}
        found.append(LockInfo(
            where=str(path),
            pid=int(content.get("pid") or 0),
            username=str(content.get("username") or ""),
            hostname=str(content.get("hostname") or ""),
            timestamp=_parse_time(str(content.get("timestamp") or "")),
        ))
    return found


def from_error(text: str) -> list[LockInfo]:
    """Lock holders named in the CLI's "currently locked" error (any DIY backend: file, S3, GCS, Azure)."""
    found = []
    for line in text.splitlines():
        match = _LOCK_LINE.match(line)
        if match:
            found.append(LockInfo(
                where=match["where"], pid=int(match["pid"]), username=match["user"], hostname=match["host"],
                timestamp=_parse_time(match["time"]),
            ))
    return found


def remove(lock: LockInfo) -> None:
    """Delete one lock file of a file backend."""
    Path(lock.where).unlink(missing_ok=True)
