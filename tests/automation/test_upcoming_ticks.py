"""The ticks around a moment, as `partita schedules` lists them: next ones and the one before."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from partita.automation.schedules import next_ticks, tick_before

UTC = ZoneInfo("UTC")
BERLIN = ZoneInfo("Europe/Berlin")
MOMENT = dt.datetime(2026, 12, 1, 12, 7, tzinfo=dt.UTC)


def test_the_next_ticks_of_a_minute_schedule_are_the_next_minutes() -> None:
    ticks = next_ticks("* * * * *", UTC, MOMENT, 3)
    assert [tick.minute for tick in ticks] == [8, 9, 10]


def test_a_leap_day_schedule_finds_its_next_ticks_years_ahead() -> None:
    ticks = next_ticks("0 0 29 2 *", UTC, MOMENT, 2)
    assert [tick.date() for tick in ticks] == [dt.date(2028, 2, 29), dt.date(2032, 2, 29)]


def test_next_ticks_are_strictly_after_the_moment() -> None:
    on_the_hour = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert next_ticks("0 * * * *", UTC, on_the_hour, 1)[0] == dt.datetime(2026, 12, 1, 13, 0, tzinfo=dt.UTC)


def test_next_ticks_on_a_fall_back_day_include_both_repeated_hours() -> None:
    before = dt.datetime(2026, 10, 25, 0, 30, tzinfo=dt.UTC)  # 02:30 CEST in Berlin
    ticks = next_ticks("0 * * * *", BERLIN, before, 2)
    assert [tick.astimezone(dt.UTC).hour for tick in ticks] == [1, 2]  # 02:00 CET at 01:00 UTC, then 03:00 CET


def test_the_tick_before_is_the_last_one_at_or_before_the_moment() -> None:
    assert tick_before("0 * * * *", UTC, MOMENT) == dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert tick_before("0 0 29 2 *", UTC, MOMENT) == dt.datetime(2024, 2, 29, 0, 0, tzinfo=dt.UTC)
