"""Weekly partition definitions (SPEC §3): keys are the first day of each week."""

from __future__ import annotations

import datetime as dt

import pytest

from partita import DefinitionError, PartitionDef, WeeklyPartitionDef


def assert_rejected_without_echo(definition: PartitionDef, key: object) -> str:
    with pytest.raises(ValueError) as info:
        definition.normalize_key(key)
    message = str(info.value)
    assert message
    if isinstance(key, str) and key.strip():
        assert key not in message
    elif isinstance(key, dt.date):
        assert str(key) not in message and repr(key) not in message
    return message


def test_weekly_definition_publishes_its_contract():
    definition = WeeklyPartitionDef()
    assert definition.kind == "weekly"
    assert definition.domain == "week:monday"
    assert definition.key_format.startswith("YYYY-MM-DD")
    assert definition.supports_range is True
    assert definition.week_start == "monday"
    assert isinstance(definition, PartitionDef)


@pytest.mark.parametrize("name", ["Sunday", "SUNDAY", "sunday", " sunday "])
def test_week_start_accepts_a_day_name_in_any_case(name):
    definition = WeeklyPartitionDef(week_start=name)
    assert definition.week_start == "sunday"
    assert definition.domain == "week:sunday"


@pytest.mark.parametrize("name", ["sun", "mon", "", "funday", 0, None, "monday,sunday"])
def test_week_start_other_than_a_day_name_is_a_definition_error_naming_the_field(name):
    with pytest.raises(DefinitionError, match="week_start"):
        WeeklyPartitionDef(week_start=name)


def test_week_key_is_the_first_day_of_its_week_as_date_and_text():
    definition = WeeklyPartitionDef()
    key = definition.parse_key("2026-11-30")  # a Monday
    assert key == dt.date(2026, 11, 30) and type(key) is dt.date
    assert definition.format_key(key) == "2026-11-30"
    assert definition.normalize_key(dt.date(2026, 11, 30)) == key


@pytest.mark.parametrize("key", ["2026-12-01", dt.date(2026, 12, 1), dt.date(2026, 12, 6)])
def test_a_day_that_does_not_start_a_week_is_rejected_without_echoing_it(key):
    message = assert_rejected_without_echo(WeeklyPartitionDef(), key)
    assert "first day of its week" in message and "monday" in message


def test_the_same_day_is_a_key_for_weeks_starting_that_day_only():
    sunday = dt.date(2026, 11, 29)
    assert WeeklyPartitionDef("sunday").normalize_key(sunday) == sunday
    assert_rejected_without_echo(WeeklyPartitionDef("monday"), sunday)


@pytest.mark.parametrize("text", ["2026-11-30T00", "2026-W49", "2026-11-3", "30.11.2026", "2026-11-30 ", "２０２６-11-30"])
def test_non_canonical_week_text_is_rejected_without_echoing_it(text):
    assert "canonical" in assert_rejected_without_echo(WeeklyPartitionDef(), text)


def test_invalid_calendar_week_text_is_rejected():
    assert "valid calendar date" in assert_rejected_without_echo(WeeklyPartitionDef(), "2026-02-30")


@pytest.mark.parametrize("value", [dt.datetime(2026, 11, 30), 20261130, None, ("2026-11-30",)])
def test_datetime_or_wrong_type_is_rejected_as_a_week_key(value):
    with pytest.raises(ValueError, match="week partition key"):
        WeeklyPartitionDef().normalize_key(value)


def test_weekly_range_is_inclusive_and_steps_a_week():
    keys = WeeklyPartitionDef().range("2026-11-30", dt.date(2026, 12, 21))
    assert keys == (dt.date(2026, 11, 30), dt.date(2026, 12, 7), dt.date(2026, 12, 14), dt.date(2026, 12, 21))


def test_weekly_range_across_a_year_end_keeps_the_weekday():
    keys = WeeklyPartitionDef("thursday").range("2026-12-24", "2027-01-14")
    assert [key.isoformat() for key in keys] == ["2026-12-24", "2026-12-31", "2027-01-07", "2027-01-14"]
    assert {key.weekday() for key in keys} == {3}


def test_reversed_weekly_range_is_rejected():
    with pytest.raises(ValueError, match="start is later than end"):
        WeeklyPartitionDef().range("2026-12-07", "2026-11-30")


def test_weekly_range_with_an_endpoint_that_is_not_a_week_start_is_rejected():
    with pytest.raises(ValueError, match="range end is invalid"):
        WeeklyPartitionDef().range("2026-11-30", "2026-12-08")


def test_weekly_bounds_are_inclusive_and_reject_weeks_outside_them():
    definition = WeeklyPartitionDef(start="2026-11-02", end="2026-11-30")
    assert definition.normalize_key("2026-11-02") == dt.date(2026, 11, 2)
    assert definition.normalize_key("2026-11-30") == dt.date(2026, 11, 30)
    assert "earlier than the definition's start" in assert_rejected_without_echo(definition, "2026-10-26")
    assert "later than the definition's end" in assert_rejected_without_echo(definition, "2026-12-07")
    with pytest.raises(ValueError):
        definition.range("2026-10-26", "2026-11-30")


def test_weekly_bound_that_is_not_a_week_start_is_a_definition_error():
    with pytest.raises(DefinitionError, match="bound is invalid"):
        WeeklyPartitionDef(start="2026-11-03")


def test_weekly_definition_with_start_after_end_is_a_definition_error():
    with pytest.raises(DefinitionError, match="start is later than end"):
        WeeklyPartitionDef(start="2026-12-07", end="2026-11-30")


def test_weekly_definitions_share_a_key_contract_only_with_the_same_week_start():
    assert WeeklyPartitionDef("Monday").key_contract() == WeeklyPartitionDef(start="2026-11-30").key_contract()
    assert WeeklyPartitionDef("monday").key_contract() != WeeklyPartitionDef("sunday").key_contract()


def test_weekly_describe_is_json_safe_and_names_the_week_start():
    description = WeeklyPartitionDef("friday", start="2026-12-04").describe()
    assert description["week_start"] == "friday"
    assert description["start"] == "2026-12-04" and description["end"] is None
    assert description["domain"] == "week:friday"


def test_weeks_at_the_calendar_edges_are_keys():
    definition = WeeklyPartitionDef()  # 0001-01-01 is a Monday
    assert definition.range("0001-01-01", "0001-01-08") == (dt.date(1, 1, 1), dt.date(1, 1, 8))
    last = WeeklyPartitionDef("friday").range("9999-12-24", "9999-12-31")
    assert last[-1] == dt.date(9999, 12, 31)
