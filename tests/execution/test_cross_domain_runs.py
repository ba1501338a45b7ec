"""Runs that span partition domains through mappers (SPEC §5, §17).

A daily attempt starts when all of its hours have succeeded and receives a
mapping of their outputs; one failed hour skips its day only. Each hour runs
once for two daily consumers. A roll-up with ``minimum`` runs on the hours
that succeeded. A running total reads its own previous day. Runs are
recorded per asset with each asset's own key text.
"""

from __future__ import annotations

import datetime as dt
import threading
from contextlib import closing
from pathlib import Path

import pytest

import partita as p
from partita.store.protocol import AttemptQuery

HOURS = p.HourlyPartitionDef("Europe/Berlin", start="2026-01-01T00")
DAYS = p.DatePartitionDef(start="2026-01-01")




def _registry(calls: list[str], *, failing: str | None = None, minimum: int | None = None) -> p.AssetRegistry:
    registry = p.AssetRegistry()
    lock = threading.Lock()

    @p.asset(partition_def=HOURS, registry=registry)
    def hourly_events(context):
        text = HOURS.format_key(context.partition_key)
        with lock:
            calls.append(text)
        if text == failing:
            raise RuntimeError("the feed was down")
        return context.partition_key.hour

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day", minimum=minimum)}, registry=registry)
    def daily_report(hourly_events):
        return sorted(HOURS.format_key(key) for key in hourly_events)

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day")}, registry=registry)
    def daily_sum(hourly_events):
        return sum(hourly_events.values())

    return registry


def test_each_day_receives_its_hours_and_each_hour_runs_once() -> None:
    calls: list[str] = []
    flow = p.Flow(["daily_report", "daily_sum"], registry=_registry(calls), max_concurrency=4)
    result = flow.run({"partition_range": ("2026-03-28", "2026-03-30")})
    assert result.status is p.RunStatus.SUCCESS
    assert len(calls) == len(set(calls)) == 71
    spring = result.output("daily_report", "2026-03-29")
    assert len(spring) == 23 and "2026-03-29T02" not in spring
    assert result.output("daily_sum", "2026-03-28") == sum(range(24))
    assert result.output("hourly_events", "2026-03-30T05") == 5


def test_a_failed_hour_skips_its_day_only() -> None:
    calls: list[str] = []
    flow = p.Flow(["daily_report"], registry=_registry(calls, failing="2026-01-02T07"))
    result = flow.run({"partition_range": ("2026-01-01", "2026-01-03")})
    assert result.status is p.RunStatus.FAILED
    attempts = {attempt.partition_key: attempt for attempt in result.tasks["daily_report"].attempts}
    blocked = attempts[dt.date(2026, 1, 2)]
    assert blocked.status is p.AttemptStatus.SKIPPED and blocked.reason is p.SkipReason.DEPENDENCY_FAILED
    assert [HOURS.format_key(upstream.partition_key) for upstream in blocked.blocked_by] == ["2026-01-02T07"]
    assert attempts[dt.date(2026, 1, 1)].status is attempts[dt.date(2026, 1, 3)].status is p.AttemptStatus.SUCCESS


def test_a_minimum_runs_the_day_on_the_hours_that_succeeded() -> None:
    calls: list[str] = []
    flow = p.Flow(["daily_report"], registry=_registry(calls, failing="2026-01-02T07", minimum=20))
    result = flow.run({"partition_keys": ["2026-01-02"]})
    report = result.output("daily_report", "2026-01-02")
    assert len(report) == 23 and "2026-01-02T07" not in report


def test_a_running_total_reads_its_own_previous_day_in_order() -> None:
    registry = p.AssetRegistry()
    seen: list[dt.date] = []

    @p.asset(partition_def=DAYS, registry=registry)
    def sales(context):
        return context.partition_key.day

    @p.asset(partition_def=DAYS, deps={"running_total": p.OffsetMapper(-1)}, registry=registry)
    def running_total(context, sales, running_total):
        seen.append(context.partition_key)
        return sales + (running_total or 0)

    result = p.Flow(["running_total"], registry=registry, max_concurrency=8).run(
        {"partition_range": ("2026-01-01", "2026-01-10")}
    )
    assert result.status is p.RunStatus.SUCCESS
    assert seen == sorted(seen)
    assert result.output("running_total", "2026-01-10") == sum(range(1, 11))


def test_a_failed_day_of_a_running_total_skips_every_later_day() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, deps={"running_total": p.OffsetMapper(-1)}, registry=registry)
    def running_total(context, running_total):
        if context.partition_key == dt.date(2026, 1, 3):
            raise ValueError("bad day")
        return 1 + (running_total or 0)

    result = p.Flow(["running_total"], registry=registry).run({"partition_range": ("2026-01-01", "2026-01-05")})
    statuses = [attempt.status for attempt in result.tasks["running_total"].attempts]
    assert statuses == [p.AttemptStatus.SUCCESS] * 2 + [p.AttemptStatus.FAILED] + [p.AttemptStatus.SKIPPED] * 2


def test_an_empty_selection_skips_every_domain() -> None:
    result = p.Flow(["daily_report"], registry=_registry([])).run({"empty_partitions": True})
    assert result.status is p.RunStatus.SUCCESS
    assert result.tasks["hourly_events"].attempts == () and result.tasks["daily_report"].attempts == ()


