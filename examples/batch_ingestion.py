"""Batch ingestion: announce each batch the moment it is committed, not when the run ends.

One asset body, `ingest`, works through batches 40 to 44. For each batch it
commits a file (a temporary file, then ``os.replace``) and then publishes a
readiness event for that batch's partition of the `batch` asset. The source
of batch 43 is damaged, so the body raises there: the events for 40, 41 and 42
were stored before the failure and stay published.

    python examples/batch_ingestion.py [--out FOLDER] [--store URL]
    partita run examples/batch_ingestion.py --yes
    partita events list --asset batch

Batch files go to ``--out``, else ``$BATCH_OUTPUT``, else ``out/batches``. As
a script, events are kept in ``--store`` (default ``sqlite:///<out>/events.db``);
``partita run`` uses the CLI's store (``--store``, ``$PARTITA_STORE`` or
``.partita/partita.db``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from partita import AssetContext, AssetEvent, Flow, SourceKind, StaticPartitionDef, asset, open_store

BATCH_NUMBERS = range(40, 45)
batches = StaticPartitionDef("batches", [str(number) for number in BATCH_NUMBERS])
damaged = {"43"}  # batches whose source file is truncated; the script repairs it before its second run


def output_folder() -> Path:
    return Path(os.environ.get("BATCH_OUTPUT", "out/batches"))


def commit_batch(key: str) -> int:
    """Write one batch file atomically: a reader sees the whole file or none of it."""
    rows = 1000 + 25 * (int(key) - 40)
    folder = output_folder()
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".batch-{key}.csv.tmp"
    with open(temporary, "w") as handle:
        handle.write("row\n" + "".join(f"{key}-{row}\n" for row in range(rows)))
        handle.flush()
        os.fsync(handle.fileno())  # on disk before the rename makes it visible
    os.replace(temporary, folder / f"batch-{key}.csv")
    return rows


@asset(partition_def=batches)
def batch() -> None:
    """One committed batch file. `ingest` writes it and announces it; nothing runs this body."""


@asset
def ingest(context: AssetContext) -> int:
    """Commit batches one by one and announce each as soon as it is durable."""
    for key in batches.keys:
        if key in damaged:
            raise RuntimeError(f"batch {key}: the source file is truncated")
        rows = commit_batch(key)  # first the data is committed ...
        receipt = context.emit(  # ... then the event that points at it
            "batch",
            partition_key=key,  # explicit: `ingest` itself is not partitioned
            extra={"rows": rows},
            dedupe_key=f"batch-{key}",  # re-committing the same batch does not announce it twice
        )
        state = "already announced as" if receipt.duplicate else "announced as"
        print(f"  batch {key}: committed {rows} rows, {state} event {receipt.id}")
    return len(batches.keys)


@asset(partition_def=batches)
def validated_batch(context: AssetContext) -> int:
    """A consumer: checks one announced batch file and returns its row count."""
    path = output_folder() / f"batch-{context.partition_key}.csv"
    return len(path.read_text().splitlines()) - 1  # minus the header


flow = Flow(["ingest"])  # what `partita run examples/batch_ingestion.py` runs


def describe(event: AssetEvent, run_names: dict[str, str]) -> str:
    """One event and its provenance: which kind of producer, which asset, invocation and run."""
    source = event.source
    run = run_names.get(source.run_id, source.run_id[:8])  # runs of earlier script runs by id
    return (
        f"event {event.id}: {event.asset} {event.partition_key} {event.extra} "
        f"<- {source.kind.value} of {source.asset}, invocation {source.invocation}, run {run}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Ingest batches 40..44 and announce each committed batch.")
    parser.add_argument("--out", default=os.environ.get("BATCH_OUTPUT", "out/batches"), help="batch file folder")
    parser.add_argument("--store", metavar="URL", help="event store (default: sqlite:///<out>/events.db)")
    args = parser.parse_args()
    os.environ["BATCH_OUTPUT"] = args.out  # the bodies read it, exactly as under `partita run`
    store = open_store(args.store or f"sqlite:///{Path(args.out)}/events.db")
    try:
        run_names: dict[str, str] = {}

        print("first run:")
        first = Flow(["ingest"], store=store).run()
        run_names[first.run_id] = "first"
        failure = first.tasks["ingest"].attempts[0].failure
        print(f"first run: {first.status.value} ({failure.type}: {failure.message})")

        announced = store.list_events(asset="batch")  # read back from the store, not from the result
        for event in announced:
            print(describe(event, run_names))
        outlets = store.list_events(run_id=first.run_id, kinds=[SourceKind.OUTLET])
        print(f"outlet events of the first run: {len(outlets)}")  # `ingest` never succeeded

        # A consumer can work on the announced batches while batch 43 is being repaired.
        keys = [event.partition_key for event in announced]
        consumer = Flow(["validated_batch"], store=store).run({"partition_keys": keys})
        for attempt in consumer.tasks["validated_batch"].attempts:
            print(f"consumer: batch {attempt.partition_key} has {attempt.output} rows")

        damaged.clear()  # the source of batch 43 was fixed: run the producer again
        print("second run:")
        second = Flow(["ingest"], store=store).run()
        run_names[second.run_id] = "second"
        print(f"second run: {second.status.value}")
        for event in store.list_events(asset="batch"):
            print(describe(event, run_names))
        for event in store.list_events(asset="ingest"):
            print(f"outlet: {describe(event, run_names)}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
