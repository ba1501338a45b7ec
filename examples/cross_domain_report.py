"""One run across two partition domains: a daily report over hourly events, and a running total.

Run it as a script; it plans and runs three days around the spring-forward
change in Berlin, then a week of running totals. As a CLI entry:

    partita plan examples/cross_domain_report.py:flow --partition-range 2026-03-28 2026-03-30
"""

from partita import DatePartitionDef, Flow, HourlyPartitionDef, OffsetMapper, RollupMapper, asset

hours = HourlyPartitionDef("Europe/Berlin", start="2026-01-01T00")
days = DatePartitionDef(start="2026-01-01")


@asset(partition_def=hours)
def hourly_events(context) -> int:
    return 10 * context.partition_key.hour  # events counted in that hour


@asset(partition_def=days, deps={"hourly_events": RollupMapper("day")})
def daily_report(hourly_events) -> str:
    # A mapping of each hour of the day to its output: 23 on the spring-forward day.
    return f"{len(hourly_events)} hours, {sum(hourly_events.values())} events"


@asset(partition_def=days, deps={"hourly_events": RollupMapper("day")})
def busiest_hour(hourly_events) -> str:
    hour, _ = max(hourly_events.items(), key=lambda item: item[1])
    return hours.format_key(hour)


@asset(partition_def=days)
def daily_sales(context) -> int:
    return context.partition_key.day


@asset(partition_def=days, deps={"running_total": OffsetMapper(-1)})
def running_total(daily_sales, running_total) -> int:
    return daily_sales + (running_total or 0)  # None on the definition's first day


flow = Flow(["daily_report", "busiest_hour"])

if __name__ == "__main__":
    plan = flow.plan({"partition_range": ("2026-03-28", "2026-03-30")})
    for domain in plan.to_dict()["domains"]:
        print(f"plan: {domain['domain']}: {domain['key_count']} keys, {domain['attempt_count']} attempts")
    result = flow.run(plan)
    for day in ("2026-03-28", "2026-03-29", "2026-03-30"):
        print(day, result.output("daily_report", day), "busiest", result.output("busiest_hour", day))
    totals = Flow(["running_total"], max_concurrency=4).run({"partition_range": ("2026-01-01", "2026-01-07")})
    print("running total on 2026-01-07:", totals.output("running_total", "2026-01-07"))