def test_a_recorded_run_keeps_each_assets_own_key_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    flow = p.Flow(["daily_report"], registry=_registry([]), store=url, record_partition_keys=True)
    result = flow.run({"partition_keys": ["2026-10-25"]})
    with closing(p.open_store(url)) as store:
        stored = store.get_run(result.run_id)
        attempts = store.list_attempts(result.run_id, AttemptQuery(limit=1000))
    keys: dict[str, list[str]] = {}
    for attempt in attempts:
        keys.setdefault(attempt.asset, []).append(attempt.partition_key)
    assert keys["daily_report"] == ["2026-10-25"]
    assert len(keys["hourly_events"]) == 25 and "2026-10-25T02+01:00" in keys["hourly_events"]
    assert stored.attempt_count == 26 and stored.plan["domains"][0]["attempt_count"] == 25


def test_materialized_days_over_materialized_hours_are_reused_by_the_next_run(tmp_path: Path) -> None:
    registry = p.AssetRegistry()
    files = p.FileMaterialization(tmp_path / "outputs")
    bodies: list[str] = []

    @p.asset(partition_def=HOURS, materialization=files, version="1", registry=registry)
    def hourly_events(context):
        bodies.append("hour")
        return 1

    @p.asset(partition_def=DAYS, deps={"hourly_events": p.RollupMapper("day")}, materialization=files, version="1", registry=registry)
    def daily_report(hourly_events):
        bodies.append("day")
        return sum(hourly_events.values())

    url = f"sqlite:///{tmp_path / 'store.db'}"
    flow = p.Flow(["daily_report"], registry=registry, store=url)
    first = flow.run({"partition_keys": ["2026-01-02"]})
    assert first.output("daily_report", "2026-01-02") == 24 and bodies.count("hour") == 24
    bodies.clear()
    second = flow.run({"partition_keys": ["2026-01-02"]})
    assert second.output("daily_report", "2026-01-02") == 24 and bodies == []


def test_each_hour_reads_its_day_through_a_fan_out() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def daily_budget(context):
        return 24 * context.partition_key.day

    @p.asset(partition_def=HOURS, deps={"daily_budget": p.FanOutMapper()}, registry=registry)
    def hourly_share(daily_budget):
        return daily_budget / 24

    result = p.Flow(["hourly_share"], registry=registry).run(
        {"partition_range": ("2026-03-29T00", "2026-03-30T01")}
    )
    assert len(result.tasks["daily_budget"].attempts) == 2  # each day once for its 23 and 2 hours
    assert result.output("hourly_share", "2026-03-29T05") == 29 and result.output("hourly_share", "2026-03-30T01") == 30


def test_a_trailing_window_reads_three_days_and_refuses_days_before_the_upstream_start() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def visits(context):
        return context.partition_key.day

    @p.asset(partition_def=DAYS, deps={"visits": p.OffsetMapper(start_offset=-2, end_offset=0)}, registry=registry)
    def three_day_visits(visits):
        return sum(visits.values())

    flow = p.Flow(["three_day_visits"], registry=registry)
    result = flow.run({"partition_range": ("2026-01-05", "2026-01-06")})
    assert len(result.tasks["visits"].attempts) == 4
    assert result.output("three_day_visits", "2026-01-06") == 4 + 5 + 6
    with pytest.raises(p.PlanningError, match=r"planned key #0 needs keys of 'visits' through OffsetMapper\(start_offset=-2, end_offset=0\) that lie outside its definition's bounds"):
        flow.plan({"partition_keys": ["2026-01-02"]})


def test_max_missing_runs_the_day_without_the_tolerated_hours() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=HOURS, registry=registry)
    def readings(context):
        if context.partition_key.hour in (3, 4):
            raise RuntimeError("meter offline")
        return 1

    @p.asset(partition_def=DAYS, deps={"readings": p.RollupMapper("day", max_missing=2)}, registry=registry)
    def daily_readings(readings):
        return len(readings)

    @p.asset(partition_def=DAYS, deps={"readings": p.RollupMapper("day", max_missing=1)}, registry=registry)
    def strict_readings(readings):
        return len(readings)

    result = p.Flow(["daily_readings", "strict_readings"], registry=registry).run({"partition_keys": ["2026-06-01"]})
    assert result.output("daily_readings", "2026-06-01") == 22
    (strict,) = result.tasks["strict_readings"].attempts
    assert strict.status is p.AttemptStatus.SKIPPED and strict.reason is p.SkipReason.DEPENDENCY_FAILED


def test_a_day_waits_for_every_segment_and_days_roll_up_utc_hours_in_berlin() -> None:
    registry = p.AssetRegistry()
    segments = p.StaticPartitionDef("segments", ["retail", "online"])
    utc = p.HourlyPartitionDef("UTC")

    @p.asset(partition_def=p.MultiPartitionDef({"date": DAYS, "segment": segments}), registry=registry)
    def segment_sales(context):
        return 2 if context.partition_key["segment"] == "retail" else 3

    @p.asset(partition_def=DAYS, deps={"segment_sales": p.DimensionMapper("date")}, registry=registry)
    def total_sales(segment_sales):
        return sum(segment_sales.values())

    @p.asset(partition_def=utc, registry=registry)
    def utc_events(context):
        return 1

    @p.asset(partition_def=DAYS, deps={"utc_events": p.RollupMapper("day", timezone="Europe/Berlin")}, registry=registry)
    def berlin_day(utc_events):
        return sorted(utc.format_key(key) for key in utc_events)

    result = p.Flow(["total_sales", "berlin_day"], registry=registry).run({"partition_keys": ["2026-03-29"]})
    assert result.output("total_sales", "2026-03-29") == 5
    berlin = result.output("berlin_day", "2026-03-29")
    assert (berlin[0], berlin[-1], len(berlin)) == ("2026-03-28T23", "2026-03-29T21", 23)
