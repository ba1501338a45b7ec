"""Cron schedules on daylight-saving days (SPEC §12), in every zone, on both store backends.

Each test evaluates a schedule across a whole transition day with an
injected ``now`` in small steps, the way a daemon's passes would see it, and
compares what was scheduled with the real elapsed partitions, worked out
independently by stepping through UTC. Every step builds a fresh evaluator,
so each pass also stands for a restart.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

import partita as p
from partita.automation.evaluation import TriggerEvaluator
from partita.cli.main import cli
from partita.errors import DefinitionError
from partita.store.sql import SqlStore

from .conftest import wait_for

UTC = dt.UTC
HOUR = dt.timedelta(hours=1)


@dataclass(frozen=True)
class Transition:
    """One daylight-saving day of 2026: the local hour that is skipped (spring) or repeated (fall)."""

    zone: str
    day: dt.date
    springs_forward: bool
    hour: int

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def __str__(self) -> str:
        return f"{self.zone}-{self.day}-{'spring' if self.springs_forward else 'fall'}"


TRANSITIONS = [
    Transition("Europe/Berlin", dt.date(2026, 3, 29), True, 2),
    Transition("Europe/Berlin", dt.date(2026, 10, 25), False, 2),
    Transition("America/New_York", dt.date(2026, 3, 8), True, 2),
    Transition("America/New_York", dt.date(2026, 11, 1), False, 1),
    Transition("US/Central", dt.date(2026, 3, 8), True, 2),
    Transition("US/Central", dt.date(2026, 11, 1), False, 1),
    # Sydney's seasons are the other way round: clocks fall back in April and spring forward in October.
    Transition("Australia/Sydney", dt.date(2026, 4, 5), False, 2),
    Transition("Australia/Sydney", dt.date(2026, 10, 4), True, 2),
]
BY_NAME = pytest.mark.parametrize("transition", TRANSITIONS, ids=str)


def day_start(day: dt.date, tz: ZoneInfo) -> dt.datetime:
    """Local midnight as a UTC instant (midnight exists on every day tested here)."""
    return dt.datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)


def real_hours(day: dt.date, tz: ZoneInfo) -> list[tuple[str, dt.datetime]]:
    """Every elapsed hour of the local day as (hourly key text, the UTC instant it ends), stepping in UTC."""
    definition = p.HourlyPartitionDef(tz.key)
    start, end = day_start(day, tz), day_start(day + dt.timedelta(days=1), tz)
    hours = []
    while start < end:
        hours.append((definition.format_key(start.astimezone(tz)), start + HOUR))
        start += HOUR
    return hours


def steps(begin: dt.datetime, end: dt.datetime, every: dt.timedelta) -> Iterator[dt.datetime]:
    now = begin
    while now <= end:
        yield now
        now += every


def build_flow(partition_def: Any, trigger: p.CronPartitions) -> p.Flow:
    registry = p.AssetRegistry()

    @p.asset(partition_def=partition_def, registry=registry)
    def scheduled() -> int:
        return 1

    return p.Flow(["scheduled"], registry=registry, name="scheduled_flow", trigger=trigger)


def schedule_across(
    store: SqlStore, flow: p.Flow, begin: dt.datetime, end: dt.datetime, every: dt.timedelta
) -> list[tuple[str, dt.datetime]]:
    """Every key scheduled by passes from ``begin`` to ``end``, with the ``now`` of the pass that scheduled it."""
    scheduled = []
    for now in steps(begin, end, every):
        report = TriggerEvaluator(flow, store).evaluate(now=now)  # a fresh evaluator: every pass is a restart
        scheduled += [(key, now) for key in report.scheduled]
    return scheduled


# -- hourly ----------------------------------------------------------------------------


@BY_NAME
@pytest.mark.parametrize("cron", ["0 * * * *", "*/15 * * * *"])
def test_every_real_hour_is_scheduled_exactly_once_and_only_after_it_ended(
    store: SqlStore, transition: Transition, cron: str
) -> None:
    tz = transition.tz
    hours = real_hours(transition.day, tz)
    assert len(hours) == (23 if transition.springs_forward else 25)
    begin = day_start(transition.day, tz)
    flow = build_flow(p.HourlyPartitionDef(transition.zone), p.CronPartitions(cron, start=begin, timezone=transition.zone))
    scheduled = schedule_across(store, flow, begin, hours[-1][1] + dt.timedelta(minutes=50), dt.timedelta(minutes=10))
    assert [key for key, _ in scheduled] == [key for key, _ in hours]  # each once, both copies of a repeat, no gap
    ends = dict(hours)
    assert all(ends[key] <= now for key, now in scheduled), "an hour was scheduled before it ended"
    requested = [request.partition_key for request in TriggerEvaluator(flow, store).due_requests()]
    assert requested == [key for key, _ in hours]


@BY_NAME
def test_the_repeated_hour_keeps_its_offset_and_the_skipped_hour_is_absent(
    store: SqlStore, transition: Transition
) -> None:
    tz = transition.tz
    begin = day_start(transition.day, tz)
    flow = build_flow(p.HourlyPartitionDef(transition.zone), p.CronPartitions("0 * * * *", start=begin, timezone=transition.zone))
    keys = [key for key, _ in schedule_across(store, flow, begin, begin + 26 * HOUR, dt.timedelta(minutes=30))]
    wall = f"{transition.day}T{transition.hour:02d}"
    repeated = [key for key in keys if key.startswith(wall)]
    if transition.springs_forward:
        assert repeated == []
    else:
        offset = dt.datetime(*transition.day.timetuple()[:3], transition.hour, tzinfo=tz, fold=1).strftime("%z")
        assert repeated == [wall, f"{wall}{offset[:3]}:{offset[3:]}"]


def transition_days(zone: str, year: int = 2026) -> list[dt.date]:
    """The local days of ``year`` on which the zone's UTC offset changes."""
    tz, found = ZoneInfo(zone), []
    day = dt.date(year, 1, 1)
    while day.year == year:
        after = day + dt.timedelta(days=1)
        if day_start(day, tz).astimezone(tz).utcoffset() != day_start(after, tz).astimezone(tz).utcoffset():
            found.append(day)
        day = after
    return found


