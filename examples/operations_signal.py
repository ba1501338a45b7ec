"""Operations signal: a failing run asks for follow-up work through asset events.

`regional_export` fails for one region. Its asset-level ``on_failure``
callback publishes an `export_cleanup` event for that region (so a cleanup
flow can remove the half-written files), and the flow-level ``on_failure``
callback publishes one `ops_incident` event for the run (so an investigation
flow can look at it). Both assets exist only to be named by these events.
The events carry references (run id, asset names), never logs or secrets.

    python examples/operations_signal.py [--store URL]
    partita run examples/operations_signal.py --partition-key eu --partition-key us --yes
    partita events list --asset ops_incident --json

As a script the run is recorded in ``--store`` (default: a temporary SQLite
file), then run once more without a store to show `RunResult.events`.
"""

from __future__ import annotations

import argparse
import json
import tempfile

from partita import (
    AssetContext,
    AssetRegistry,
    AttemptStatus,
    CallbackContext,
    Flow,
    StaticPartitionDef,
    asset,
    open_store,
)

registry = AssetRegistry()
regions = StaticPartitionDef("regions", ["eu", "us"])


@asset(registry=registry)
def ops_incident() -> None:
    """Signal for the investigation flow; unpartitioned: one event per incident."""


@asset(partition_def=regions, registry=registry)
def export_cleanup() -> None:
    """Signal for the cleanup flow, one partition per region."""


def request_cleanup(context: CallbackContext) -> None:
    """Asset-level on_failure: the region is passed on explicitly (keys are never inherited)."""
    receipt = context.emit(
        "export_cleanup",
        partition_key=context.partition_key,
        extra={"run_id": context.run_id, "invocation": context.invocation_number},
    )
    print(f"{context.asset_name} on_failure: export_cleanup event {receipt.id}")


def open_incident(context: CallbackContext) -> None:
    """Flow-level on_failure: one event naming the run and what failed in it."""
    failed = sorted({a.asset_name for a in context.result.attempts() if a.status is AttemptStatus.FAILED})
    receipt = context.emit("ops_incident", extra={"run_id": context.run_id, "failed_assets": failed})
    print(f"flow on_failure: ops_incident event {receipt.id}, duplicate={receipt.duplicate}")


@asset(partition_def=regions, registry=registry, on_failure=request_cleanup)
def regional_export(context: AssetContext) -> int:
    if context.partition_key == "us":
        raise ConnectionError("the warehouse refused the connection")
    return 120


@asset(registry=registry)
def export_summary(regional_export: dict) -> int:
    return sum(regional_export.values())


flow = Flow(["export_summary"], registry=registry, on_failure=open_incident)
SELECTION = {"partition_keys": ["eu", "us"]}


def masked(fields: dict, run_id: str) -> dict:
    """The fields with the (random) run id replaced, so the printed lines are stable."""
    return {name: "<run id>" if value == run_id else value for name, value in fields.items()}


def show_run(store_url: str) -> None:
    recorded = Flow(["export_summary"], registry=registry, on_failure=open_incident, store=store_url)
    result = recorded.run(SELECTION)
    print(f"run status: {result.status.value}")
    print(f"receipts: {[(receipt.id, receipt.duplicate) for receipt in result.receipts]}")
    store = open_store(store_url)
    try:
        for event in store.list_events(run_id=result.run_id):
            extra, source = masked(event.extra, result.run_id), masked(event.source.to_dict(), result.run_id)
            print(f"stored event {event.id}: {event.asset} {event.partition_key} extra={json.dumps(extra)}")
            print(f"  source: {json.dumps(source)}")
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="A failing run that signals cleanup and an incident.")
    parser.add_argument("--store", metavar="URL", help="event store (default: a temporary SQLite file)")
    args = parser.parse_args()
    if args.store:
        show_run(args.store)
    else:
        with tempfile.TemporaryDirectory() as folder:
            show_run(f"sqlite:///{folder}/events.db")

    # Without a store the events stay in memory and come back with the result.
    in_memory = Flow(["export_summary"], registry=registry, on_failure=open_incident, store=False).run(SELECTION)
    print(f"without a store: {[(event.asset, event.source.kind.value) for event in in_memory.events]}")


if __name__ == "__main__":
    main()
