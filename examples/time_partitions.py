"""Time partition definitions: days, months and wall-clock hours."""

import datetime as dt

from partita import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef

days = DatePartitionDef(start="2026-01-01", end="2026-12-31")
print("date:", days.kind, days.domain, days.key_format, days.supports_range)
print("normalized:", repr(days.normalize_key("2026-08-08")))
print("range:", [day.isoformat() for day in days.range("2026-08-08", "2026-08-10")])
for rejected in ["2026-8-8", dt.datetime(2026, 8, 8, 12), "2025-12-31", "2026-02-30"]:
    try:
        days.normalize_key(rejected)
    except ValueError as error:
        print("rejected:", error)  # the message never repeats the input
try:
    days.range("2026-08-10", "2026-08-08")
except ValueError as error:
    print("reversed range:", error)

months = MonthlyPartitionDef()
print("month:", months.kind, months.domain, months.key_format)
print("months:", [months.format_key(month) for month in months.range("2025-11", "2026-02")])
print("in memory:", repr(months.parse_key("2026-02")))

berlin = HourlyPartitionDef("Europe/Berlin")
print("hour:", berlin.kind, berlin.domain, berlin.key_format)
# 2026-03-29: clocks jump from 02:00 to 03:00, so 02 does not exist.
print("spring:", [berlin.format_key(hour) for hour in berlin.range("2026-03-29T01", "2026-03-29T03")])
try:
    berlin.parse_key("2026-03-29T02")
except ValueError as error:
    print("gap:", error)
# 2026-10-25: clocks fall back from 03:00 to 02:00, so 02 happens twice.
autumn = berlin.range("2026-10-25T01", "2026-10-25T03")
print("autumn:", [berlin.format_key(hour) for hour in autumn])
print("offsets:", [str(hour.utcoffset()) for hour in autumn])
utc_hour = dt.datetime(2026, 10, 25, 1, tzinfo=dt.UTC)
print("01:00 UTC is", berlin.format_key(berlin.normalize_key(utc_hour)))
