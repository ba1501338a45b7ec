"""Partition definitions: how a key is normalized, written and ranged (SPEC §3)."""

from partita.partitions.base import PartitionDef
from partita.partitions.cron import CronPartitionDef
from partita.partitions.multi import MultiPartitionDef, MultiPartitionKey
from partita.partitions.runtime import PartitionAtRuntime, PartitionKey
from partita.partitions.static import StaticPartitionDef
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, WeeklyPartitionDef

__all__ = [
    "CronPartitionDef",
    "DatePartitionDef",
    "HourlyPartitionDef",
    "MonthlyPartitionDef",
    "MultiPartitionDef",
    "MultiPartitionKey",
    "PartitionAtRuntime",
    "PartitionDef",
    "PartitionKey",
    "StaticPartitionDef",
    "WeeklyPartitionDef",
]
