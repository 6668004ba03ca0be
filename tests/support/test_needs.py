"""Outside needs skip on a developer's machine and fail in CI: a missing ../shared never passes CI."""

from __future__ import annotations

import pytest

from tests.support import crd_schema, needs


@pytest.mark.parametrize(("in_ci", "outcome"), [(True, pytest.fail.Exception), (False, pytest.skip.Exception)])
def test_missing_upstream_crds(monkeypatch, tmp_path, in_ci, outcome):
    monkeypatch.setattr(needs, "IN_CI", in_ci)
    monkeypatch.setattr(crd_schema, "CRD_DIR", tmp_path / "no-shared")
    with pytest.raises(outcome, match="upstream CRD schemas not found"):
        crd_schema.require()


def test_present_upstream_crds_do_not_stop_the_test(monkeypatch, tmp_path):
    for name in crd_schema.CRD_FILES.values():
        (tmp_path / name).write_text("{}")
    monkeypatch.setattr(crd_schema, "CRD_DIR", tmp_path)
    crd_schema.require()
