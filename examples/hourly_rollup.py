"""Hourly roll-up: a daily consumer runs once every hour of its day has an event.

`meter_readings` is partitioned by wall-clock hours in Europe/Berlin; a
meter gateway announces each hour as it closes. The daily consumer
`daily_usage` declares ``OnAssetEvents(["meter_readings"],
mapper=RollupMapper("day"))``: day D runs once every hourly key of D has an
event. 2026-10-25 is the day clocks go back, so it has 25 hours (02:00
happens twice) and the day waits for all 25.

    python examples/hourly_rollup.py [--store URL]
    partita events emit meter_readings examples/hourly_rollup.py --partition-key 2026-10-25T00
    partita plan examples/hourly_rollup.py --pending

``--store`` defaults to a new temporary SQLite file, printed first.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from partita import AssetContext, DatePartitionDef, Flow, HourlyPartitionDef, asset, open_store, publish_event
from partita.automation.daemon import TriggerDaemon
from partita.automation.evaluation import TriggerEvaluator
from partita.automation.triggers import OnAssetEvents
from partita.partitions.mappers import RollupMapper

hours = HourlyPartitionDef("Europe/Berlin")
days = DatePartitionDef(start="2026-10-01")


@asset(partition_def=hours)
def meter_readings() -> None:
    """One hour of readings; the gateway announces it, nothing runs this body."""


@asset(partition_def=days)
def daily_usage(context: AssetContext) -> int:
    """The consumer: one run per complete day, with every hourly event that completed it."""
    events = context.triggering_events
    kwh = sum(event.extra["kwh"] for event in events)
    print(f"daily_usage {context.partition_key}: {len(events)} hourly events, {kwh} kWh")
    return kwh


flow = Flow(["daily_usage"], name="daily_usage", trigger=OnAssetEvents(["meter_readings"], mapper=RollupMapper("day")))


def pending(store) -> str:
    """What `partita plan --pending` shows: keys that would start, keys still waiting (nothing is recorded)."""
    report = TriggerEvaluator(flow, store).evaluate(record=False)
    due = {request.partition_key for request in TriggerEvaluator(flow, store).due_requests()}
    would_start = sorted(due | set(report.ready))
    waiting = sorted(key for key in report.waiting if key not in due)
    return f"would start {would_start or '-'}, waiting {waiting or '-'}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Roll 25 Berlin hours of 2026-10-25 up into one day.")
    parser.add_argument("--store", metavar="URL", help="store URL (default: a new temporary SQLite file)")
    args = parser.parse_args()
    url = args.store or f"sqlite:///{Path(tempfile.mkdtemp(prefix='partita-rollup-')) / 'partita.db'}"
    print(f"store: {url}")
    day = hours.range("2026-10-25T00", "2026-10-25T23")
    keys = [hours.format_key(hour) for hour in day]
    print(f"hours of 2026-10-25 in Europe/Berlin: {len(keys)} ({keys[2]}, {keys[3]})")
    needed = RollupMapper("day").requirement("2026-10-25", hours, days)
    print(f"RollupMapper('day') needs {len(needed.keys)} hourly keys for 2026-10-25")

    store = open_store(url)
    try:
        for key in keys[:-1]:  # every hour but the last one has closed
            publish_event(store, flow, "meter_readings", partition_key=key, extra={"kwh": 2})
        print(f"after {len(keys) - 1} hourly events: {pending(store)}")
        started = TriggerDaemon([flow], store).run_once()
        print(f"trigger pass: started {started} consumer runs")
        print(f"still: {pending(store)}")

        publish_event(store, flow, "meter_readings", partition_key=keys[-1], extra={"kwh": 3})
        print(f"after the last hour ({keys[-1]}): {pending(store)}")
        started = TriggerDaemon([flow], store).run_once()
        print(f"trigger pass: started {started} consumer runs")
        print(f"afterwards: {pending(store)}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
