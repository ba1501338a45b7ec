"""Plan-first backfills: rerun the keys a run failed, then fill the keys of a range that never succeeded.

``plan_failed_from`` and ``plan_missing`` read the store and return an
ordinary plan, to print, check and run. Run as a script, this file records
runs in a temporary folder: one that fails on a day, the backfill of its
failed keys, and the backfill of the days of a range that are still missing.
"""

import tempfile

from partita import AssetRegistry, DatePartitionDef, Flow, asset, plan_failed_from, plan_missing
from partita.store import open_store

registry = AssetRegistry()
days = DatePartitionDef(start="2026-08-01")
late_exports = {"2026-08-09"}  # days whose export has not arrived yet


@asset(partition_def=days, registry=registry)
def exports(context) -> int:
    if context.partition_key.isoformat() in late_exports:
        raise FileNotFoundError("the export for this day has not arrived")
    return 10 * context.partition_key.day


@asset(partition_def=days, registry=registry)
def daily_total(exports: int) -> int:
    return exports + 1


flow = Flow(["daily_total"], registry=registry, name="daily_totals")  # what `partita run examples/backfills.py` runs


def keys(plan) -> list[str]:
    return [key.isoformat() for key in plan.partition_keys]


def backfill(url: str) -> None:
    recorded = Flow(
        ["daily_total"], registry=registry, name="daily_totals", store=url, record_partition_keys=True
    )
    first = recorded.run({"partition_range": ("2026-08-08", "2026-08-10")})
    print(f"first run: {first.status.value}")

    late_exports.clear()  # the export arrived
    plan = plan_failed_from(recorded, first.run_id, store=url)
    print(plan.backfill.describe())
    print(f"rerun: {keys(plan)}")
    recorded.run(plan)  # recorded as launched by backfill, tagged with the source run

    plan = plan_missing(recorded, {"partition_range": ("2026-08-08", "2026-08-12")}, store=url)
    print(f"missing: {keys(plan)}")
    if not plan.backfill.empty:  # nothing missing: do not start a run
        recorded.run(plan)

    again = plan_missing(recorded, {"partition_range": ("2026-08-08", "2026-08-12")}, store=url)
    print(again.backfill.describe())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/history.db"
        backfill(url)
        store = open_store(url)
        try:
            for run in reversed(store.list_runs(limit=10)):
                print(f"run: {run.launched_by} {run.status} {dict(run.tags)}")
        finally:
            store.close()
