"""What each partition mapper answers: the upstream keys a consumer key needs, and the reverse.

Run it as a script; nothing runs but the mappers themselves.
"""

from partita import (
    DatePartitionDef,
    DimensionMapper,
    FanOutMapper,
    HourlyPartitionDef,
    MultiPartitionDef,
    OffsetMapper,
    RollupMapper,
    StaticPartitionDef,
)

days = DatePartitionDef(start="2026-01-01")
berlin_hours = HourlyPartitionDef("Europe/Berlin")
utc_hours = HourlyPartitionDef("UTC")
segments = StaticPartitionDef("segments", ["retail", "online"])
sales = MultiPartitionDef({"date": days, "segment": segments})

# A day fans out to its hours (23 on the spring-forward day); an hour needs its day.
hours_of_day = FanOutMapper().downstream_keys("2026-03-29", days, berlin_hours)
print("fan-out:", len(hours_of_day), hours_of_day[:3])
print("fan-out needs:", FanOutMapper().requirement("2026-03-29T05", days, berlin_hours).keys)

# A lag and a trailing window; the definition's first day has no predecessor.
print("lag:", OffsetMapper(-1).requirement("2026-03-29", days, days).keys)
print("window:", OffsetMapper(start_offset=-2, end_offset=0).requirement("2026-03-29", days, days).keys)
print("first day:", OffsetMapper(-1).requirement("2026-01-01", days, days).keys)

# UTC hours rolled up into Berlin days, and a day that may miss two hours.
berlin_day = RollupMapper("day", timezone="Europe/Berlin").requirement("2026-03-29", utc_hours, days)
print("Berlin day over UTC hours:", berlin_day.keys[0], "..", berlin_day.keys[-1], len(berlin_day.keys))
print("needed of 24 with max_missing=2:", RollupMapper("day", max_missing=2).requirement("2026-06-01", utc_hours, days).needed())

# A day waits for every segment.
print("segments:", DimensionMapper("date").requirement("2026-03-29", sales, days).keys)
