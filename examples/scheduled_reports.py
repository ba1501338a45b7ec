"""Scheduled flows and their catch-up: what a pass does with ticks it missed.

    partita schedules examples/scheduled_reports.py
    partita trigger examples/scheduled_reports.py --once

Run as a script it prints each flow's schedule and catch-up.
"""

from partita import CronPartitions, DatePartitionDef, Flow, HourlyPartitionDef, asset


@asset(partition_def=HourlyPartitionDef("UTC"))
def hourly_snapshot() -> int:
    return 1


@asset(partition_def=DatePartitionDef())
def nightly_report() -> int:
    return 1


snapshot_flow = Flow(
    ["hourly_snapshot"],
    name="hourly_snapshot",
    trigger=CronPartitions("0 * * * *", start="2026-01-01T00:00", catchup="latest"),  # only the newest missed hour
)
report_flow = Flow(
    ["nightly_report"],
    name="nightly_report",
    trigger=CronPartitions("0 0 * * *", start="2026-01-01", timezone="Europe/Berlin", catchup=7),  # at most a week
)

if __name__ == "__main__":
    for flow in (snapshot_flow, report_flow):
        schedule = flow.trigger.describe()
        print(f"{flow.name}: cron {schedule['cron']} in {schedule['timezone']}, catch-up {schedule['catchup']}")
