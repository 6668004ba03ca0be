"""Every relative link in README.md and docs/ reaches a file of the repository.

README is a map that points into docs/; a chapter moved or renamed must not leave a link behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_targets(page: Path) -> list[str]:
    targets = [t.split("#", 1)[0] for t in _LINK.findall(page.read_text())]
    return [t for t in targets if t and "://" not in t and not t.startswith("mailto:")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    missing = [t for t in _relative_targets(page) if not (page.parent / t).exists()]
    assert missing == []


def test_a_broken_link_is_seen(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [the guide](docs/gone.md) and [upstream](https://example.com/x).\n")
    assert _relative_targets(page) == ["docs/gone.md"]


def test_readme_stays_a_map():
    """README is what it is, the two commands, the architecture and where each decision lives, with links:
    the chapters live in docs/. About 250 lines keeps it readable in one sitting."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
