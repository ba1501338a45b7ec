"""Offset, fan-out, dimension and time-zone roll-up mappers: canonical text, inverses and daylight-saving days.

Properties (hypothesis): each mapper's two questions answer each other (an
upstream key concerns exactly the consumer keys whose requirement names it),
fan-out and roll-up of one period are inverse, and the whole-hour walk of a
roll-up window visits the instants a quarter-hour walk does in zones with
hour, half-hour and quarter-hour offsets.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import partita as p
from partita.errors import DefinitionError
from partita.partitions.mappers import _whole_hours

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Asia/Kathmandu", "UTC"]
DAYS = p.DatePartitionDef(start="2020-01-01", end="2030-12-31")
days_in_range = st.dates(min_value=dt.date(2020, 1, 1), max_value=dt.date(2030, 12, 31))


def _inverse(mapper, upstream, downstream, consumer_key):
    """Every upstream key the consumer key needs concerns that consumer key."""
    for upstream_key in mapper.requirement(consumer_key, upstream, downstream).keys:
        assert consumer_key in mapper.downstream_keys(upstream_key, upstream, downstream)


@settings(max_examples=60, deadline=None)
@given(day=days_in_range, start=st.integers(-5, 2), width=st.integers(0, 4))
def test_an_offset_names_the_keys_from_start_to_end_offset_and_answers_its_inverse(day, start, width):
    mapper = p.OffsetMapper(start_offset=start, end_offset=start + width)
    key = DAYS.format_key(day)
    needed = mapper.requirement(key, DAYS, DAYS).keys
    expected = [day + dt.timedelta(days=step) for step in range(start, start + width + 1)]
    assert needed == tuple(DAYS.format_key(d) for d in expected if DAYS.start <= d <= DAYS.end)
    _inverse(mapper, DAYS, DAYS, key)
    assert mapper.one_upstream_key is (width == 0)


@pytest.mark.parametrize(
    ("definition", "key", "previous"),
    [
        (p.HourlyPartitionDef("Europe/Berlin"), "2026-03-29T03", "2026-03-29T01"),  # 02:00 does not exist
        (p.HourlyPartitionDef("Europe/Berlin"), "2026-10-25T02+01:00", "2026-10-25T02"),  # the repeated hour
        (p.HourlyPartitionDef("Europe/Berlin"), "2026-10-25T03", "2026-10-25T02+01:00"),
        (p.WeeklyPartitionDef("sunday"), "2026-12-06", "2026-11-29"),
        (p.MonthlyPartitionDef(), "2026-01", "2025-12"),
    ],
)
def test_a_lag_of_one_steps_one_key_back_in_elapsed_time(definition, key, previous):
    mapper = p.OffsetMapper(-1)
    assert mapper.requirement(key, definition, definition).keys == (previous,)
    assert mapper.downstream_keys(previous, definition, definition) == (key,)


def test_offsets_drop_keys_outside_the_bounds_and_refuse_bad_settings():
    days = p.DatePartitionDef(start="2026-01-01")
    assert p.OffsetMapper(-1).requirement("2026-01-01", days, days).keys == ()
    assert p.OffsetMapper(start_offset=-2, end_offset=0).width == 3
    for call, message in [
        (lambda: p.OffsetMapper(), "needs an offset"),
        (lambda: p.OffsetMapper(-1, end_offset=0), "not both"),
        (lambda: p.OffsetMapper(start_offset=1, end_offset=0), "start_offset must not be after end_offset"),
        (lambda: p.OffsetMapper(1.5), "offset must be a whole number"),
        (lambda: p.OffsetMapper(True), "offset must be a whole number"),
    ]:
        with pytest.raises(DefinitionError, match=message):
            call()
    assert "same kind" in p.OffsetMapper(-1).fit_error(days, p.MonthlyPartitionDef())
    with pytest.raises(ValueError, match="daily, hourly, weekly or monthly"):
        p.OffsetMapper(-1).requirement("a", p.StaticPartitionDef("s", ["a"]), p.StaticPartitionDef("s", ["a"]))


@settings(max_examples=40, deadline=None)
@given(day=days_in_range, zone=st.sampled_from(ZONES))
def test_fan_out_and_roll_up_of_a_day_are_inverse_in_every_zone(day, zone):
    hours = p.HourlyPartitionDef(zone)
    key = DAYS.format_key(day)
    fanned = p.FanOutMapper().downstream_keys(key, DAYS, hours)
    assert fanned == p.RollupMapper("day").requirement(key, hours, DAYS).keys
    assert 23 <= len(fanned) <= 25
    for hour in fanned:
        assert p.FanOutMapper().requirement(hour, DAYS, hours).keys == (key,)
        assert p.RollupMapper("day").downstream_keys(hour, hours, DAYS) == (key,)


@pytest.mark.parametrize(("day", "count"), [("2026-03-29", 23), ("2026-10-25", 25), ("2026-06-01", 24)])
def test_a_berlin_day_fans_out_to_its_23_24_or_25_hours(day, count):
    assert len(p.FanOutMapper().downstream_keys(day, DAYS, p.HourlyPartitionDef("Europe/Berlin"))) == count


def test_fan_out_to_days_of_weeks_and_months_and_its_fit():
    weeks, months = p.WeeklyPartitionDef("monday"), p.MonthlyPartitionDef()
    assert p.FanOutMapper().requirement("2026-12-03", weeks, DAYS).keys == ("2026-11-30",)
    assert len(p.FanOutMapper().downstream_keys("2026-11-30", weeks, DAYS)) == 7
    assert p.FanOutMapper().requirement("2026-02-14", months, DAYS).keys == ("2026-02",)
    assert len(p.FanOutMapper().downstream_keys("2026-02", months, DAYS)) == 28
    assert "must be finer" in p.FanOutMapper().fit_error(DAYS, months)
    assert "daily, weekly, monthly or hourly upstream" in p.FanOutMapper().fit_error(p.StaticPartitionDef("s", ["a"]), DAYS)


def _quarter_hour_walk(first, stop, zone):
    """The reference: every quarter hour, kept where the wall clock shows a whole hour."""
    found, current = [], first
    while current < stop:
        local = current.astimezone(zone)
        if local.minute == 0:
            found.append(local)
        current += dt.timedelta(minutes=15)
    return found


@settings(max_examples=80, deadline=None)
@given(day=days_in_range, zone=st.sampled_from(ZONES), span=st.integers(1, 3))
def test_the_whole_hour_walk_visits_what_a_quarter_hour_walk_visits(day, zone, span):
    tz = ZoneInfo(zone)
    first = dt.datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(dt.UTC)
    stop = first + dt.timedelta(days=span)
    assert _whole_hours(first, stop, tz) == _quarter_hour_walk(first, stop, tz)


def test_a_roll_up_in_another_zone_draws_berlin_days_over_utc_hours():
    utc = p.HourlyPartitionDef("UTC")
    mapper = p.RollupMapper("day", timezone="Europe/Berlin")
    needed = mapper.requirement("2026-03-29", utc, DAYS).keys
    assert (needed[0], needed[-1], len(needed)) == ("2026-03-28T23", "2026-03-29T21", 23)
    assert mapper.downstream_keys("2026-03-28T23", utc, DAYS) == ("2026-03-29",)
    assert mapper.downstream_keys("2026-03-28T22", utc, DAYS) == ("2026-03-28",)
    assert mapper.describe() == "RollupMapper('day', timezone='Europe/Berlin')"
    assert "needs an hourly or cron upstream" in mapper.fit_error(DAYS, DAYS)
    with pytest.raises(DefinitionError, match="RollupMapper timezone"):
        p.RollupMapper("day", timezone="Mars/Olympus")


@settings(max_examples=40, deadline=None)
@given(day=days_in_range, zone=st.sampled_from(ZONES))
def test_a_roll_up_in_another_zone_answers_its_inverse(day, zone):
    _inverse(p.RollupMapper("day", timezone=zone), p.HourlyPartitionDef("UTC"), DAYS, DAYS.format_key(day))


def test_max_missing_needs_all_but_that_many_and_at_least_one():
    mapper = p.RollupMapper("day", max_missing=2)
    needed = mapper.requirement("2026-06-01", p.HourlyPartitionDef("UTC"), DAYS)
    assert needed.needed() == 22 and needed.satisfied_with(22) and not needed.satisfied_with(21)
    assert p.Requirement(("a", "b"), max_missing=5).needed() == 1
    assert p.Requirement((), max_missing=5).needed() == 0
    assert mapper.describe() == "RollupMapper('day', max_missing=2)"
    with pytest.raises(DefinitionError, match="minimum or max_missing, not both"):
        p.RollupMapper("day", minimum=1, max_missing=1)
    with pytest.raises(DefinitionError, match="max_missing must be a whole number"):
        p.RollupMapper("day", max_missing=-1)


SEGMENTS = p.StaticPartitionDef("segments", ["retail", "wholesale", "online"])


def test_a_dimension_mapper_waits_for_every_segment_of_its_day():
    upstream = p.MultiPartitionDef({"date": DAYS, "segment": SEGMENTS})
    mapper = p.DimensionMapper("date")
    assert mapper.requirement("2026-06-01", upstream, DAYS).keys == (
        "2026-06-01|retail",
        "2026-06-01|wholesale",
        "2026-06-01|online",
    )
    assert mapper.downstream_keys("2026-06-01|online", upstream, DAYS) == ("2026-06-01",)
    hourly = p.MultiPartitionDef({"hour": p.HourlyPartitionDef("UTC"), "segment": SEGMENTS})
    rolled = p.DimensionMapper("hour", p.RollupMapper("day")).requirement("2026-06-01", hourly, DAYS).keys
    assert len(rolled) == 72 and rolled[0] == "2026-06-01T00|retail"
    assert "every other dimension must be static" in p.DimensionMapper("segment").fit_error(upstream, SEGMENTS)
    assert "no dimension" not in (p.DimensionMapper("region").fit_error(upstream, DAYS) or "")
    assert "with a dimension 'region'" in p.DimensionMapper("region").fit_error(upstream, DAYS)
    with pytest.raises(DefinitionError, match="dimension must be the name"):
        p.DimensionMapper("")


@settings(max_examples=40, deadline=None)
@given(day=days_in_range)
def test_a_dimension_mapper_answers_its_inverse(day):
    upstream = p.MultiPartitionDef({"date": DAYS, "segment": SEGMENTS})
    _inverse(p.DimensionMapper("date"), upstream, DAYS, DAYS.format_key(day))