UNUSUAL = [
    (zone, day)
    for zone in ("Australia/Lord_Howe", "Antarctica/Troll", "America/Santiago", "America/Havana", "Pacific/Chatham")
    for day in transition_days(zone)
]


@pytest.mark.parametrize(("zone", "day"), UNUSUAL, ids=[f"{zone}-{day}" for zone, day in UNUSUAL])
def test_every_hour_of_the_definition_once_in_zones_with_unusual_transitions(
    store: SqlStore, zone: str, day: dt.date
) -> None:
    """Half-hour shifts (Lord Howe), a two-hour shift (Troll), midnight gaps (Santiago, Havana), +12:45 (Chatham)."""
    tz, definition = ZoneInfo(zone), p.HourlyPartitionDef(zone)
    begin, end = day_start(day, tz), day_start(day + dt.timedelta(days=1), tz)
    first, last = begin.astimezone(tz), (end - HOUR).astimezone(tz).replace(minute=0)
    expected = [definition.format_key(key) for key in definition.range(first, last)]
    flow = build_flow(definition, p.CronPartitions("0 * * * *", start=begin, timezone=zone))
    scheduled = schedule_across(store, flow, begin, end + dt.timedelta(minutes=50), dt.timedelta(minutes=10))
    assert [key for key, _ in scheduled] == expected


@pytest.mark.parametrize(
    ("cron_zone", "consumer_zone", "day"),
    [
        ("Asia/Kolkata", "Europe/Berlin", dt.date(2026, 10, 25)),  # ticks at half past the consumer's hours
        ("Europe/Berlin", "America/New_York", dt.date(2026, 11, 1)),
        ("UTC", "Australia/Sydney", dt.date(2026, 10, 4)),
    ],
)
def test_a_cron_zone_other_than_the_consumer_zone_schedules_each_consumer_hour_once(
    store: SqlStore, cron_zone: str, consumer_zone: str, day: dt.date
) -> None:
    tz = ZoneInfo(consumer_zone)
    hours = real_hours(day, tz)
    begin = day_start(day, tz)
    flow = build_flow(p.HourlyPartitionDef(consumer_zone), p.CronPartitions("0 * * * *", start=begin, timezone=cron_zone))
    scheduled = schedule_across(store, flow, begin, hours[-1][1] + dt.timedelta(minutes=50), dt.timedelta(minutes=10))
    assert [key for key, _ in scheduled] == [key for key, _ in hours]
    ends = dict(hours)
    assert all(ends[key] <= now for key, now in scheduled)


# -- daily -----------------------------------------------------------------------------


@BY_NAME
def test_a_midnight_cron_schedules_each_day_once(store: SqlStore, transition: Transition) -> None:
    tz = transition.tz
    before = transition.day - dt.timedelta(days=1)
    begin = day_start(before, tz)
    flow = build_flow(p.DatePartitionDef(), p.CronPartitions("0 0 * * *", start=begin, timezone=transition.zone))
    end = day_start(transition.day + dt.timedelta(days=2), tz)
    scheduled = schedule_across(store, flow, begin, end + HOUR, dt.timedelta(minutes=30))
    days = [before + dt.timedelta(days=offset) for offset in range(3)]
    assert [key for key, _ in scheduled] == [day.isoformat() for day in days]
    for (key, now), day in zip(scheduled, days, strict=True):
        assert now >= day_start(day + dt.timedelta(days=1), tz), f"{key} was scheduled before it ended"


