"""Time partition definitions (SPEC §3, §14): days, wall-clock hours, months."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from partita import (
    DatePartitionDef,
    DefinitionError,
    HourlyPartitionDef,
    MonthlyPartitionDef,
    PartitionDef,
)

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")


def assert_rejected_without_echo(definition: PartitionDef, key: object) -> ValueError:
    """normalize_key rejects the key with a ValueError that does not repeat it."""
    with pytest.raises(ValueError) as info:
        definition.normalize_key(key)
    message = str(info.value)
    assert message, "a rejection must explain the rule"
    if isinstance(key, str) and key.strip():
        assert key not in message
        assert key.strip() not in message
    elif not isinstance(key, str | bool | int | type(None)):
        assert repr(key) not in message
        assert str(key) not in message
    return info.value


# --------------------------------------------------------------------------- date


def test_date_definition_publishes_its_contract():
    definition = DatePartitionDef()
    assert definition.domain == "date"
    assert definition.key_format == "YYYY-MM-DD"
    assert definition.supports_range is True
    assert isinstance(definition, PartitionDef)


def test_canonical_date_text_is_accepted_and_normalized_to_a_date():
    key = DatePartitionDef().normalize_key("2026-08-08")
    assert key == dt.date(2026, 8, 8)
    assert type(key) is dt.date


def test_date_value_is_accepted_unchanged():
    assert DatePartitionDef().normalize_key(dt.date(2026, 8, 8)) == dt.date(2026, 8, 8)


def test_date_parse_key_and_format_key_round_trip():
    definition = DatePartitionDef()
    key = definition.parse_key("2026-02-28")
    assert key == dt.date(2026, 2, 28)
    assert definition.format_key(key) == "2026-02-28"


def test_leap_day_is_a_valid_date_key():
    assert DatePartitionDef().normalize_key("2024-02-29") == dt.date(2024, 2, 29)


@pytest.mark.parametrize(
    "text",
    [
        "2026-8-8",
        "2026-08-8",
        "2026-8-08",
        "20260808",
        "2026/08/08",
        "08-08-2026",
        "2026-08-08T00",
        "2026-08-08T00:00:00",
        "2026-08-08 00:00",
        " 2026-08-08",
        "2026-08-08 ",
        "2026-08-08\n",
        "\t2026-08-08",
        "+2026-08-08",
        "12026-08-08",
        "2026-08",
        "",
        "   ",
        "today",
    ],
)
def test_non_canonical_date_text_is_rejected_without_echoing_it(text):
    assert_rejected_without_echo(DatePartitionDef(), text)


@pytest.mark.parametrize(
    "text",
    [
        "\u0662\u0660\u0662\u0666-\u0660\u0668-\u0660\u0668",  # Arabic-Indic digits
        "\uff12\uff10\uff12\uff16-08-08",  # full-width digits
    ],
)
def test_date_text_with_non_ascii_digits_is_rejected(text):
    assert_rejected_without_echo(DatePartitionDef(), text)


@pytest.mark.parametrize("text", ["2026-02-29", "2026-02-30", "2026-13-01", "2026-00-10", "2026-04-31", "0000-01-01"])
def test_invalid_calendar_date_text_is_rejected_without_echoing_it(text):
    error = assert_rejected_without_echo(DatePartitionDef(), text)
    assert "calendar" in str(error)


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(2026, 8, 8),
        dt.datetime(2026, 8, 8, tzinfo=UTC),
        dt.datetime(2026, 8, 8, 13, 45),
    ],
)
def test_datetime_offered_as_a_date_key_is_rejected(value):
    error = assert_rejected_without_echo(DatePartitionDef(), value)
    assert "datetime" in str(error)


@pytest.mark.parametrize(
    "value",
    [None, 20260808, 2026.0, True, False, b"2026-08-08", ["2026-08-08"], ("2026", "08", "08"), {"date": "x"}, object()],
)
def test_wrong_type_is_rejected_as_a_date_key(value):
    assert_rejected_without_echo(DatePartitionDef(), value)


def test_date_key_before_start_is_rejected_without_echoing_it():
    definition = DatePartitionDef(start="2026-01-01")
    assert_rejected_without_echo(definition, "2025-12-31")
    assert_rejected_without_echo(definition, dt.date(2025, 12, 31))


def test_date_key_after_end_is_rejected_without_echoing_it():
    definition = DatePartitionDef(end=dt.date(2026, 12, 31))
    assert_rejected_without_echo(definition, "2027-01-01")


def test_date_bounds_are_inclusive():
    definition = DatePartitionDef(start="2026-01-01", end="2026-01-31")
    assert definition.normalize_key("2026-01-01") == dt.date(2026, 1, 1)
    assert definition.normalize_key("2026-01-31") == dt.date(2026, 1, 31)
    assert definition.start == dt.date(2026, 1, 1)
    assert definition.end == dt.date(2026, 1, 31)


def test_date_definition_with_equal_start_and_end_has_one_key():
    definition = DatePartitionDef(start="2026-01-01", end="2026-01-01")
    assert definition.range("2026-01-01", "2026-01-01") == (dt.date(2026, 1, 1),)


def test_date_definition_with_start_after_end_is_a_definition_error():
    with pytest.raises(DefinitionError):
        DatePartitionDef(start="2026-02-01", end="2026-01-01")


@pytest.mark.parametrize("bound", ["2026-8-8", dt.datetime(2026, 8, 8), 20260808])
def test_invalid_date_bound_is_a_definition_error(bound):
    with pytest.raises(DefinitionError):
        DatePartitionDef(start=bound)
    with pytest.raises(DefinitionError):
        DatePartitionDef(end=bound)


def test_date_range_is_inclusive_and_returns_normalized_dates():
    keys = DatePartitionDef().range("2026-02-27", "2026-03-02")
    assert keys == (
        dt.date(2026, 2, 27),
        dt.date(2026, 2, 28),
        dt.date(2026, 3, 1),
        dt.date(2026, 3, 2),
    )
    assert all(type(key) is dt.date for key in keys)
    assert isinstance(keys, tuple)


def test_date_range_accepts_date_values_and_text_mixed():
    assert DatePartitionDef().range(dt.date(2025, 12, 31), "2026-01-01") == (dt.date(2025, 12, 31), dt.date(2026, 1, 1))


def test_date_range_of_one_day_has_one_key():
    assert DatePartitionDef().range("2026-08-08", "2026-08-08") == (dt.date(2026, 8, 8),)


def test_reversed_date_range_is_rejected():
    with pytest.raises(ValueError):
        DatePartitionDef().range("2026-08-09", "2026-08-08")


@pytest.mark.parametrize("start,end", [("2026-8-1", "2026-08-02"), ("2026-08-01", "2026-8-2"), (dt.datetime(2026, 8, 1), "2026-08-02")])
def test_date_range_with_a_non_canonical_endpoint_is_rejected_without_echoing_it(start, end):
    with pytest.raises(ValueError) as info:
        DatePartitionDef().range(start, end)
    for endpoint in (start, end):
        assert str(endpoint) not in str(info.value)


def test_date_range_reaching_outside_bounds_is_rejected():
    definition = DatePartitionDef(start="2026-01-01", end="2026-01-31")
    with pytest.raises(ValueError):
        definition.range("2025-12-31", "2026-01-05")
    with pytest.raises(ValueError):
        definition.range("2026-01-25", "2026-02-01")
    assert len(definition.range("2026-01-01", "2026-01-31")) == 31


def test_date_describe_is_json_safe_and_reports_bounds_as_text():
    description = DatePartitionDef(start="2026-01-01").describe()
    assert description["kind"] == DatePartitionDef.kind
    assert description["domain"] == "date"
    assert description["supports_range"] is True
    assert description["start"] == "2026-01-01"
    assert description["end"] is None


# --------------------------------------------------------------------------- month


def test_month_definition_publishes_its_contract():
    definition = MonthlyPartitionDef()
    assert definition.domain == "month"
    assert definition.key_format == "YYYY-MM"
    assert definition.supports_range is True


def test_canonical_month_text_is_normalized_to_the_first_of_the_month():
    key = MonthlyPartitionDef().normalize_key("2026-08")
    assert key == dt.date(2026, 8, 1)
    assert type(key) is dt.date


def test_month_key_formats_as_year_and_month():
    definition = MonthlyPartitionDef()
    assert definition.format_key(dt.date(2026, 8, 1)) == "2026-08"
    assert definition.format_key(definition.parse_key("0001-01")) == "0001-01"


def test_first_of_month_date_is_a_month_key():
    assert MonthlyPartitionDef().normalize_key(dt.date(2026, 2, 1)) == dt.date(2026, 2, 1)


@pytest.mark.parametrize("day", [2, 15, 28])
def test_month_key_must_be_the_first_of_the_month(day):
    assert_rejected_without_echo(MonthlyPartitionDef(), dt.date(2026, 2, day))


@pytest.mark.parametrize(
    "text",
    ["2026-8", "202608", "2026-08-01", "2026/08", " 2026-08", "2026-08 ", "2026-13", "2026-00", "0000-05", "", "Aug 2026"],
)
def test_non_canonical_or_invalid_month_text_is_rejected_without_echoing_it(text):
    assert_rejected_without_echo(MonthlyPartitionDef(), text)


def test_month_text_with_non_ascii_digits_is_rejected():
    assert_rejected_without_echo(MonthlyPartitionDef(), "\uff12\uff10\uff12\uff16-08")


@pytest.mark.parametrize("value", [dt.datetime(2026, 8, 1), dt.datetime(2026, 8, 1, tzinfo=UTC), None, 202608, [2026, 8]])
def test_datetime_or_wrong_type_is_rejected_as_a_month_key(value):
    assert_rejected_without_echo(MonthlyPartitionDef(), value)


def test_month_bounds_reject_out_of_range_keys():
    definition = MonthlyPartitionDef(start="2026-01", end="2026-06")
    assert definition.normalize_key("2026-01") == dt.date(2026, 1, 1)
    assert definition.normalize_key("2026-06") == dt.date(2026, 6, 1)
    assert_rejected_without_echo(definition, "2025-12")
    assert_rejected_without_echo(definition, "2026-07")


def test_month_definition_with_start_after_end_is_a_definition_error():
    with pytest.raises(DefinitionError):
        MonthlyPartitionDef(start="2026-02", end="2026-01")


def test_month_range_across_years_is_inclusive_and_ordered():
    keys = MonthlyPartitionDef().range("2025-11", "2026-02")
    assert keys == (dt.date(2025, 11, 1), dt.date(2025, 12, 1), dt.date(2026, 1, 1), dt.date(2026, 2, 1))
    assert all(type(key) is dt.date for key in keys)


def test_month_range_across_several_years_has_one_key_per_month():
    keys = MonthlyPartitionDef().range("2023-12", "2026-01")
    assert len(keys) == 26
    assert [MonthlyPartitionDef().format_key(key) for key in keys[:3]] == ["2023-12", "2024-01", "2024-02"]
    assert keys[-1] == dt.date(2026, 1, 1)


def test_reversed_month_range_is_rejected():
    with pytest.raises(ValueError):
        MonthlyPartitionDef().range("2026-02", "2026-01")


def test_month_range_with_a_mid_month_date_is_rejected():
    with pytest.raises(ValueError):
        MonthlyPartitionDef().range(dt.date(2026, 1, 15), "2026-03")


# --------------------------------------------------------------------------- hour


def test_hourly_definition_defaults_to_utc():
    definition = HourlyPartitionDef()
    assert definition.timezone == "UTC"
    assert definition.domain == "hour:UTC"
    assert definition.supports_range is True
    assert definition.key_format == "YYYY-MM-DDTHH"


@pytest.mark.parametrize("timezone", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
def test_hourly_domain_names_the_time_zone(timezone):
    assert HourlyPartitionDef(timezone).domain == f"hour:{timezone}"
    assert HourlyPartitionDef(timezone=timezone).describe()["timezone"] == timezone


@pytest.mark.parametrize("timezone", ["Mars/Olympus_Mons", "Europe/Berlin ", "", "../etc/passwd", None, 5])
def test_unknown_time_zone_is_a_definition_error(timezone):
    with pytest.raises(DefinitionError) as info:
        HourlyPartitionDef(timezone)
    if isinstance(timezone, str) and timezone.strip():
        assert timezone not in str(info.value)


def test_canonical_utc_hour_text_is_accepted_as_an_aware_datetime():
    key = HourlyPartitionDef().normalize_key("2026-08-08T05")
    assert key == dt.datetime(2026, 8, 8, 5, tzinfo=UTC)
    assert key.utcoffset() == dt.timedelta(0)
    assert HourlyPartitionDef().format_key(key) == "2026-08-08T05"


@pytest.mark.parametrize(
    "text",
    [
        "2026-08-08T5",
        "2026-8-08T05",
        "2026-08-08 05",
        "2026-08-08t05",
        "2026-08-08T05:00",
        "2026-08-08T05:00:00",
        "2026-08-08T05Z",
        "2026-08-08T05+00:00",
        "2026-08-08T05+0000",
        "2026-08-08",
        "2026080805",
        " 2026-08-08T05",
        "2026-08-08T05 ",
        "2026-08-08T05\n",
        "",
    ],
)
def test_non_canonical_utc_hour_text_is_rejected_without_echoing_it(text):
    assert_rejected_without_echo(HourlyPartitionDef(), text)


@pytest.mark.parametrize("text", ["2026-08-08T24", "2026-02-30T00", "2026-13-01T00"])
def test_invalid_calendar_hour_text_is_rejected_without_echoing_it(text):
    assert_rejected_without_echo(HourlyPartitionDef(), text)


def test_hour_text_with_non_ascii_digits_is_rejected():
    assert_rejected_without_echo(HourlyPartitionDef(), "2026-08-08T\uff10\uff15")


def test_naive_datetime_is_rejected_as_an_hourly_key():
    error = assert_rejected_without_echo(HourlyPartitionDef(), dt.datetime(2026, 8, 8, 5))
    assert "aware" in str(error)


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(2026, 8, 8, 5, 30, tzinfo=UTC),
        dt.datetime(2026, 8, 8, 5, 0, 1, tzinfo=UTC),
        dt.datetime(2026, 8, 8, 5, 0, 0, 1, tzinfo=UTC),
    ],
)
def test_datetime_not_on_the_hour_is_rejected(value):
    assert_rejected_without_echo(HourlyPartitionDef(), value)


@pytest.mark.parametrize("value", [None, dt.date(2026, 8, 8), 1786165200, 1786165200.0, b"2026-08-08T05", ["2026-08-08T05"]])
def test_wrong_type_is_rejected_as_an_hourly_key(value):
    assert_rejected_without_echo(HourlyPartitionDef(), value)


def test_aware_datetime_in_another_zone_is_normalized_to_the_definition_zone():
    definition = HourlyPartitionDef("Europe/Berlin")
    key = definition.normalize_key(dt.datetime(2026, 8, 8, 0, tzinfo=UTC))
    assert key.tzinfo == BERLIN
    assert (key.year, key.month, key.day, key.hour) == (2026, 8, 8, 2)
    assert key.utcoffset() == dt.timedelta(hours=2)
    assert definition.format_key(key) == "2026-08-08T02"


def test_aware_datetime_with_fixed_offset_is_normalized_to_the_definition_zone():
    definition = HourlyPartitionDef("UTC")
    key = definition.normalize_key(dt.datetime(2026, 8, 8, 7, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert definition.format_key(key) == "2026-08-08T05"
    assert key.utcoffset() == dt.timedelta(0)


def test_utc_instant_that_is_not_a_local_hour_start_is_rejected_in_a_half_hour_zone():
    definition = HourlyPartitionDef("Asia/Kolkata")
    assert_rejected_without_echo(definition, dt.datetime(2026, 8, 8, 5, tzinfo=UTC))
    key = definition.normalize_key(dt.datetime(2026, 8, 8, 5, 30, tzinfo=UTC))
    assert definition.format_key(key) == "2026-08-08T11"


def test_hourly_bounds_reject_out_of_range_keys():
    definition = HourlyPartitionDef(start="2026-08-08T02", end="2026-08-08T05")
    assert definition.normalize_key("2026-08-08T02") == dt.datetime(2026, 8, 8, 2, tzinfo=UTC)
    assert definition.normalize_key("2026-08-08T05") == dt.datetime(2026, 8, 8, 5, tzinfo=UTC)
    assert_rejected_without_echo(definition, "2026-08-08T01")
    assert_rejected_without_echo(definition, "2026-08-08T06")
    assert_rejected_without_echo(definition, dt.datetime(2026, 8, 8, 6, tzinfo=UTC))


def test_hourly_bounds_compare_instants_not_wall_clock_text():
    definition = HourlyPartitionDef("Europe/Berlin", end="2026-10-25T02")
    assert definition.normalize_key("2026-10-25T02") is not None
    # The repeated hour's second occurrence is one hour after the first.
    assert_rejected_without_echo(definition, "2026-10-25T02+01:00")


def test_naive_hourly_bound_is_a_definition_error():
    with pytest.raises(DefinitionError):
        HourlyPartitionDef(start=dt.datetime(2026, 8, 8, 2))


def test_hourly_definition_with_start_after_end_is_a_definition_error():
    with pytest.raises(DefinitionError):
        HourlyPartitionDef(start="2026-08-08T03", end="2026-08-08T02")


def test_utc_hourly_range_is_inclusive():
    definition = HourlyPartitionDef()
    keys = definition.range("2026-08-08T22", "2026-08-09T01")
    assert [definition.format_key(key) for key in keys] == [
        "2026-08-08T22",
        "2026-08-08T23",
        "2026-08-09T00",
        "2026-08-09T01",
    ]
    assert all(key.utcoffset() == dt.timedelta(0) for key in keys)


def test_reversed_hourly_range_is_rejected():
    with pytest.raises(ValueError):
        HourlyPartitionDef().range("2026-08-08T02", "2026-08-08T01")


def test_hourly_range_outside_bounds_is_rejected():
    definition = HourlyPartitionDef(start="2026-08-08T00", end="2026-08-08T23")
    with pytest.raises(ValueError):
        definition.range("2026-08-07T23", "2026-08-08T02")


# --------------------------------------------------------------------------- DST


def test_spring_forward_gap_hour_text_is_rejected_in_berlin():
    definition = HourlyPartitionDef("Europe/Berlin")
    error = assert_rejected_without_echo(definition, "2026-03-29T02")
    assert "exist" in str(error)


def test_hours_around_the_spring_forward_gap_are_accepted_in_berlin():
    definition = HourlyPartitionDef("Europe/Berlin")
    before = definition.parse_key("2026-03-29T01")
    after = definition.parse_key("2026-03-29T03")
    assert before.utcoffset() == dt.timedelta(hours=1)
    assert after.utcoffset() == dt.timedelta(hours=2)
    assert after.astimezone(UTC) - before.astimezone(UTC) == dt.timedelta(hours=1)


def test_spring_forward_day_has_23_hourly_keys_in_berlin():
    definition = HourlyPartitionDef("Europe/Berlin")
    keys = definition.range("2026-03-29T00", "2026-03-29T23")
    texts = [definition.format_key(key) for key in keys]
    assert len(keys) == 23
    assert "2026-03-29T02" not in texts
    assert texts[:3] == ["2026-03-29T00", "2026-03-29T01", "2026-03-29T03"]


def test_spring_forward_gap_hour_as_datetime_in_the_definition_zone_is_rejected():
    definition = HourlyPartitionDef("Europe/Berlin")
    assert_rejected_without_echo(definition, dt.datetime(2026, 3, 29, 2, tzinfo=BERLIN))


def test_fall_back_day_has_25_hourly_keys_in_berlin():
    definition = HourlyPartitionDef("Europe/Berlin")
    keys = definition.range("2026-10-25T00", "2026-10-25T23")
    assert len(keys) == 25
    texts = [definition.format_key(key) for key in keys]
    assert len(set(texts)) == 25
    assert texts[1:5] == ["2026-10-25T01", "2026-10-25T02", "2026-10-25T02+01:00", "2026-10-25T03"]


def test_repeated_hour_second_occurrence_has_offset_text_and_round_trips():
    definition = HourlyPartitionDef("Europe/Berlin")
    second = definition.parse_key("2026-10-25T02+01:00")
    assert second.utcoffset() == dt.timedelta(hours=1)
    assert second.astimezone(UTC) == dt.datetime(2026, 10, 25, 1, tzinfo=UTC)
    assert definition.format_key(second) == "2026-10-25T02+01:00"
    again = definition.parse_key(definition.format_key(second))
    assert again.astimezone(UTC) == second.astimezone(UTC)
    assert again.utcoffset() == second.utcoffset()


def test_repeated_hour_first_occurrence_has_plain_text_and_round_trips():
    definition = HourlyPartitionDef("Europe/Berlin")
    first = definition.parse_key("2026-10-25T02")
    assert first.utcoffset() == dt.timedelta(hours=2)
    assert first.astimezone(UTC) == dt.datetime(2026, 10, 25, 0, tzinfo=UTC)
    assert definition.format_key(first) == "2026-10-25T02"


def test_repeated_hour_second_occurrence_from_an_aware_datetime_gets_offset_text():
    definition = HourlyPartitionDef("Europe/Berlin")
    key = definition.normalize_key(dt.datetime(2026, 10, 25, 1, tzinfo=UTC))
    assert definition.format_key(key) == "2026-10-25T02+01:00"
    same = definition.normalize_key(dt.datetime(2026, 10, 25, 2, tzinfo=BERLIN, fold=1))
    assert definition.format_key(same) == "2026-10-25T02+01:00"


def test_key_identity_keeps_the_two_occurrences_of_a_repeated_hour_apart():
    definition = HourlyPartitionDef("Europe/Berlin")
    first = definition.parse_key("2026-10-25T02")
    second = definition.parse_key("2026-10-25T02+01:00")
    assert first.astimezone(UTC) != second.astimezone(UTC)
    assert definition.key_identity(first) != definition.key_identity(second)
    assert len({definition.key_identity(key) for key in (first, second, first, second)}) == 2


def test_key_identity_is_equal_for_the_same_hour_reached_from_different_inputs():
    definition = HourlyPartitionDef("Europe/Berlin")
    from_text = definition.parse_key("2026-08-08T02")
    from_utc = definition.normalize_key(dt.datetime(2026, 8, 8, 0, tzinfo=UTC))
    assert definition.key_identity(from_text) == definition.key_identity(from_utc)


@pytest.mark.parametrize(
    "text",
    [
        "2026-10-25T02+02:00",  # first occurrence never carries an offset
        "2026-10-25T03+01:00",  # not a repeated hour
        "2026-10-25T02+03:00",
        "2026-10-25T02-01:00",
        "2026-10-25T02+01:30",
        "2026-08-08T02+02:00",
        "2026-10-25T02+1:00",
        "2026-10-25T02+0100",
        "2026-10-25T02 +01:00",
    ],
)
def test_offset_text_other_than_the_repeated_hours_second_occurrence_is_rejected(text):
    assert_rejected_without_echo(HourlyPartitionDef("Europe/Berlin"), text)


def test_repeated_hour_in_a_negative_offset_zone_uses_signed_offset_text():
    definition = HourlyPartitionDef("America/New_York")
    keys = definition.range("2026-11-01T00", "2026-11-01T03")
    texts = [definition.format_key(key) for key in keys]
    assert texts == ["2026-11-01T00", "2026-11-01T01", "2026-11-01T01-05:00", "2026-11-01T02", "2026-11-01T03"]
    second = definition.parse_key("2026-11-01T01-05:00")
    assert second.utcoffset() == dt.timedelta(hours=-5)
    assert definition.format_key(second) == "2026-11-01T01-05:00"


def test_repeated_hour_with_zero_offset_uses_plus_sign():
    definition = HourlyPartitionDef("Europe/London")
    second = definition.parse_key("2026-10-25T01+00:00")
    assert second.utcoffset() == dt.timedelta(0)
    assert definition.format_key(second) == "2026-10-25T01+00:00"


def test_repeated_hour_with_negative_zero_offset_text_is_rejected():
    assert_rejected_without_echo(HourlyPartitionDef("Europe/London"), "2026-10-25T01-00:00")


def test_hourly_range_crossing_a_fall_back_is_spaced_one_hour_apart_in_utc():
    definition = HourlyPartitionDef("Europe/Berlin")
    keys = definition.range("2026-10-24T22", "2026-10-25T05")
    instants = [key.astimezone(UTC) for key in keys]
    assert all(b - a == dt.timedelta(hours=1) for a, b in zip(instants, instants[1:], strict=False))
    assert all(key.tzinfo == BERLIN for key in keys)


def test_hourly_range_in_a_half_hour_dst_zone_yields_only_valid_local_hours():
    definition = HourlyPartitionDef("Australia/Lord_Howe")
    keys = definition.range("2026-10-04T00", "2026-10-04T05")
    assert all((key.minute, key.second) == (0, 0) for key in keys)
    texts = [definition.format_key(key) for key in keys]
    assert texts == ["2026-10-04T00", "2026-10-04T01", "2026-10-04T03", "2026-10-04T04", "2026-10-04T05"]
    for key in keys:
        assert definition.normalize_key(key) == key
