"""The entry the UI tests serve: a daily chain that logs and can fail on chosen days, and a triggered consumer.

``PARTITA_TEST_FAIL_DAYS`` (comma-separated ISO days) makes ``exports`` fail
on those days; ``PARTITA_TEST_HOLD`` names a file whose existence keeps
``exports`` waiting (to cancel a running run), up to a deadline.
"""

import os
import time
from pathlib import Path

from partita import DatePartitionDef, Flow, OnAssetEvents, StaticPartitionDef, asset

days = DatePartitionDef(start="2026-08-01")
#: Keys that are markup if a page ever rendered them raw (the escaping tests publish events of them).
HOSTILE_KEYS = (
    "<script>document.title='owned';window.partitaOwned=1</script>",
    '"onmouseover="document.title=\'owned\'" x="',
    '<img src=x onerror="window.partitaOwned=1">',
)


@asset(partition_def=days)
def exports(context) -> int:
    context.logger.info("reading the export")
    failing = {day for day in os.environ.get("PARTITA_TEST_FAIL_DAYS", "").split(",") if day}
    if context.partition_key.isoformat() in failing:
        raise FileNotFoundError("the export for this day has not arrived")
    hold = os.environ.get("PARTITA_TEST_HOLD")
    deadline = time.monotonic() + 30
    while hold and Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return 10 * context.partition_key.day


@asset(partition_def=days)
def daily_total(exports: int) -> int:
    return exports + 1


@asset(partition_def=days)
def archive(context) -> None:
    context.logger.info("archived")


@asset(partition_def=StaticPartitionDef("tenants", HOSTILE_KEYS))
def tenant_report(context) -> None:
    context.logger.info("tenant report")


# A held body ignores cancellation: a short grace lets the cancel tests finish without waiting out the default.
flow = Flow(["daily_total"], name="daily_totals", record_partition_keys=True, cancel_grace_seconds=0.5)
archiving = Flow(["archive"], name="archiving", trigger=OnAssetEvents(["daily_total"]), record_partition_keys=True)
