"""Materialization provenance in portable form: executed first, materialized next.

Run it twice with the same store root:

    python examples/materialization_provenance.py --root ./materialized
    python examples/materialization_provenance.py --root ./materialized

Each invocation runs one materialized asset for one day and prints the
attempt twice, both without the raw key: from the successful result's
version 4 record (``RunResult.to_record(version=4)``) and from the
``AttemptFinished`` event an observer received. The first invocation
executes the body and commits (``executed`` with the new materialization
id); the second loads that commit (``materialized`` with the same id).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from partita import (
    AssetRegistry,
    AttemptFinished,
    DatePartitionDef,
    ExecutionEvent,
    FileMaterialization,
    Flow,
    asset,
)

PROVENANCE_FIELDS = ("index", "partition_key_present", "status", "invocations", "resolution", "materialization_id")


def build_flow(root: Path) -> Flow:
    registry = AssetRegistry()
    days = DatePartitionDef(start="2026-01-01")

    @asset(partition_def=days, registry=registry, materialization=FileMaterialization(root), version="2026-08")
    def exchange_rates(context) -> dict:
        return {"day": context.partition_key.isoformat(), "EUR": 1.0, "USD": 1.09, "JPY": 171.4}

    return Flow(["exchange_rates"], registry=registry)


class FinishedAttempts:
    """An observer that keeps the portable v4 form of every finished attempt."""

    def __init__(self) -> None:
        self.documents: list[dict] = []

    def on_event(self, event: ExecutionEvent) -> None:
        if isinstance(event, AttemptFinished):
            attempt = event.attempt  # live: holds the raw key and output, so project it
            self.documents.append(
                {
                    "run_id": event.run_id,
                    "asset": attempt.asset_name,
                    "index": attempt.index,
                    "partition_key_present": attempt.partition_key_present,
                    "status": attempt.status.value,
                    "invocations": len(attempt.invocations),
                    "resolution": attempt.resolution.value if attempt.resolution else None,
                    "materialization_id": attempt.materialization_id,
                }
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print materialization provenance in portable v4 form.")
    parser.add_argument("--root", type=Path, required=True, help="store root (a local folder)")
    args = parser.parse_args(argv)

    finished = FinishedAttempts()
    result = build_flow(args.root).run({"partition_keys": ["2026-08-11"]}, observers=[finished])
    record = result.to_record(version=4)
    attempt = record["tasks"][0]["attempts"][0]
    print(f"run status: {record['status']} (record schema {record['schema']} version {record['version']})")
    print("result attempt (v4):", json.dumps({name: attempt[name] for name in PROVENANCE_FIELDS}))
    print("attempt-finished event (v4 form):", json.dumps(finished.documents[0]))
    return 0 if result.succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
