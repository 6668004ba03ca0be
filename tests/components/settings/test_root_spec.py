"""The root settings' own bounds as a specification (components/settings/root.py, _base.py): AWS tag
keys, values and count at their edges, the region error's hint, the Kubernetes minors a refusal offers
on the last day of a minor's standard support (the EKS calendar in components/versions.py)."""

from __future__ import annotations

import pytest

from components.settings._base import check_region
from tests.components.settings.test_stack_spec import DEV, PROD, problems
from tests.conftest import ROOMY_GPU_BUDGET

KEY_REASON = "not an AWS tag key: 1-128 letters, digits, spaces and _ . : / = + - @, not starting with aws:"
VALUE_REASON = "not an AWS tag value: up to 256 letters, digits, spaces and _ . : / = + - @"


def test_a_one_character_tag_key_is_a_tag_and_an_empty_one_is_not():
    assert problems(DEV, tags={"k": "x"}) == []
    assert problems(DEV, tags={"": "x"}) == [f'llm-platform:tags.: got "x": {KEY_REASON}']


@pytest.mark.parametrize("length, ok", [(0, True), (1, True), (256, True), (257, False)])
def test_tag_values_up_to_256_characters(length, ok):
    found = problems(DEV, tags={"team": "v" * length})
    assert [p.split(": got", 1)[0] for p in found] == ([] if ok else ["llm-platform:tags.team"])
    assert all(p.endswith(f": {VALUE_REASON}") for p in found)


@pytest.mark.parametrize("count, ok", [(40, True), (41, False)])
def test_at_most_40_tags(count, ok):
    found = problems(DEV, tags={f"tag-{n}": "x" for n in range(count)})
    assert [p.split(": got", 1)[0] for p in found] == ([] if ok else ["llm-platform:tags"])
    if not ok:
        assert found[0].endswith("41 tags; keep at most 40 (AWS allows 50 per resource and the platform adds its own)")


@pytest.mark.parametrize("region, message", [
    # the regions that share the name's first part, sorted, at most six
    ("us-nowhere-9", "'us-nowhere-9' is not an AWS region; regions starting alike: us-east-1, us-east-2, "
                     "us-gov-east-1, us-gov-west-1, us-iso-east-1, us-iso-west-1"),
    ("eu-nowhere-1", "'eu-nowhere-1' is not an AWS region; regions starting alike: eu-central-1, eu-central-2, "
                     "eu-isoe-west-1, eu-north-1, eu-south-1, eu-south-2"),
    ("il-north-1", "'il-north-1' is not an AWS region; regions starting alike: il-central-1"),
    # no region starts alike (the first part is compared, not the last)
    ("xx-east-1", "'xx-east-1' is not an AWS region such as us-east-1"),
    # the name is echoed cut at 40 characters
    ("q" * 45, f"{'q' * 40!r} is not an AWS region such as us-east-1"),
])
def test_a_region_that_is_not_one_names_the_nearest(region, message):
    with pytest.raises(ValueError) as raised:
        check_region(region)
    assert str(raised.value) == message


def test_on_a_minors_last_day_of_standard_support_it_is_still_offered(monkeypatch):
    """1.35's standard support ends 2027-03-27: on that day 1.34 (ended 2026-12-02) is refused and the
    refusal still offers 1.35 beside 1.36."""
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2027-03-27")
    found = problems(PROD, kubernetesVersion="1.34")
    assert [p.split(": got", 1)[0] for p in found] == ["llm-platform:kubernetesVersion"]
    assert "upgrade to 1.36 (allowed: 1.35, 1.36)" in found[0]
    monkeypatch.setenv("LLM_PLATFORM_TODAY", "2027-03-28")
    assert "upgrade to 1.36 (allowed: 1.36)" in problems(PROD, kubernetesVersion="1.34")[0]


@pytest.mark.parametrize("count, ok", [(10, True), (11, False)])
def test_at_most_ten_gpu_pools(count, ok):
    """dev's inference group and copies of it under other names (the models still find theirs)."""
    inference = DEV["llm-platform:gpuPools"][0]
    pools = [inference] + [{**inference, "name": f"extra-{n}"} for n in range(1, count)]
    found = problems(DEV, gpuPools=pools, gpuBudget=ROOMY_GPU_BUDGET)
    assert [p.split(": got", 1)[0] for p in found] == ([] if ok else ["llm-platform:gpuPools"])
    assert all(p.endswith(": List should have at most 10 items after validation, not 11") for p in found)