@BY_NAME
def test_a_daily_wall_time_that_is_repeated_or_skipped_fires_once_that_day(
    store: SqlStore, transition: Transition
) -> None:
    tz = transition.tz
    begin = day_start(transition.day, tz)
    cron = f"30 {transition.hour} * * *"
    flow = build_flow(None, p.CronPartitions(cron, start=begin, timezone=transition.zone))  # keyed by the tick
    end = day_start(transition.day + dt.timedelta(days=1), tz)
    ticks = [key for key, _ in schedule_across(store, flow, begin, end, dt.timedelta(minutes=10))]
    y, m, d = transition.day.year, transition.day.month, transition.day.day
    if transition.springs_forward:
        # The wall time does not exist: once, at the first valid instant after it (where the gap ends).
        expected = dt.datetime(y, m, d, transition.hour + 1, tzinfo=tz)
    else:
        expected = dt.datetime(y, m, d, transition.hour, 30, tzinfo=tz, fold=0)  # its first occurrence
    assert ticks == [expected.isoformat()]


# -- declarations ----------------------------------------------------------------------


@pytest.mark.parametrize("cron", ["0 0 * * * *", "0 0 * * * * 2026", "@hourly", "0 *"])
def test_an_expression_other_than_five_fields_is_rejected(cron: str) -> None:
    with pytest.raises(DefinitionError, match="five fields"):
        p.CronPartitions(cron, start="2026-01-01T00:00")


def test_an_expression_that_never_fires_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="never fires"):
        p.CronPartitions("0 0 31 2 *", start="2026-01-01T00:00")
    assert p.CronPartitions("0 0 29 2 *", start="2026-03-01T00:00").cron == "0 0 29 2 *"  # the next leap day counts


def test_a_cron_on_a_consumer_that_is_not_time_partitioned_fails_its_evaluation(store: SqlStore) -> None:
    colours = p.StaticPartitionDef("colours", ["red", "blue"])
    flow = build_flow(colours, p.CronPartitions("0 * * * *", start="2026-01-01T00:00"))
    with pytest.raises(DefinitionError, match="partitioned by hours, days, weeks, months or cron windows"):
        TriggerEvaluator(flow, store).evaluate(now=dt.datetime(2026, 1, 1, 2, tzinfo=UTC))


# -- the commands, on a spring-forward day -----------------------------------------------

SPRING_ENTRY = """
from partita import Flow, HourlyPartitionDef, asset
from partita.automation.triggers import CronPartitions


@asset(partition_def=HourlyPartitionDef("Europe/Berlin", end="2025-03-30T05"))
def meter():
    return 1


hourly = Flow(
    ["meter"],
    name="hourly_meter",
    trigger=CronPartitions("0 * * * *", start="2025-03-30T00:00", timezone="Europe/Berlin"),
    record_partition_keys=True,
)
"""
# 2025-03-30 is a spring-forward day in Berlin: the hour 02 does not exist, so its 03:00 tick ends the hour 01.
SPRING_KEYS = ["2025-03-30T00", "2025-03-30T01", "2025-03-30T03", "2025-03-30T04", "2025-03-30T05"]


def _meter_runs(url: str) -> list[str]:
    store = SqlStore(url)
    try:
        return sorted(
            attempt.partition_key
            for run in store.list_runs(limit=100)
            for task in store.get_tasks(run.header.run_id)
            for attempt in task.attempts
        )
    finally:
        store.close()


@pytest.fixture
def spring_entry(tmp_path: Path) -> str:
    path = tmp_path / "spring.py"
    path.write_text(SPRING_ENTRY)
    return str(path)


def test_plan_pending_and_trigger_once_over_a_spring_forward_day(spring_entry: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/spring.db"
    pending = CliRunner().invoke(cli, ["plan", spring_entry, "--pending", "--store", url, "--json"])
    assert pending.exit_code == 0, pending.output
    (flow,) = json.loads(pending.stdout)["flows"]
    assert flow["would_start"] == SPRING_KEYS
    assert flow["error"] is None
    once = CliRunner().invoke(cli, ["trigger", spring_entry, "--once", "--store", url])
    assert once.exit_code == 0, once.output
    assert "started 5 consumer runs" in once.stdout
    again = CliRunner().invoke(cli, ["trigger", spring_entry, "--once", "--store", url])  # a restart: nothing twice
    assert again.exit_code == 0, again.output
    assert "started 0 consumer runs" in again.stdout
    assert _meter_runs(url) == SPRING_KEYS


def test_serve_passes_a_spring_forward_day(spring_entry: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/spring.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "partita", "serve", spring_entry, "--store", url, "--poll-interval", "0.05", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: process.poll() is not None or _meter_runs(url) == SPRING_KEYS)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert _meter_runs(url) == SPRING_KEYS
    assert all(json.loads(line)["level"] != "error" for line in err.splitlines() if line.strip())
