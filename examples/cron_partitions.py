"""Cron-defined partitions: a window starts at every tick of a cron expression in one time zone.

Run it as a script; it shows the keys of both daylight-saving days in Berlin
and runs the quarter hours around the spring-forward gap.
"""

import datetime as dt

from partita import CronPartitionDef, Flow, asset

quarters = CronPartitionDef("*/15 * * * *", timezone="Europe/Berlin")
print("cron:", quarters.kind, quarters.domain)
# 2026-03-29: clocks jump from 02:00 to 03:00, so no quarter hour starts between them.
spring = quarters.range("2026-03-29T01:30+01:00", "2026-03-29T03:15+02:00")
print("spring:", [quarters.format_key(key) for key in spring])
# 2026-10-25: clocks fall back from 03:00 to 02:00, so 02:00 to 02:45 start two windows each.
autumn = quarters.range("2026-10-25T02:30+02:00", "2026-10-25T02:15+01:00")
print("autumn:", [quarters.format_key(key) for key in autumn])
utc = dt.datetime(2026, 10, 25, 1, 15, tzinfo=dt.UTC)
print("01:15 UTC is", quarters.format_key(quarters.normalize_key(utc)))
for rejected in ["2026-03-29T01:50+01:00", "2026-03-29T02:15+01:00", "2026-10-25T02:15"]:
    try:
        quarters.parse_key(rejected)
    except ValueError as error:
        print("rejected:", error)  # the message never repeats the input

mornings = CronPartitionDef("30 6 * * mon-fri", timezone="America/New_York")
print("mornings:", [mornings.format_key(key) for key in mornings.range("2026-11-27T06:30-05:00", "2026-12-01T06:30-05:00")])


@asset(partition_def=quarters)
def meter_window(context) -> str:
    start: dt.datetime = context.partition_key  # aware, in Europe/Berlin
    return start.astimezone(dt.UTC).strftime("%H:%MZ")


flow = Flow(["meter_window"])

if __name__ == "__main__":
    result = flow.run({"partition_range": ("2026-03-29T01:30+01:00", "2026-03-29T03:15+02:00")})
    for attempt in result.tasks["meter_window"].attempts:
        print(quarters.format_key(attempt.partition_key), attempt.status.value, attempt.output)
