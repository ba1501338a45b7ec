"""Publish what is available after a partial failure, deliberately and repeatably.

    python examples/partial_aggregation.py --root ./materialized --snapshot ./orders-snapshot.json

A producer runs over five days; two exports are missing, so the run fails
and no downstream asset would see an incomplete input. Afterwards the
application decides to publish what exists: it builds the contexts for the
selected days, asks ``FileMaterialization.available`` which are committed
(missing ones are skipped), loads them explicitly, aggregates them with
ordinary Python and replaces one local snapshot file atomically. The
snapshot carries a receipt of the included materialization ids, and the
publication id is a hash of those ids: the same selection gives the same id.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from partita import (
    AssetRegistry,
    DatePartitionDef,
    FileMaterialization,
    Flow,
    MaterializationContext,
    asset,
)

days = DatePartitionDef(start="2026-01-01")
VERSION = "1"
MISSING_EXPORTS = {"2026-08-09", "2026-08-11"}  # these days fail on every run


def build_flow(store: FileMaterialization) -> Flow:
    registry = AssetRegistry()

    @asset(partition_def=days, registry=registry, materialization=store, version=VERSION)
    def daily_orders(context) -> dict:
        day = context.partition_key.isoformat()
        if day in MISSING_EXPORTS:
            raise FileNotFoundError("the order export for this day has not arrived")
        count = context.partition_key.day % 4 + 1
        return {"day": day, "orders": count, "revenue_cents": 1_250 * count}

    return Flow(["daily_orders"], registry=registry)


def context_for(key) -> MaterializationContext:
    """The exact identity the engine uses for daily_orders on the typed ``key``."""
    return MaterializationContext(
        asset_name="daily_orders",
        version=VERSION,
        partition_domain=days.domain,
        partition_key=key,
        partition_key_text=days.format_key(key),
        partition_key_present=True,
    )


def publish(snapshot: Path, document: dict) -> None:
    """Replace ``snapshot`` atomically: readers see the old file or the new one."""
    data = json.dumps(document, indent=1, sort_keys=True).encode("utf-8")
    handle, temporary = tempfile.mkstemp(dir=snapshot.parent, prefix=f".{snapshot.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, snapshot)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Aggregate the committed outputs of a partially failed run.")
    parser.add_argument("--root", type=Path, required=True, help="store root (a local folder)")
    parser.add_argument("--snapshot", type=Path, default=Path("orders-snapshot.json"), help="the file to publish")
    args = parser.parse_args(argv)

    store = FileMaterialization(args.root)
    result = build_flow(store).run({"partition_range": ("2026-08-08", "2026-08-12")})
    failed = result.failed_partition_keys("daily_orders")  # kept: the live result knows which days
    print(f"producer run: {result.status.value}; failed days: {[day.isoformat() for day in failed]}")

    # The application chooses the selection; the adapter never scans its root.
    contexts = [context_for(key) for key in result.plan.partition_keys]
    by_text = {context.partition_key_text: context for context in contexts}
    records = store.available(contexts)  # in context order; missing or invalidated are skipped
    rows = [store.load(by_text[record.partition_key_text], record) for record in records]

    included = sorted(record.materialization_id for record in records)
    publication_id = hashlib.sha256("\n".join(included).encode("ascii")).hexdigest()
    document = {
        "publication_id": publication_id,
        "rows": rows,
        "totals": {
            "orders": sum(row["orders"] for row in rows),
            "revenue_cents": sum(row["revenue_cents"] for row in rows),
        },
        "receipt": {"selected": len(contexts), "included": len(records), "materialization_ids": included},
    }
    previous = json.loads(args.snapshot.read_text())["publication_id"] if args.snapshot.exists() else None
    publish(args.snapshot, document)
    skipped = [text for text in by_text if text not in {record.partition_key_text for record in records}]
    print(f"included {len(records)} of {len(contexts)} selected days: {[row['day'] for row in rows]}")
    print(f"not available, left out: {skipped}")
    print(f"totals: {document['totals']}")
    print(f"published {args.snapshot.name}: publication {publication_id}")
    print(f"same publication as the previous snapshot: {previous == publication_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
