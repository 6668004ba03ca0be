"""When a Karpenter disruption budget's schedule fires and how long it stays active, as a specification
of robfig/cron's standard parser (what Karpenter reads ``budgets[].schedule`` with: five fields, names
for months and weekdays, Sunday = 0, ``a/n`` from a to the field's end, ``a-b/n``, lists, the
descriptors, and cron's day rule: when both day fields are restricted, either may match).

Calendar: 2026-12-01 is a Tuesday, 2026-12-05 a Saturday, 2026-12-06 a Sunday, 2026-12-07 a Monday.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from components.settings.karpenter import DisruptionBudget, cron_fires_at


def at(day: int, hour: int = 0, minute: int = 0, month: int = 12, year: int = 2026) -> datetime:
    return datetime(year, month, day, hour, minute)


@pytest.mark.parametrize("schedule, fires, quiet", [
    # Sunday is 0 (and "sun"), Saturday 6 (and "sat"); names in any case
    ("0 0 * * 0", [at(6)], [at(7), at(5)]),
    ("0 0 * * sun", [at(6)], [at(7), at(5)]),
    ("0 0 * * 6", [at(5)], [at(6), at(4)]),
    ("0 0 * * sat", [at(5)], [at(6)]),
    ("0 0 * * MON", [at(7)], [at(1), at(6)]),
    ("0 0 * * mon-fri", [at(7), at(4), at(1)], [at(5), at(6)]),
    # a/n runs from a to the field's end; a-b/n within the range; */n from the field's start
    ("5/15 * * * *", [at(1, 3, 5), at(1, 3, 20), at(1, 3, 50)], [at(1, 3, 0), at(1, 3, 6), at(1, 3, 51)]),
    ("10-20/5 * * * *", [at(1, 0, 10), at(1, 0, 15), at(1, 0, 20)], [at(1, 0, 11), at(1, 0, 25), at(1, 0, 5)]),
    ("*/20 * * * *", [at(1, 4, 0), at(1, 4, 40)], [at(1, 4, 10), at(1, 4, 50)]),
    ("0 9-17 * * *", [at(1, 9), at(1, 17)], [at(1, 8), at(1, 18)]),
    ("7 * * * *", [at(1, 2, 7)], [at(1, 2, 8), at(1, 2, 6)]),
    ("0,30 * * * *", [at(1, 1, 0), at(1, 1, 30)], [at(1, 1, 15)]),
    # months by name or number
    ("0 0 1 jan,jul *", [at(1, month=1, year=2027), at(1, month=7)], [at(1)]),
    ("0 0 1 11-12 *", [at(1), at(1, month=11)], [at(1, month=10)]),
    # both day fields restricted: either matches; one restricted: that one alone
    ("0 0 1 * sun", [at(1), at(6)], [at(2), at(7)]),
    ("0 0 1 * *", [at(1)], [at(6), at(2)]),
    ("0 0 * * sun", [at(6)], [at(1)]),
    ("0 0 * 12 sun", [at(6)], [at(1), at(7)]),
    # descriptors
    ("@hourly", [at(1, 13, 0)], [at(1, 13, 1)]),
    ("@daily", [at(2, 0, 0)], [at(2, 0, 1), at(2, 1, 0)]),
    ("@weekly", [at(6)], [at(7)]),
    ("@monthly", [at(1)], [at(2)]),
    ("@yearly", [at(1, month=1, year=2027)], [at(1)]),
    ("@annually", [at(1, month=1, year=2027)], [at(1, month=2, year=2027)]),
])
def test_a_schedule_fires_where_robfig_cron_fires(schedule, fires, quiet):
    assert [cron_fires_at(schedule, when) for when in fires] == [True] * len(fires)
    assert [cron_fires_at(schedule, when) for when in quiet] == [False] * len(quiet)


@pytest.mark.parametrize("duration, last_active, first_quiet", [
    ("10h", at(7, 17, 59), at(7, 18, 0)),
    ("1h30m", at(7, 9, 29), at(7, 9, 30)),
    ("30m", at(7, 8, 29), at(7, 8, 30)),
    ("10h0s", at(7, 17, 59), at(7, 18, 0)),
])
def test_a_budget_is_active_from_each_firing_for_its_duration(duration, last_active, first_quiet):
    """Monday 2026-12-07 08:00 fires "0 8 * * mon-fri": active from that minute for the duration."""
    budget = DisruptionBudget(nodes="0", schedule="0 8 * * mon-fri", duration=duration)
    assert budget.active_at(at(7, 8, 0)) and budget.active_at(last_active)
    assert not budget.active_at(first_quiet) and not budget.active_at(at(7, 7, 59))
    assert not budget.active_at(at(5, 9, 0)), "Saturday: no firing"


def test_a_window_that_crosses_midnight_stays_active_into_the_next_day():
    budget = DisruptionBudget(nodes="1", schedule="0 22 * * sun", duration="4h")
    assert budget.active_at(at(6, 23, 59)) and budget.active_at(at(7, 1, 59))
    assert not budget.active_at(at(7, 2, 0))


def test_a_budget_without_a_schedule_is_always_active():
    assert DisruptionBudget(nodes="1").active_at(at(5, 3, 17))
