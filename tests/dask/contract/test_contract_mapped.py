"""Runs that span domains through mappers give the same outcomes on threads, processes and Dask.

One module of the engine contract (tests/dask/contract/): days roll up the
hours they need (a daylight-saving day has 23), a failed hour skips only its
day, and a running total reads its own previous day. Assets are module
level so worker processes find them.
"""

from __future__ import annotations

import partita as p

HOURS = p.HourlyPartitionDef("Europe/Berlin")
DAYS = p.DatePartitionDef(start="2026-03-27")
REGISTRY = p.AssetRegistry()




@p.asset(partition_def=HOURS, registry=REGISTRY)
def hour_of_day(context):
    if HOURS.format_key(context.partition_key) == "2026-03-30T05":
        raise ValueError("the feed was down")
    return context.partition_key.hour


@p.asset(partition_def=DAYS, deps={"hour_of_day": p.RollupMapper("day")}, registry=REGISTRY)
def hours_of_the_day(hour_of_day):
    return sorted(hour_of_day.values())


@p.asset(partition_def=DAYS, deps={"running_days": p.OffsetMapper(-1)}, registry=REGISTRY)
def running_days(running_days):
    return 1 + (running_days or 0)


def test_days_roll_up_their_hours_and_a_failed_hour_skips_its_day(executor_kind) -> None:
    flow = p.Flow(["hours_of_the_day"], registry=REGISTRY, executor=executor_kind)
    result = flow.run({"partition_range": ("2026-03-28", "2026-03-30")})
    assert result.output("hours_of_the_day", "2026-03-28") == list(range(24))
    assert result.output("hours_of_the_day", "2026-03-29") == [h for h in range(24) if h != 2]
    (skipped,) = [a for a in result.tasks["hours_of_the_day"].attempts if a.status is p.AttemptStatus.SKIPPED]
    assert str(skipped.partition_key) == "2026-03-30" and skipped.reason is p.SkipReason.DEPENDENCY_FAILED
    assert len(result.tasks["hour_of_day"].attempts) == 71


def test_a_running_total_reads_its_previous_day(executor_kind) -> None:
    flow = p.Flow(["running_days"], registry=REGISTRY, executor=executor_kind, max_concurrency=4)
    result = flow.run({"partition_range": ("2026-03-27", "2026-04-03")})
    assert [result.output("running_days", f"2026-04-0{day}") for day in (1, 2, 3)] == [6, 7, 8]
