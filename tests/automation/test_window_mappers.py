"""Roll-ups and cron schedules with weekly and cron-defined partitions (SPEC §12)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from partita import (
    CronPartitionDef,
    DatePartitionDef,
    MonthlyPartitionDef,
    RollupMapper,
    StaticPartitionDef,
    WeeklyPartitionDef,
)
from partita.automation.schedules import scheduled_key

QUARTERS = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
BERLIN = ZoneInfo("Europe/Berlin")


def test_quarter_hours_roll_up_into_their_local_day_with_the_daylight_saving_count():
    mapper, days = RollupMapper("day"), DatePartitionDef()
    assert mapper.downstream_keys("2026-10-25T02:15+01:00", QUARTERS, days) == ("2026-10-25",)
    assert len(mapper.requirement("2026-10-25", QUARTERS, days).keys) == 25 * 4
    assert len(mapper.requirement("2026-03-29", QUARTERS, days).keys) == 23 * 4
    assert len(mapper.requirement("2026-06-01", QUARTERS, days).keys) == 24 * 4


def test_quarter_hours_roll_up_into_an_hourly_cron_window_per_occurrence_of_a_repeated_hour():
    hours = CronPartitionDef("0 * * * *", "Europe/Berlin")
    mapper = RollupMapper("hour")
    assert mapper.downstream_keys("2026-10-25T02:15+01:00", QUARTERS, hours) == ("2026-10-25T02:00+01:00",)
    assert mapper.requirement("2026-10-25T02:00+02:00", QUARTERS, hours).keys == (
        "2026-10-25T02:00+02:00", "2026-10-25T02:15+02:00", "2026-10-25T02:30+02:00", "2026-10-25T02:45+02:00",
    )  # fmt: skip


def test_days_roll_up_into_the_week_that_starts_on_the_definitions_day():
    mapper, weeks = RollupMapper("week", week_start=6), WeeklyPartitionDef("sunday")
    assert mapper.downstream_keys("2026-12-02", DatePartitionDef(), weeks) == ("2026-11-29",)
    assert mapper.requirement("2026-11-29", DatePartitionDef(), weeks).keys[::6] == ("2026-11-29", "2026-12-05")


def test_a_week_rolls_up_into_the_month_its_first_day_falls_in():
    mapper, weeks = RollupMapper("month"), WeeklyPartitionDef()
    assert mapper.downstream_keys("2026-11-30", weeks, MonthlyPartitionDef()) == ("2026-11",)
    assert mapper.requirement("2026-11", weeks, MonthlyPartitionDef()).keys == (
        "2026-11-02", "2026-11-09", "2026-11-16", "2026-11-23", "2026-11-30",
    )  # fmt: skip


def test_a_roll_up_keeps_only_the_upstream_keys_within_its_bounds():
    bounded = CronPartitionDef("0 */6 * * *", "UTC", start="2026-06-01T12:00+00:00")
    assert RollupMapper("day").requirement("2026-06-01", bounded, DatePartitionDef()).keys == (
        "2026-06-01T12:00+00:00", "2026-06-01T18:00+00:00",
    )  # fmt: skip


def test_a_schedule_tick_runs_the_weekly_partition_that_has_ended():
    weeks = WeeklyPartitionDef("monday")
    tick = dt.datetime(2026, 12, 7, 0, 5, tzinfo=BERLIN)
    previous = dt.datetime(2026, 12, 6, 0, 5, tzinfo=BERLIN)
    assert scheduled_key(weeks, BERLIN, tick, previous) == "2026-11-30"
    assert scheduled_key(weeks, BERLIN, tick + dt.timedelta(days=1), tick) is None


def test_a_schedule_tick_runs_the_cron_window_that_has_ended():
    tick = dt.datetime(2026, 10, 25, 2, 0, tzinfo=BERLIN, fold=1)
    previous = dt.datetime(2026, 10, 25, 2, 45, tzinfo=BERLIN, fold=0)
    assert scheduled_key(QUARTERS, BERLIN, tick, previous) == "2026-10-25T02:45+02:00"


def test_a_roll_up_from_an_unsupported_definition_is_refused_naming_the_supported_ones():
    with pytest.raises(ValueError, match="hourly, cron, daily, weekly or monthly"):
        RollupMapper("day").requirement("2026-01-01", StaticPartitionDef("s", ["a"]), DatePartitionDef())
