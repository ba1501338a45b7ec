"""Batch validation: a consumer flow validates each batch as soon as the producer announces it.

The producer flow (`receive_batches`) commits batches 41, 42 and 43 in one
long-running body. After each commit it publishes a readiness event for that
batch's partition of `arrived_batch`. The consumer flow `validate_batches`
declares ``trigger=OnAssetEvents(["arrived_batch"])``: every announced batch key gets its own
consumer run, which sees the event that started it in
``context.triggering_events``.

As a script the producer pauses after batch 42, still running, while one
trigger pass validates 41 and 42; then it resumes and fails on batch 43.
The batches it announced before the failure stay published and validated.

    python examples/batch_validation.py [--store URL]
    partita run examples/batch_validation.py --yes
    partita trigger examples/batch_validation.py --once
    partita plan examples/batch_validation.py --pending

``--store`` defaults to a new temporary SQLite file, printed first.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from pathlib import Path

from partita import AssetContext, Flow, StaticPartitionDef, asset, open_store, publish_event
from partita.automation.daemon import TriggerDaemon
from partita.automation.triggers import OnAssetEvents
from partita.store.triggers import TriggerStore

batches = StaticPartitionDef("batches", ["41", "42", "43"])
ROWS = {"41": 1025, "42": 1050, "43": 1075}

# The script holds the producer here after batch 42; under `partita run` it never waits.
producer_may_continue = threading.Event()
producer_may_continue.set()
producer_paused = threading.Event()


@asset(partition_def=batches)
def arrived_batch() -> None:
    """One committed batch. `receive_batches` announces it; nothing runs this body.

    The name is this example's own: examples/batch_ingestion.py announces a
    `batch`, and in one folder (one default store) its events must not start
    this example's consumer.
    """


@asset
def receive_batches(context: AssetContext) -> int:
    """Commit batches one by one and announce each the moment it is durable."""
    for key in batches.keys:
        if key == "43":
            raise RuntimeError("batch 43: the source file is truncated")
        receipt = context.emit("arrived_batch", partition_key=key, extra={"rows": ROWS[key]}, dedupe_key=f"batch-{key}")
        print(f"producer: batch {key} committed, readiness event {receipt.id}")
        if key == "42" and not producer_may_continue.is_set():
            producer_paused.set()
            producer_may_continue.wait()  # still running: the consumer works meanwhile
    return len(batches.keys)


@asset(partition_def=batches)
def checked_batch(context: AssetContext) -> int:
    """The consumer: one run per announced batch, told which event started it."""
    (event,) = context.triggering_events
    rows = event.extra["rows"]
    source = event.source.kind.value + (f" of {event.source.asset}" if event.source.asset else "")
    print(f"consumer: validating batch {context.partition_key} (event {event.id}, {rows} rows, {source})")
    return rows


flow = Flow(["receive_batches"])  # the producer: what `partita run examples/batch_validation.py` runs
validate_batches = Flow(["checked_batch"], name="validate_batches", trigger=OnAssetEvents(["arrived_batch"]))


def main() -> None:
    parser = argparse.ArgumentParser(description="Validate batches 41 and 42 while the producer still runs.")
    parser.add_argument("--store", metavar="URL", help="store URL (default: a new temporary SQLite file)")
    args = parser.parse_args()
    url = args.store or f"sqlite:///{Path(tempfile.mkdtemp(prefix='partita-batches-')) / 'partita.db'}"
    print(f"store: {url}")
    store = open_store(url)
    try:
        producer_may_continue.clear()
        outcome: dict[str, str] = {}

        def produce() -> None:
            outcome["status"] = Flow(["receive_batches"], store=store).run().status.value

        producer = threading.Thread(target=produce)
        producer.start()
        producer_paused.wait()
        print("producer: still running (paused after batch 42)")

        # One trigger pass; max_in_flight=1 keeps this printout in a fixed order.
        started = TriggerDaemon([validate_batches], store, max_in_flight=1).run_once()
        print(f"trigger pass: started {started} consumer runs")

        producer_may_continue.set()
        producer.join()
        print(f"producer: {outcome['status']} (batch 43: the source file is truncated)")

        again = TriggerDaemon([validate_batches], store).run_once()
        print(f"trigger pass after the failure: started {again} consumer runs")

        # Batch 41 is re-committed and announced again: a new event opens the key's next generation.
        receipt = publish_event(store, flow, "arrived_batch", partition_key="41", extra={"rows": 1030})
        print(f"external: batch 41 re-announced as event {receipt.id}")
        print(f"trigger pass after the re-announcement: started {TriggerDaemon([validate_batches], store).run_once()}")

        for request in TriggerStore(store).requests("validate_batches", ("finished",)):
            print(f"request: batch {request.partition_key} generation {request.generation} events {list(request.event_ids)}")
        statuses = [run.status for run in store.list_runs(limit=10)]
        print(f"runs recorded: {len(statuses)} ({statuses.count('success')} success, {statuses.count('failed')} failed)")
    finally:
        store.close()


if __name__ == "__main__":
    main()
