"""The pure parts of issue 27: dependency verdicts (``judge``) and cron times in a time zone."""

import datetime as dt

import pytest

from hive_lab_server.jobs.pipelines import cron
from hive_lab_server.jobs.pipelines.dependencies import judge
from hive_lab_server.wire.launch_spec import Dependency

OUTCOMES = {"j-1": "succeeded", "j-2": "failed", "j-3": "cancelled", "j-4": "pending", "j-5": "pending"}


@pytest.mark.parametrize("deps, status, reason", [
    ([], "met", ""),
    ([("j-1", "succeeded"), ("j-2", "failed"), ("j-3", "ended")], "met", ""),
    ([("j-4", "succeeded")], "waiting", "waiting for j-4 to succeed"),
    ([("j-4", "succeeded"), ("j-1", "ended"), ("j-5", "ended")], "waiting", "waiting for j-4 to succeed and j-5 to end"),
    ([("j-4", "succeeded"), ("j-2", "succeeded")], "never", "dependency never met: j-2 failed, so it will never succeed"),
    ([("j-3", "failed")], "never", "dependency never met: j-3 cancelled, so it will never fail"),
    ([("j-9", "ended")], "never", "dependency never met: j-9 does not exist"),
])
def test_judge(deps, status, reason):
    verdict = judge([Dependency(j, w) for j, w in deps], lambda ref: OUTCOMES.get(ref, "missing"))
    assert (verdict.status, verdict.reason) == (status, reason)


def utc(*args):
    return dt.datetime(*args, tzinfo=dt.timezone.utc).timestamp()


def test_daily_midnight_in_berlin_across_the_end_of_summer_time():
    t = utc(2026, 10, 24, 12, 0)  # summer time (UTC+2) ends on 25 October
    first = cron.next_after("@daily", "Europe/Berlin", t)
    second = cron.next_after("0 0 * * *", "Europe/Berlin", first)
    assert (first, second) == (utc(2026, 10, 24, 22, 0), utc(2026, 10, 25, 23, 0))


def test_times_between_and_the_latest_due_time():
    t = utc(2026, 1, 1, 5, 30)
    assert cron.times_between("0 * * * *", "UTC", t, t + 3 * 3600, 10) == [utc(2026, 1, 1, h) for h in (6, 7, 8)]
    assert cron.times_between("0 * * * *", "UTC", t, t + 3 * 3600, 2) == [utc(2026, 1, 1, h) for h in (6, 7)]
    assert cron.latest_at_or_before("0 * * * *", "UTC", utc(2026, 1, 1, 8)) == utc(2026, 1, 1, 8)
    assert cron.latest_at_or_before("0 * * * *", "UTC", utc(2026, 1, 1, 8, 59)) == utc(2026, 1, 1, 8)


@pytest.mark.parametrize("expr, tz, field", [("61 * * * *", "UTC", "cron"), ("0 0 * *", "UTC", "cron"),
                                             ("@daily", "Mars/Olympus", "timezone"), ("@daily", "", "timezone")])
def test_bad_expressions_and_zones_name_their_field(expr, tz, field):
    with pytest.raises(cron.CronError) as err:
        cron.next_after(expr, tz, 0.0)
    assert err.value.field == field
