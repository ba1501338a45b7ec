"""Keys and ranges at the edges of the calendar (years 1 and 9999) (SPEC §3).

``datetime`` cannot represent an instant before 0001-01-01 or after
9999-12-31 in UTC, so an hour at either edge of a zone away from UTC has no
instant: it is rejected with the definition's ValueError, never an
OverflowError. A range may end on the last representable key.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partita import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef

ZONES = ["UTC", "Europe/Berlin", "America/Los_Angeles", "Pacific/Kiritimati", "Australia/Lord_Howe"]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Tokyo"])
def test_the_first_hour_of_the_calendar_east_of_utc_is_a_value_error(zone: str):
    definition = HourlyPartitionDef(zone)
    with pytest.raises(ValueError, match="outside the calendar"):
        definition.parse_key("0001-01-01T00")
    with pytest.raises(ValueError, match="outside the calendar"):
        definition.normalize_key(dt.datetime(1, 1, 1, tzinfo=ZoneInfo(zone)))


def test_the_last_hour_of_the_calendar_west_of_utc_is_a_value_error():
    with pytest.raises(ValueError, match="outside the calendar"):
        HourlyPartitionDef("America/Los_Angeles").parse_key("9999-12-31T23")


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Pacific/Kiritimati"])
def test_an_hourly_range_ending_on_the_last_representable_hour_is_complete(zone: str):
    keys = HourlyPartitionDef(zone).range("9999-12-31T00", "9999-12-31T23")
    assert len(keys) == 24
    assert keys[-1].hour == 23


def test_daily_and_monthly_ranges_ending_on_the_last_day_are_complete():
    assert DatePartitionDef().range("9999-12-30", "9999-12-31")[-1] == dt.date(9999, 12, 31)
    assert MonthlyPartitionDef().range("9999-11", "9999-12")[-1] == dt.date(9999, 12, 1)


@settings(max_examples=200, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    year=st.sampled_from([1, 2, 9998, 9999]),
    month=st.sampled_from([1, 12]),
    day=st.sampled_from([1, 31]),
    hour=st.integers(0, 23),
)
def test_an_hour_at_the_calendar_edges_is_a_key_or_a_value_error(zone: str, year: int, month: int, day: int, hour: int):
    definition = HourlyPartitionDef(zone)
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}"
    try:
        key = definition.parse_key(text)
    except ValueError:
        return
    assert definition.format_key(key) == text
    assert definition.range(text, text) == (key,)
