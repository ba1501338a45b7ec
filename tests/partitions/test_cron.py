"""Cron-defined time windows (SPEC §3): a key per tick, ISO text with its UTC offset."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from partita import CronPartitionDef, DefinitionError, HourlyPartitionDef, PartitionDef

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")


def texts(definition: CronPartitionDef, keys) -> list[str]:
    return [definition.format_key(key) for key in keys]


def assert_rejected_without_echo(definition: PartitionDef, key: object) -> str:
    with pytest.raises(ValueError) as info:
        definition.normalize_key(key)
    message = str(info.value)
    assert message
    if isinstance(key, str) and key.strip():
        assert key not in message
    elif isinstance(key, dt.datetime):
        assert str(key) not in message and repr(key) not in message and key.isoformat() not in message
    return message


# ----------------------------------------------------------------- the definition


def test_cron_definition_publishes_its_contract():
    definition = CronPartitionDef("*/15 * * * *", timezone="Europe/Berlin")
    assert definition.kind == "cron"
    assert definition.domain == "cron:*/15 * * * *@Europe/Berlin"
    assert definition.key_format.startswith("YYYY-MM-DDTHH:MM+HH:MM")
    assert definition.supports_range is True
    assert (definition.cron, definition.timezone) == ("*/15 * * * *", "Europe/Berlin")
    assert isinstance(definition, PartitionDef)


def test_cron_definition_defaults_to_utc_and_collapses_whitespace_in_its_domain():
    definition = CronPartitionDef("  0   6 * *  mon ")
    assert definition.timezone == "UTC"
    assert definition.domain == "cron:0 6 * * mon@UTC"


@pytest.mark.parametrize(
    ("cron", "rule"),
    [
        (None, "must be a string"),
        (15, "must be a string"),
        ("* * * *", "exactly five fields"),
        ("0 * * * * *", "exactly five fields"),
        ("@hourly", "exactly five fields"),
        ("61 * * * *", "not a valid cron expression"),
        ("0 25 * * *", "not a valid cron expression"),
        ("H * * * *", "hashed (H) or random (R)"),
        ("R 0 * * *", "hashed (H) or random (R)"),
        ("0 H/2 * * *", "hashed (H) or random (R)"),
        ("0 0 31 2 *", "never fires"),
    ],
)
def test_a_bad_cron_expression_is_a_definition_error_naming_the_field_and_the_rule(cron, rule):
    with pytest.raises(DefinitionError, match="CronPartitionDef cron") as info:
        CronPartitionDef(cron)
    assert rule in str(info.value)


def test_day_and_month_names_are_not_mistaken_for_hashed_values():
    assert CronPartitionDef("0 0 * * THU").domain == "cron:0 0 * * THU@UTC"
    assert CronPartitionDef("0 0 1 MAR *").normalize_key("2027-03-01T00:00+00:00").month == 3


@pytest.mark.parametrize("timezone", ["", "Mars/Olympus", "../etc/passwd", None, 1])
def test_an_unknown_time_zone_is_a_definition_error_naming_the_field(timezone):
    with pytest.raises(DefinitionError, match="CronPartitionDef timezone"):
        CronPartitionDef("0 * * * *", timezone=timezone)


def test_definitions_share_a_key_contract_only_with_the_same_expression_and_zone():
    base = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    assert base.key_contract() == CronPartitionDef("*/15  * * * *", "Europe/Berlin", start="2026-01-01T00:00+01:00").key_contract()
    assert base.key_contract() != CronPartitionDef("*/15 * * * *", "Europe/Paris").key_contract()
    assert base.key_contract() != CronPartitionDef("*/30 * * * *", "Europe/Berlin").key_contract()


def test_cron_describe_is_json_safe_and_reports_bounds_as_text():
    description = CronPartitionDef("0 6 * * *", "America/New_York", start="2026-03-01T06:00-05:00").describe()
    assert description["cron"] == "0 6 * * *" and description["timezone"] == "America/New_York"
    assert description["start"] == "2026-03-01T06:00-05:00" and description["end"] is None


# ----------------------------------------------------------------- keys and text


def test_canonical_text_parses_to_an_aware_datetime_in_the_zone_and_back():
    definition = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    key = definition.parse_key("2026-03-29T01:45+01:00")
    assert key == dt.datetime(2026, 3, 29, 0, 45, tzinfo=UTC)
    assert key.tzinfo == BERLIN
    assert definition.format_key(key) == "2026-03-29T01:45+01:00"


def test_an_instant_in_another_zone_is_normalized_to_the_definition_zone():
    definition = CronPartitionDef("30 9 * * *", "Asia/Kolkata")
    key = definition.normalize_key(dt.datetime(2026, 1, 5, 4, 0, tzinfo=UTC))
    assert definition.format_key(key) == "2026-01-05T09:30+05:30"


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-29T01:45",  # no offset
        "2026-03-29T01:45Z",
        "2026-03-29T01:45:00+01:00",  # seconds
        "2026-03-29T01+01:00",
        "2026-03-29 01:45+01:00",
        "2026-03-29T01:45+0100",
        "2026-3-29T01:45+01:00",
        "2026-03-29T01:45+01:00 ",
    ],
)
def test_non_canonical_text_is_rejected_without_echoing_it(text):
    message = assert_rejected_without_echo(CronPartitionDef("*/15 * * * *", "Europe/Berlin"), text)
    assert "canonical" in message


@pytest.mark.parametrize("text", ["2026-02-30T00:00+01:00", "2026-01-01T24:00+01:00", "2026-01-01T00:60+01:00"])
def test_invalid_calendar_text_is_rejected(text):
    message = assert_rejected_without_echo(CronPartitionDef("* * * * *", "Europe/Berlin"), text)
    assert "valid calendar minute" in message


@pytest.mark.parametrize("text", ["2026-01-01T00:00+02:00", "2026-07-01T00:00+01:00", "2026-01-01T00:00+24:00"])
def test_text_with_an_offset_the_zone_does_not_have_then_is_rejected(text):
    message = assert_rejected_without_echo(CronPartitionDef("* * * * *", "Europe/Berlin"), text)
    assert "offset" in message


def test_a_zero_offset_is_written_with_a_plus_sign_only():
    definition = CronPartitionDef("0 * * * *")
    assert definition.format_key(definition.parse_key("2026-01-01T00:00+00:00")) == "2026-01-01T00:00+00:00"
    assert "canonical" in assert_rejected_without_echo(definition, "2026-01-01T00:00-00:00")


@pytest.mark.parametrize(
    "instant",
    [dt.datetime(2026, 1, 1, 0, 5, tzinfo=UTC), dt.datetime(2026, 1, 1, 0, 15, 30, tzinfo=UTC), dt.datetime(2026, 1, 1, 0, 15, 0, 1, tzinfo=UTC)],
)
def test_an_instant_that_is_not_a_tick_is_rejected_without_echoing_it(instant):
    message = assert_rejected_without_echo(CronPartitionDef("*/15 * * * *"), instant)
    assert "not a tick" in message


def test_text_that_is_not_a_tick_is_rejected():
    assert "not a tick" in assert_rejected_without_echo(CronPartitionDef("0 6 * * mon"), "2026-12-01T06:00+00:00")


@pytest.mark.parametrize("value", [dt.datetime(2026, 1, 1), dt.date(2026, 1, 1), 1767225600, None])
def test_naive_datetimes_and_other_types_are_rejected(value):
    with pytest.raises(ValueError, match="cron partition keys"):
        CronPartitionDef("0 0 * * *").normalize_key(value)


def test_day_of_month_and_weekday_fields_select_either_as_in_cron():
    definition = CronPartitionDef("0 0 13 * fri")  # the 13th, and every Friday
    keys = texts(definition, definition.range("2026-11-13T00:00+00:00", "2026-11-27T00:00+00:00"))
    assert keys == ["2026-11-13T00:00+00:00", "2026-11-20T00:00+00:00", "2026-11-27T00:00+00:00"]
    assert definition.normalize_key("2026-12-13T00:00+00:00").weekday() == 6


# ----------------------------------------------------------------- ranges and bounds


def test_range_lists_every_tick_inclusive_in_order():
    definition = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    keys = definition.range("2026-06-01T10:00+02:00", "2026-06-01T11:00+02:00")
    assert texts(definition, keys) == [f"2026-06-01T{hm}+02:00" for hm in ("10:00", "10:15", "10:30", "10:45", "11:00")]
    assert definition.range(keys[0], keys[0]) == (keys[0],)


def test_reversed_range_is_rejected():
    definition = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    with pytest.raises(ValueError, match="range start is later than end"):
        definition.range("2026-06-01T11:00+02:00", "2026-06-01T10:00+02:00")


def test_range_endpoint_that_is_not_a_tick_is_rejected_naming_the_end():
    with pytest.raises(ValueError, match="range end is invalid: .*not a tick"):
        CronPartitionDef("*/15 * * * *").range("2026-06-01T10:00+00:00", "2026-06-01T10:20+00:00")


def test_bounds_are_inclusive_and_compared_as_instants():
    definition = CronPartitionDef("0 */6 * * *", "America/New_York", start="2026-01-01T00:00-05:00", end="2026-01-02T00:00-05:00")
    assert definition.normalize_key(dt.datetime(2026, 1, 1, 5, tzinfo=UTC)) == definition.start
    assert "earlier than the definition's start" in assert_rejected_without_echo(definition, "2025-12-31T18:00-05:00")
    assert "later than the definition's end" in assert_rejected_without_echo(definition, "2026-01-02T06:00-05:00")
    assert len(definition.range(definition.start, definition.end)) == 5


def test_bad_bounds_are_definition_errors():
    with pytest.raises(DefinitionError, match="bound is invalid"):
        CronPartitionDef("0 0 * * *", start="2026-01-01T00:30+00:00")
    with pytest.raises(DefinitionError, match="start is later than end"):
        CronPartitionDef("0 0 * * *", start="2026-01-02T00:00+00:00", end="2026-01-01T00:00+00:00")


def test_a_sparse_expression_ranges_over_years():
    definition = CronPartitionDef("0 0 29 2 *", "Europe/Berlin")  # leap days only
    keys = definition.range("2024-02-29T00:00+01:00", "2032-02-29T00:00+01:00")
    assert [key.year for key in keys] == [2024, 2028, 2032]


def test_a_range_ending_on_the_last_minute_of_the_calendar_is_complete():
    definition = CronPartitionDef("*/30 23 31 12 *")
    keys = definition.range("9999-12-31T23:00+00:00", "9999-12-31T23:30+00:00")
    assert texts(definition, keys) == ["9999-12-31T23:00+00:00", "9999-12-31T23:30+00:00"]


def test_a_minute_outside_the_calendar_in_utc_is_a_value_error():
    with pytest.raises(ValueError, match="outside the calendar"):
        CronPartitionDef("* * * * *", "America/Los_Angeles").parse_key("9999-12-31T23:59-08:00")


# ----------------------------------------------------------------- daylight saving


def test_spring_forward_gap_has_no_ticks_in_berlin():
    definition = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    keys = definition.range("2026-03-29T01:30+01:00", "2026-03-29T03:15+02:00")
    assert texts(definition, keys) == [
        "2026-03-29T01:30+01:00", "2026-03-29T01:45+01:00", "2026-03-29T03:00+02:00", "2026-03-29T03:15+02:00",
    ]  # fmt: skip
    assert keys[2].astimezone(UTC) - keys[1].astimezone(UTC) == dt.timedelta(minutes=15)


def test_a_gap_wall_time_as_a_datetime_in_the_zone_is_rejected():
    definition = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    message = assert_rejected_without_echo(definition, dt.datetime(2026, 3, 29, 2, 15, tzinfo=BERLIN))
    assert "does not exist" in message


def test_a_daily_tick_in_the_gap_has_no_key_that_day():
    definition = CronPartitionDef("30 2 * * *", "Europe/Berlin")
    keys = definition.range("2026-03-28T02:30+01:00", "2026-03-30T02:30+02:00")
    assert texts(definition, keys) == ["2026-03-28T02:30+01:00", "2026-03-30T02:30+02:00"]


def test_fall_back_repeats_each_wall_time_once_per_occurrence_in_berlin():
    definition = CronPartitionDef("*/30 * * * *", "Europe/Berlin")
    keys = definition.range("2026-10-25T02:00+02:00", "2026-10-25T03:00+01:00")
    assert texts(definition, keys) == [
        "2026-10-25T02:00+02:00", "2026-10-25T02:30+02:00", "2026-10-25T02:00+01:00", "2026-10-25T02:30+01:00",
        "2026-10-25T03:00+01:00",
    ]  # fmt: skip
    instants = [key.astimezone(UTC) for key in keys]
    assert all(b - a == dt.timedelta(minutes=30) for a, b in zip(instants, instants[1:], strict=False))
    assert len({definition.key_identity(key) for key in keys}) == len(keys)


def test_a_daily_tick_in_the_repeated_hour_has_two_keys_that_day():
    definition = CronPartitionDef("30 1 * * *", "America/New_York")
    keys = definition.range("2026-11-01T01:30-04:00", "2026-11-01T01:30-05:00")
    assert texts(definition, keys) == ["2026-11-01T01:30-04:00", "2026-11-01T01:30-05:00"]


def test_the_second_occurrence_from_an_aware_datetime_keeps_its_offset():
    definition = CronPartitionDef("*/15 * * * *", "Europe/Berlin")
    second = dt.datetime(2026, 10, 25, 2, 15, tzinfo=BERLIN, fold=1)
    assert definition.format_key(definition.normalize_key(second)) == "2026-10-25T02:15+01:00"
    assert definition.key_identity(definition.normalize_key(second)) != definition.key_identity(
        definition.normalize_key(second.replace(fold=0))
    )


def test_half_hour_shift_in_lord_howe_keeps_ticks_on_the_local_wall_clock():
    definition = CronPartitionDef("0 * * * *", "Australia/Lord_Howe")
    keys = definition.range("2026-04-05T01:00+11:00", "2026-04-05T03:00+10:30")
    assert texts(definition, keys) == ["2026-04-05T01:00+11:00", "2026-04-05T02:00+10:30", "2026-04-05T03:00+10:30"]
    quarter = CronPartitionDef("*/15 * * * *", "Australia/Lord_Howe")
    repeated = quarter.range("2026-04-05T01:30+11:00", "2026-04-05T02:00+10:30")
    assert texts(quarter, repeated) == [
        "2026-04-05T01:30+11:00", "2026-04-05T01:45+11:00", "2026-04-05T01:30+10:30", "2026-04-05T01:45+10:30",
        "2026-04-05T02:00+10:30",
    ]  # fmt: skip


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"])
def test_hourly_expression_has_exactly_the_hourly_definitions_keys(zone):
    cron, hourly = CronPartitionDef("0 * * * *", zone), HourlyPartitionDef(zone)
    for first, last in ((dt.datetime(2026, 3, 1), dt.datetime(2026, 4, 15)), (dt.datetime(2026, 10, 1), dt.datetime(2026, 11, 15))):
        # Each stretch holds one of the zone's clock changes of 2026 (Lord Howe's are in April and October).
        start = hourly.normalize_key(first.replace(tzinfo=ZoneInfo(zone)))
        end = hourly.normalize_key(last.replace(tzinfo=ZoneInfo(zone)))
        expected = [key.astimezone(UTC) for key in hourly.range(start, end)]
        assert [key.astimezone(UTC) for key in cron.range(start, end)] == expected


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/Los_Angeles", "Pacific/Kiritimati", "Australia/Lord_Howe"])
@pytest.mark.parametrize(
    "text",
    ["0001-01-01T00:00", "0001-01-01T00:15", "0001-01-01T10:00", "9999-12-31T23:45", "9999-12-31T10:00", "9999-12-31T00:00"],
)
def test_a_minute_at_the_calendar_edges_is_a_key_or_a_value_error(zone, text):
    definition = CronPartitionDef("*/15 * * * *", zone)
    wall = dt.datetime.fromisoformat(text)
    for offset in ("+00:00", "-08:00", "+14:00", "+01:00", "+11:00", "+10:30"):
        try:
            key = definition.parse_key(text + offset)
        except ValueError:
            continue
        assert key.replace(tzinfo=None) == wall
        assert definition.range(key, key) == (key,)
        assert definition.recent_keys(key, 1)[-1].astimezone(UTC) == key.astimezone(UTC)
