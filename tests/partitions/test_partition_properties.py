"""Property tests: canonical text round-trips and ranges are complete (SPEC §3)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partita import (
    DatePartitionDef,
    HourlyPartitionDef,
    MonthlyPartitionDef,
    MultiPartitionDef,
    MultiPartitionKey,
    StaticPartitionDef,
)

UTC = dt.UTC
START = dt.date(2000, 1, 1)
END = dt.date(2099, 12, 31)
WHOLE_HOUR_ZONES = ["UTC", "Europe/Berlin", "America/New_York"]

# UTC instants on the hour; 1980+ avoids historical local-mean-time offsets.
utc_hours = st.datetimes(min_value=dt.datetime(1980, 1, 1), max_value=dt.datetime(2100, 1, 1)).map(
    lambda naive: naive.replace(minute=0, second=0, microsecond=0, tzinfo=UTC)
)
months = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 1)).map(lambda d: d.replace(day=1))
REGIONS = ["eu", "us", "apac", "0", "a.b-c"]


def month_index(value: dt.date) -> int:
    return value.year * 12 + value.month - 1


@given(st.dates(min_value=START, max_value=END))
def test_any_date_in_bounds_round_trips_through_its_text(value):
    definition = DatePartitionDef(start=START, end=END)
    text = definition.format_key(definition.normalize_key(value))
    assert len(text) == 10
    parsed = definition.parse_key(text)
    assert parsed == value
    assert type(parsed) is dt.date
    assert definition.format_key(parsed) == text


@given(st.dates())
def test_any_date_round_trips_without_bounds(value):
    definition = DatePartitionDef()
    assert definition.parse_key(definition.format_key(value)) == value


@given(st.dates().filter(lambda d: not START <= d <= END))
def test_any_date_outside_bounds_is_rejected(value):
    definition = DatePartitionDef(start=START, end=END)
    with pytest.raises(ValueError):
        definition.normalize_key(value)
    with pytest.raises(ValueError):
        definition.parse_key(value.isoformat())


@given(st.dates(), st.dates())
def test_date_range_length_is_days_between_endpoints_plus_one(a, b):
    first, last = min(a, b), max(a, b)
    if (last - first).days > 2000:
        last = first + dt.timedelta(days=2000)
    keys = DatePartitionDef().range(first.isoformat(), last.isoformat())
    assert len(keys) == (last - first).days + 1
    assert keys[0] == first and keys[-1] == last
    assert all(type(key) is dt.date for key in keys)
    assert all(b - a == dt.timedelta(days=1) for a, b in zip(keys, keys[1:], strict=False))


@given(st.dates(), st.dates())
def test_reversed_date_range_is_always_rejected(a, b):
    if a == b:
        return
    with pytest.raises(ValueError):
        DatePartitionDef().range(max(a, b), min(a, b))


@given(months)
def test_any_month_round_trips_through_its_text(value):
    definition = MonthlyPartitionDef()
    text = definition.format_key(definition.normalize_key(value))
    assert len(text) == 7
    assert definition.parse_key(text) == value
    assert definition.format_key(definition.parse_key(text)) == text


@given(months, months)
def test_month_range_length_is_months_between_endpoints_plus_one(a, b):
    first, last = min(a, b), max(a, b)
    keys = MonthlyPartitionDef().range(first, last)
    assert len(keys) == month_index(last) - month_index(first) + 1
    assert keys[0] == first and keys[-1] == last
    assert all(key.day == 1 and type(key) is dt.date for key in keys)
    assert [month_index(key) for key in keys] == list(range(month_index(first), month_index(last) + 1))


@pytest.mark.parametrize("timezone", WHOLE_HOUR_ZONES)
@given(instant=utc_hours)
def test_any_utc_hour_round_trips_through_its_text(timezone, instant):
    definition = HourlyPartitionDef(timezone)
    key = definition.normalize_key(instant)
    assert key.astimezone(UTC) == instant
    text = definition.format_key(key)
    parsed = definition.parse_key(text)
    assert parsed == key
    assert parsed.utcoffset() == key.utcoffset()
    assert parsed.astimezone(UTC) == instant
    assert definition.format_key(parsed) == text
    assert definition.key_identity(parsed) == definition.key_identity(key)


@pytest.mark.parametrize("timezone", WHOLE_HOUR_ZONES)
@given(start=utc_hours, length=st.integers(min_value=0, max_value=80))
def test_every_hour_in_a_range_round_trips_and_has_unique_text(timezone, start, length):
    definition = HourlyPartitionDef(timezone)
    end = start + dt.timedelta(hours=length)
    keys = definition.range(start, end)
    assert len(keys) == length + 1
    assert keys[0].astimezone(UTC) == start
    assert keys[-1].astimezone(UTC) == end
    texts = [definition.format_key(key) for key in keys]
    assert len(set(texts)) == len(texts)
    assert len({definition.key_identity(key) for key in keys}) == len(keys)
    for key, text in zip(keys, texts, strict=True):
        parsed = definition.parse_key(text)
        assert parsed == key
        assert parsed.utcoffset() == key.utcoffset()
    # Ranges given as text select the same hours.
    assert definition.range(texts[0], texts[-1]) == keys


@given(
    instant=st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2100, 1, 1)).map(
        lambda naive: naive.replace(minute=0, second=0, microsecond=0, tzinfo=UTC)
    ),
    half=st.booleans(),
)
def test_any_local_hour_round_trips_in_a_half_hour_dst_zone(instant, half):
    # Lord Howe shifts its clocks by 30 minutes, so local hours start on :00 or :30 UTC.
    definition = HourlyPartitionDef("Australia/Lord_Howe")
    zone = ZoneInfo("Australia/Lord_Howe")
    candidate = instant + dt.timedelta(minutes=30 if half else 0)
    if candidate.astimezone(zone).minute != 0:
        with pytest.raises(ValueError):
            definition.normalize_key(candidate)
        return
    key = definition.normalize_key(candidate)
    text = definition.format_key(key)
    parsed = definition.parse_key(text)
    assert parsed.astimezone(UTC) == candidate
    assert parsed.utcoffset() == key.utcoffset()
    assert definition.format_key(parsed) == text


@given(
    day=st.dates(min_value=START, max_value=END),
    region=st.sampled_from(REGIONS),
    instant=utc_hours,
)
def test_any_multi_key_round_trips_through_its_text(day, region, instant):
    definition = MultiPartitionDef(
        {
            "date": DatePartitionDef(),
            "region": StaticPartitionDef("regions", REGIONS),
            "hour": HourlyPartitionDef("Europe/Berlin"),
        }
    )
    key = definition.normalize_key({"hour": instant, "region": region, "date": day})
    assert list(key) == ["date", "region", "hour"]
    text = definition.format_key(key)
    assert text.count("|") == 2
    parsed = definition.parse_key(text)
    assert isinstance(parsed, MultiPartitionKey)
    assert parsed == key
    assert parsed["hour"].utcoffset() == key["hour"].utcoffset()
    assert definition.format_key(parsed) == text
    assert definition.key_identity(parsed) == definition.key_identity(key)
