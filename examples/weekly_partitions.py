"""Weekly partitions: a key per calendar week, written as the week's first day.

Run it as a script; it plans and runs two Sunday-to-Saturday weeks.
"""

import datetime as dt

from partita import Flow, WeeklyPartitionDef, asset

weeks = WeeklyPartitionDef(week_start="sunday", start="2026-01-04")
print("week:", weeks.kind, weeks.domain, weeks.week_start)
print("weeks:", [weeks.format_key(week) for week in weeks.range("2026-11-29", "2026-12-20")])
print("in memory:", repr(weeks.parse_key("2026-12-06")))
for rejected in ["2026-12-07", dt.date(2025, 12, 28), "2026-W49"]:
    try:
        weeks.normalize_key(rejected)
    except ValueError as error:
        print("rejected:", error)  # the message never repeats the input


@asset(partition_def=weeks)
def weekly_digest(context) -> str:
    first: dt.date = context.partition_key  # the Sunday that starts the week
    return f"{first:%d %b} to {first + dt.timedelta(days=6):%d %b}"


flow = Flow(["weekly_digest"])

if __name__ == "__main__":
    result = flow.run({"partition_range": ("2026-11-29", "2026-12-06")})
    for attempt in result.tasks["weekly_digest"].attempts:
        print(weeks.format_key(attempt.partition_key), attempt.status.value, attempt.output)
