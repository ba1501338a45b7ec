"""Run history: record runs in a SQLite store, then list, show and compare them.

``partita run`` records every run in ``.partita/partita.db`` unless told
otherwise. From Python a flow records only when given ``store=`` (or when
``$PARTITA_STORE`` is set). Run as a script, this file records three runs in a
temporary folder and reads them back through ``partita.store.open_store``.
"""

import tempfile

from partita import AssetRegistry, DatePartitionDef, Flow, asset
from partita.store import open_store

registry = AssetRegistry()
days = DatePartitionDef(start="2026-08-01")
late_exports = {"2026-08-09"}  # days whose export has not arrived yet


@asset(partition_def=days, registry=registry)
def exports(context) -> int:
    if context.partition_key.isoformat() in late_exports:
        context.logger.warning("no export file in the drop folder yet")
        raise FileNotFoundError("the export for this day has not arrived")
    context.logger.info("read %d rows", 10 * context.partition_key.day)
    return 10 * context.partition_key.day


@asset(partition_def=days, registry=registry)
def daily_total(exports: int) -> int:
    return exports + 1


flow = Flow(["daily_total"], registry=registry)  # what `partita run examples/run_history.py` runs


def record_runs(url: str) -> dict[str, str]:
    """Three recorded runs; returns a name for each run id."""
    recorded = Flow(["daily_total"], registry=registry, store=url)
    first = recorded.run({"partition_range": ("2026-08-08", "2026-08-10")})
    late_exports.clear()  # the export arrived: re-run exactly the failed days
    second = recorded.run({"partition_keys": first.failed_partition_keys("exports")})
    with_keys = Flow(["daily_total"], registry=registry, store=url, record_partition_keys=True)
    third = with_keys.run({"partition_keys": ["2026-08-11"]})
    return {first.run_id: "first", second.run_id: "second", third.run_id: "third"}


def statuses(store, run_id: str) -> dict[str, list[str]]:
    return {task.asset: [attempt.status for attempt in task.attempts] for task in store.get_tasks(run_id)}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/history.db"
        names = record_runs(url)
        first, second, third = names

        store = open_store(url)
        try:
            for run in store.list_runs(limit=10):  # newest first
                counts = dict(sorted(run.counts.items()))
                print(f"list: {names[run.run_id]} {run.status}, {run.attempt_count} attempts, {counts}")

            run = store.get_run(first[:8])  # a unique prefix of the id is enough
            header = run.header
            print(f"show: {names[run.run_id]} {run.status}, {header.selection_kind} of {header.key_count} keys")
            for task in store.get_tasks(run.run_id):
                for attempt in task.attempts:
                    why = attempt.reason or ("" if attempt.failure is None else attempt.failure.message)
                    print(f"  {task.asset} #{attempt.index} {attempt.status} {why}".rstrip())

            before, after = statuses(store, first), statuses(store, second)
            for asset_name in before:
                print(f"compare: {asset_name} {before[asset_name]} -> {after[asset_name]}")

            for run_id in (first, third):
                keys = [attempt.partition_key for task in store.get_tasks(run_id) for attempt in task.attempts]
                print(f"stored keys of the {names[run_id]} run: {keys}")
        finally:
            store.close()
