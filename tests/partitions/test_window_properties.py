"""Property tests for weekly and cron definitions: text round-trips, ranges complete and sorted (SPEC §3).

Cron ranges are checked against an independent oracle: every UTC minute of a
window whose wall time croniter says matches the expression, so a
daylight-saving day can neither drop nor invent a tick. Windows are drawn
around the clock changes of zones with whole-hour and half-hour shifts, and
of a zone without daylight saving.
"""

from __future__ import annotations

import datetime as dt
import functools
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from partita import CronPartitionDef, WeeklyPartitionDef

UTC = dt.UTC
DST_ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]
STEADY_ZONES = ["Asia/Kolkata", "UTC"]  # no daylight saving (Kolkata: +05:30)
EXPRESSIONS = ["*/15 * * * *", "0 * * * *", "30 1 * * *", "*/20 2 * * *", "0,45 */3 * * *", "5 2 * * sun"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FEW = settings(max_examples=30, deadline=None)


@functools.cache
def clock_changes(zone_name: str) -> tuple[dt.datetime, ...]:
    """The UTC hours in which the zone's offset changed, 2000 to 2030 (found by scanning days, then hours)."""
    zone, found = ZoneInfo(zone_name), []
    day = dt.datetime(2000, 1, 1, tzinfo=UTC)
    while day.year < 2031:
        after = day + dt.timedelta(days=1)
        if day.astimezone(zone).utcoffset() != after.astimezone(zone).utcoffset():
            hour = day
            while hour.astimezone(zone).utcoffset() == (hour + dt.timedelta(hours=1)).astimezone(zone).utcoffset():
                hour += dt.timedelta(hours=1)
            found.append(hour)
        day = after
    return tuple(found)


def oracle_ticks(cron: str, zone: ZoneInfo, start: dt.datetime, minutes: int) -> list[dt.datetime]:
    """Every UTC minute in [start, start + minutes] whose wall time in ``zone`` matches ``cron``."""
    moments = (start + dt.timedelta(minutes=step) for step in range(minutes + 1))
    return [moment for moment in moments if croniter.match(cron, moment.astimezone(zone).replace(tzinfo=None))]


@st.composite
def windows(draw, zones):
    zone = draw(st.sampled_from(zones))
    changes = clock_changes(zone)
    if changes and draw(st.booleans()):
        start = draw(st.sampled_from(changes)) + dt.timedelta(minutes=draw(st.integers(-4 * 60, 3 * 60)))
    else:
        start = draw(st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2037, 1, 1))).replace(
            second=0, microsecond=0, tzinfo=UTC
        )
    return zone, start, draw(st.integers(0, 4 * 60))


def check_range_matches_oracle(cron: str, zone_name: str, start: dt.datetime, minutes: int) -> None:
    definition, zone = CronPartitionDef(cron, zone_name), ZoneInfo(zone_name)
    expected = oracle_ticks(cron, zone, start, minutes)
    if not expected:
        return
    keys = definition.range(expected[0], expected[-1])
    instants = [key.astimezone(UTC) for key in keys]
    assert instants == expected  # complete and contiguous: no tick dropped, none invented
    assert instants == sorted(set(instants))
    texts = [definition.format_key(key) for key in keys]
    assert len(set(texts)) == len(texts)
    for key, text in zip(keys, texts, strict=True):
        assert definition.normalize_key(key).astimezone(UTC) == key.astimezone(UTC)
        assert definition.key_identity(definition.normalize_key(key)) == definition.key_identity(key)
        parsed = definition.parse_key(text)
        assert parsed.astimezone(UTC) == key.astimezone(UTC) and parsed.utcoffset() == key.utcoffset()
        assert definition.format_key(parsed) == text
    assert definition.range(texts[0], texts[-1]) == keys


@FEW
@given(cron=st.sampled_from(EXPRESSIONS), window=windows(DST_ZONES))
def test_cron_range_around_clock_changes_is_every_tick_in_order_and_round_trips(cron, window):
    check_range_matches_oracle(cron, *window)


@FEW
@given(cron=st.sampled_from(EXPRESSIONS), window=windows(STEADY_ZONES))
def test_cron_range_in_a_zone_without_daylight_saving_is_every_tick_in_order(cron, window):
    check_range_matches_oracle(cron, *window)


@pytest.mark.parametrize("zone_name", DST_ZONES)
@FEW
@given(data=st.data())
def test_any_minute_near_a_clock_change_is_a_key_exactly_when_its_wall_time_matches(zone_name, data):
    cron = data.draw(st.sampled_from(EXPRESSIONS))
    moment = data.draw(st.sampled_from(clock_changes(zone_name))) + dt.timedelta(minutes=data.draw(st.integers(-180, 180)))
    definition, zone = CronPartitionDef(cron, zone_name), ZoneInfo(zone_name)
    if croniter.match(cron, moment.astimezone(zone).replace(tzinfo=None)):
        key = definition.normalize_key(moment)
        assert definition.parse_key(definition.format_key(key)).astimezone(UTC) == moment
    else:
        with pytest.raises(ValueError, match="not a tick"):
            definition.normalize_key(moment)


# Up to the last Monday whose week (any start day) still lies in the calendar.
mondays = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 26)).map(
    lambda day: day - dt.timedelta(days=day.weekday())
)


@FEW
@given(week_start=st.sampled_from(WEEKDAYS), monday=mondays)
def test_any_week_start_round_trips_through_its_text(week_start, monday):
    definition = WeeklyPartitionDef(week_start)
    day = monday + dt.timedelta(days=WEEKDAYS.index(week_start))
    text = definition.format_key(definition.normalize_key(day))
    assert len(text) == 10 and definition.parse_key(text) == day
    assert definition.format_key(definition.parse_key(text)) == text


@FEW
@given(week_start=st.sampled_from(WEEKDAYS), day=st.dates())
def test_any_day_is_a_week_key_exactly_when_it_starts_a_week(week_start, day):
    definition = WeeklyPartitionDef(week_start)
    if WEEKDAYS[day.weekday()] == week_start:
        assert definition.normalize_key(day.isoformat()) == day
    else:
        with pytest.raises(ValueError, match="first day of its week"):
            definition.normalize_key(day.isoformat())


@FEW
@given(week_start=st.sampled_from(WEEKDAYS), a=mondays, weeks=st.integers(0, 600))
def test_weekly_range_is_sorted_contiguous_and_normalized(week_start, a, weeks):
    definition = WeeklyPartitionDef(week_start)
    first = a + dt.timedelta(days=WEEKDAYS.index(week_start))
    weeks = min(weeks, (dt.date(9999, 12, 31).toordinal() - first.toordinal()) // 7)
    last = first + dt.timedelta(weeks=weeks)
    keys = definition.range(first.isoformat(), last.isoformat())
    assert len(keys) == weeks + 1 and keys[0] == first and keys[-1] == last
    assert all(b - a == dt.timedelta(days=7) for a, b in zip(keys, keys[1:], strict=False))
    assert all(definition.normalize_key(key) == key and type(key) is dt.date for key in keys)
    texts = [definition.format_key(key) for key in keys]
    assert texts == sorted(texts)  # the text sorts as the weeks do
