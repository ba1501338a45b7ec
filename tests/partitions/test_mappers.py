"""Partition mappers (SPEC §12): identity, roll-ups (DST-aware), allowed keys, fixed key, product."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import partita as p
from partita.errors import DefinitionError
from partita.partitions.mappers import Requirement

BERLIN = p.HourlyPartitionDef("Europe/Berlin")
NEW_YORK = p.HourlyPartitionDef("America/New_York")
UTC_HOURS = p.HourlyPartitionDef("UTC")
DAYS = p.DatePartitionDef()
MONTHS = p.MonthlyPartitionDef()
REGIONS = p.StaticPartitionDef("regions", ["eu", "us"])


# -- identity ------------------------------------------------------------------


def test_identity_maps_key_to_same_canonical_key() -> None:
    mapper = p.IdentityMapper()
    assert mapper.downstream_keys("2024-01-05", DAYS, DAYS) == ("2024-01-05",)
    assert mapper.requirement("2024-01-05", DAYS, DAYS) == Requirement(("2024-01-05",))
    assert mapper.downstream_keys("eu", REGIONS, REGIONS) == ("eu",)


def test_identity_rejects_key_the_downstream_definition_rejects() -> None:
    with pytest.raises(ValueError):
        p.IdentityMapper().downstream_keys("asia", REGIONS, REGIONS)
    with pytest.raises(ValueError):
        p.IdentityMapper().downstream_keys("2024-13-01", DAYS, DAYS)


def test_identity_to_unpartitioned_consumer_is_an_error() -> None:
    with pytest.raises(ValueError):
        p.IdentityMapper().downstream_keys("eu", REGIONS, None)


# -- roll-ups and daylight saving ---------------------------------------------------


@pytest.mark.parametrize(
    ("hours", "day", "count"),
    [
        (BERLIN, "2024-03-31", 23),
        (BERLIN, "2024-10-27", 25),
        (BERLIN, "2024-06-15", 24),
        (NEW_YORK, "2024-03-10", 23),
        (NEW_YORK, "2024-11-03", 25),
        (NEW_YORK, "2024-07-04", 24),
        (UTC_HOURS, "2024-03-31", 24),
    ],
)
def test_daily_rollup_of_hours_counts_wall_clock_hours(hours: p.HourlyPartitionDef, day: str, count: int) -> None:
    requirement = p.RollupMapper("day").requirement(day, hours, DAYS)
    assert len(requirement.keys) == count
    assert len(set(requirement.keys)) == count
    assert requirement.minimum is None
    for key in requirement.keys:
        assert hours.format_key(hours.parse_key(key)) == key
        assert p.RollupMapper("day").downstream_keys(key, hours, DAYS) == (day,)


def test_berlin_fall_back_day_has_both_repeated_hours() -> None:
    keys = p.RollupMapper("day").requirement("2024-10-27", BERLIN, DAYS).keys
    assert "2024-10-27T02" in keys
    assert "2024-10-27T02+01:00" in keys
    assert keys[0] == "2024-10-27T00" and keys[-1] == "2024-10-27T23"


def test_berlin_spring_forward_day_skips_missing_hour() -> None:
    keys = p.RollupMapper("day").requirement("2024-03-31", BERLIN, DAYS).keys
    assert "2024-03-31T02" not in keys
    assert "2024-03-31T01" in keys and "2024-03-31T03" in keys


def test_week_rollup() -> None:
    mapper = p.RollupMapper("week")
    # 2024-01-01 is a Monday.
    assert mapper.downstream_keys("2024-01-07", DAYS, DAYS) == ("2024-01-01",)
    assert mapper.downstream_keys("2024-01-08", DAYS, DAYS) == ("2024-01-08",)
    keys = mapper.requirement("2024-01-01", DAYS, DAYS).keys
    assert keys == tuple(f"2024-01-0{i}" for i in range(1, 8))


def test_week_rollup_with_sunday_start() -> None:
    mapper = p.RollupMapper("week", week_start=6)
    assert mapper.downstream_keys("2024-01-03", DAYS, DAYS) == ("2023-12-31",)


def test_week_rollup_of_berlin_hours_across_dst_switch() -> None:
    # The week of Monday 2024-03-25 contains the 23-hour day 2024-03-31.
    keys = p.RollupMapper("week").requirement("2024-03-25", BERLIN, DAYS).keys
    assert len(keys) == 7 * 24 - 1


@pytest.mark.parametrize(("month", "days"), [("2024-02", 29), ("2023-02", 28), ("2024-12", 31), ("2024-04", 30)])
def test_month_rollup_of_days_to_monthly(month: str, days: int) -> None:
    mapper = p.RollupMapper("month")
    keys = mapper.requirement(month, DAYS, MONTHS).keys
    assert len(keys) == days
    assert all(mapper.downstream_keys(key, DAYS, MONTHS) == (month,) for key in keys)


def test_month_rollup_to_daily_consumer_is_first_of_month() -> None:
    assert p.RollupMapper("month").downstream_keys("2024-02-15", DAYS, DAYS) == ("2024-02-01",)


def test_month_rollup_of_berlin_hours_in_march() -> None:
    assert len(p.RollupMapper("month").requirement("2024-03", BERLIN, MONTHS).keys) == 31 * 24 - 1


@pytest.mark.parametrize(("quarter", "days"), [("2024-01-01", 91), ("2024-04-01", 91), ("2024-07-01", 92), ("2024-10-01", 92)])
def test_quarter_rollup(quarter: str, days: int) -> None:
    mapper = p.RollupMapper("quarter")
    assert len(mapper.requirement(quarter, DAYS, DAYS).keys) == days
    assert mapper.downstream_keys("2024-11-30", DAYS, DAYS) == ("2024-10-01",)


def test_year_rollup() -> None:
    mapper = p.RollupMapper("year")
    assert len(mapper.requirement("2024-01-01", DAYS, DAYS).keys) == 366
    assert len(mapper.requirement("2023-01-01", DAYS, DAYS).keys) == 365
    assert mapper.requirement("2024-01", MONTHS, MONTHS).keys == tuple(f"2024-{m:02d}" for m in range(1, 13))
    assert mapper.downstream_keys("2024-07", MONTHS, MONTHS) == ("2024-01",)


def test_hour_rollup_identity_like() -> None:
    assert p.RollupMapper("hour").downstream_keys("2024-03-31T03", BERLIN, BERLIN) == ("2024-03-31T03",)


def test_rollup_minimum() -> None:
    requirement = p.RollupMapper("day", minimum=20).requirement("2024-03-31", BERLIN, DAYS)
    assert requirement.minimum == 20
    assert not requirement.satisfied_by(set(requirement.keys[:19]))
    assert requirement.satisfied_by(set(requirement.keys[:20]))


def test_requirement_all_keys_needed_without_minimum() -> None:
    requirement = p.RollupMapper("day").requirement("2024-10-27", BERLIN, DAYS)
    assert not requirement.satisfied_by(set(requirement.keys[:-1]))
    assert requirement.satisfied_by(set(requirement.keys))


def test_rollup_needs_two_definitions() -> None:
    with pytest.raises(ValueError):
        p.RollupMapper("day").downstream_keys("2024-01-01", None, DAYS)
    with pytest.raises(ValueError):
        p.RollupMapper("day").requirement("2024-01-01", DAYS, None)


def test_daily_rollup_of_hours_in_half_hour_offset_zone() -> None:
    kolkata = p.HourlyPartitionDef("Asia/Kolkata")
    assert len(p.RollupMapper("day").requirement("2024-03-31", kolkata, DAYS).keys) == 24


def test_daily_rollup_of_hours_with_bounded_upstream() -> None:
    bounded = p.HourlyPartitionDef("Europe/Berlin", start="2024-01-01T00")
    assert len(p.RollupMapper("day").requirement("2024-03-31", bounded, DAYS).keys) == 23


def test_daily_rollup_first_day_waits_only_for_hours_after_the_upstream_start() -> None:
    bounded = p.HourlyPartitionDef("Europe/Berlin", start="2024-01-01T12")
    keys = p.RollupMapper("day").requirement("2024-01-01", bounded, DAYS).keys
    assert keys == tuple(f"2024-01-01T{hour:02d}" for hour in range(12, 24))


# -- allowed keys, fixed key, product -----------------------------------------------


def test_allowed_keys_collection() -> None:
    mapper = p.AllowedKeysMapper(["eu"])
    assert mapper.downstream_keys("eu", REGIONS, REGIONS) == ("eu",)
    assert mapper.downstream_keys("us", REGIONS, REGIONS) == ()
    assert mapper.requirement("eu", REGIONS, REGIONS).keys == ("eu",)


def test_allowed_keys_predicate_with_inner_rollup() -> None:
    weekdays = p.AllowedKeysMapper(lambda key: dt.date.fromisoformat(key).weekday() < 5, p.RollupMapper("week"))
    assert weekdays.downstream_keys("2024-01-06", DAYS, DAYS) == ()  # Saturday
    assert weekdays.downstream_keys("2024-01-05", DAYS, DAYS) == ("2024-01-01",)
    assert weekdays.requirement("2024-01-01", DAYS, DAYS).keys == tuple(f"2024-01-0{i}" for i in range(1, 6))


def test_fixed_key() -> None:
    mapper = p.FixedKeyMapper("eu")
    assert mapper.downstream_keys("2024-01-01", DAYS, REGIONS) == ("eu",)
    requirement = mapper.requirement("eu", DAYS, REGIONS)
    assert requirement.keys == ()
    assert p.FixedKeyMapper().downstream_keys("2024-01-01", DAYS, None) == ("",)


def test_fixed_key_rejected_by_definition() -> None:
    with pytest.raises(ValueError):
        p.FixedKeyMapper("asia").downstream_keys("2024-01-01", DAYS, REGIONS)


def test_product_mapper_per_dimension() -> None:
    upstream = p.MultiPartitionDef({"date": BERLIN, "region": REGIONS})
    downstream = p.MultiPartitionDef({"date": DAYS, "region": REGIONS})
    mapper = p.ProductMapper({"date": p.RollupMapper("day")})
    assert mapper.downstream_keys("2024-03-31T05|eu", upstream, downstream) == ("2024-03-31|eu",)
    keys = mapper.requirement("2024-03-31|us", upstream, downstream).keys
    assert len(keys) == 23
    assert all(key.endswith("|us") for key in keys)
    for key in keys:
        assert upstream.format_key(upstream.parse_key(key)) == key


def test_product_mapper_needs_multi_definitions() -> None:
    with pytest.raises(ValueError):
        p.ProductMapper({"date": p.IdentityMapper()}).downstream_keys("2024-01-01", DAYS, DAYS)


# -- bad declarations ---------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: p.RollupMapper("fortnight"),
        lambda: p.RollupMapper("day", minimum=0),
        lambda: p.RollupMapper("day", minimum=True),
        lambda: p.RollupMapper("day", minimum=1.5),
        lambda: p.RollupMapper("week", week_start=7),
        lambda: p.AllowedKeysMapper("eu"),
        lambda: p.AllowedKeysMapper(42),
        lambda: p.FixedKeyMapper(""),
        lambda: p.FixedKeyMapper(3),
        lambda: p.ProductMapper({}),
        lambda: p.ProductMapper({"date": "day"}),
        lambda: p.ProductMapper([("date", p.IdentityMapper())]),
    ],
)
def test_bad_declarations_are_definition_errors(build: object) -> None:
    with pytest.raises(DefinitionError):
        build()  # type: ignore[operator]


# -- properties ---------------------------------------------------------------------

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "America/Santiago"]
moments = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2035, 12, 31), timezones=st.just(dt.UTC))
days = st.dates(min_value=dt.date(2000, 1, 1), max_value=dt.date(2035, 12, 31))


@settings(max_examples=60, deadline=None)
@given(moment=moments, zone=st.sampled_from(ZONES), period=st.sampled_from(["day", "week", "month", "quarter", "year"]))
def test_property_hourly_key_maps_into_requirement(moment: dt.datetime, zone: str, period: str) -> None:
    hours = p.HourlyPartitionDef(zone)
    downstream = MONTHS if period in ("month", "quarter", "year") and moment.minute % 2 else DAYS
    local = moment.astimezone(ZoneInfo(zone)).replace(minute=0, second=0, microsecond=0)
    try:
        key = hours.format_key(hours.normalize_key(local.astimezone(dt.UTC)))
    except ValueError:
        assume(False)  # never for whole-hour zones
    assert hours.format_key(hours.parse_key(key)) == key
    mapper = p.RollupMapper(period)
    (down,) = mapper.downstream_keys(key, hours, downstream)
    assert downstream.format_key(downstream.parse_key(down)) == down
    requirement = mapper.requirement(down, hours, downstream)
    assert key in requirement.keys
    assert len(set(requirement.keys)) == len(requirement.keys)
    if period == "day":
        assert 22 <= len(requirement.keys) <= 26


@settings(max_examples=60, deadline=None)
@given(day=days, period=st.sampled_from(["day", "week", "month", "quarter", "year"]), week_start=st.integers(0, 6))
def test_property_daily_key_maps_into_requirement(day: dt.date, period: str, week_start: int) -> None:
    key = DAYS.format_key(day)
    assert DAYS.format_key(DAYS.parse_key(key)) == key
    mapper = p.RollupMapper(period, week_start=week_start)
    (down,) = mapper.downstream_keys(key, DAYS, DAYS)
    requirement = mapper.requirement(down, DAYS, DAYS)
    assert key in requirement.keys
    assert requirement.keys[0] == down
    assert list(requirement.keys) == sorted(requirement.keys)


@settings(max_examples=40, deadline=None)
@given(day=days, region=st.sampled_from(["eu", "us"]))
def test_property_identity_allowed_and_product_round_trip(day: dt.date, region: str) -> None:
    key = DAYS.format_key(day)
    (down,) = p.IdentityMapper().downstream_keys(key, DAYS, DAYS)
    assert down == key and key in p.IdentityMapper().requirement(down, DAYS, DAYS).keys
    allowed = p.AllowedKeysMapper(lambda text: True)
    assert allowed.downstream_keys(key, DAYS, DAYS) == (key,)
    assert key in allowed.requirement(key, DAYS, DAYS).keys
    multi = p.MultiPartitionDef({"date": DAYS, "region": REGIONS})
    multi_key = multi.format_key(multi.parse_key(f"{key}|{region}"))
    product = p.ProductMapper({"date": p.RollupMapper("month")})
    (down_multi,) = product.downstream_keys(multi_key, multi, multi)
    assert multi.format_key(multi.parse_key(down_multi)) == down_multi
    assert multi_key in product.requirement(down_multi, multi, multi).keys


@settings(max_examples=40, deadline=None)
@given(moment=moments, zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]))
def test_property_hour_identity_round_trip(moment: dt.datetime, zone: str) -> None:
    hours = p.HourlyPartitionDef(zone)
    key = hours.format_key(hours.normalize_key(moment.replace(minute=0, second=0, microsecond=0)))
    assert p.IdentityMapper().downstream_keys(key, hours, hours) == (key,)
    (down,) = p.RollupMapper("hour").downstream_keys(key, hours, hours)
    assert key in p.RollupMapper("hour").requirement(down, hours, hours).keys
