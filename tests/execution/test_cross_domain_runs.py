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

import partita as p
from partita.partitions.mappers import PartitionMapper, Requirement
from partita.store.protocol import AttemptQuery

HOURS = p.HourlyPartitionDef("Europe/Berlin", start="2026-01-01T00")
DAYS = p.DatePartitionDef(start="2026-01-01")


class PreviousDay(PartitionMapper):
    one_upstream_key = True

    def requirement(self, downstream_key, upstream, downstream):
        day = downstream.parse_key(downstream_key) - dt.timedelta(days=1)
        try:
            return Requirement((upstream.format_key(upstream.normalize_key(day)),))
        except ValueError:
            return Requirement(())


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

    @p.asset(partition_def=DAYS, deps={"running_total": PreviousDay()}, registry=registry)
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

    @p.asset(partition_def=DAYS, deps={"running_total": PreviousDay()}, registry=registry)
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
