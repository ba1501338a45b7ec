"""Invalidate one committed output, rebuild it deliberately, and reuse the rebuild.

    python examples/materialization_invalidation.py --root ./materialized

The steps: run a materialized asset for one day (it commits), inspect that
identity, invalidate it with a reason, inspect again, explicitly run the day
once more (the body executes and commits a new generation in a new epoch),
and run it a third time to see the new generation reused. Inspection never
runs an asset, decodes an output or changes the store.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from partita import (
    AssetRegistry,
    DatePartitionDef,
    FileMaterialization,
    FileMaterializationError,
    Flow,
    MaterializationContext,
    asset,
)

days = DatePartitionDef(start="2026-01-01")
VERSION = "1"
DAY = "2026-08-11"


def build_flow(store: FileMaterialization) -> Flow:
    registry = AssetRegistry()

    @asset(partition_def=days, registry=registry, materialization=store, version=VERSION)
    def daily_prices(context) -> dict:
        print(f"  daily_prices body running for {context.partition_key.isoformat()}")
        return {"day": context.partition_key.isoformat(), "prices": [101.5, 99.8, 100.2]}

    return Flow(["daily_prices"], registry=registry)


def context_for(day: str) -> MaterializationContext:
    """The exact identity the engine uses for daily_prices on ``day``."""
    key = days.normalize_key(day)  # the typed key (a datetime.date), not the text
    return MaterializationContext(
        asset_name="daily_prices",
        version=VERSION,
        partition_domain=days.domain,
        partition_key=key,
        partition_key_text=days.format_key(key),
        partition_key_present=True,
        input_materialization_ids=(),  # daily_prices has no inputs
    )


def run_once(flow: Flow, label: str) -> str:
    result = flow.run({"partition_keys": [DAY]})  # an explicit selection, never automatic
    attempt = result.tasks["daily_prices"].attempts[0]
    print(f"{label}: {attempt.status.value}, {attempt.resolution.value}, materialization {attempt.materialization_id}")
    return attempt.materialization_id


def show(store: FileMaterialization, context: MaterializationContext, label: str) -> None:
    inspection = store.inspect(context)
    epoch = inspection.record.metadata["epoch"] if inspection.record else "-"
    print(f"inspect {label}: {inspection.state.value} (epoch {epoch}) {inspection.detail}".rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Invalidate and rebuild one materialized partition.")
    parser.add_argument("--root", type=Path, required=True, help="store root (a local folder)")
    args = parser.parse_args(argv)

    store = FileMaterialization(args.root)
    flow = build_flow(store)
    context = context_for(DAY)
    show(store, context_for("2026-08-12"), "another day")

    first = run_once(flow, "first run")
    show(store, context, "after the first run")
    stale = store.resolve(context)
    identity = context.identity_hash()  # file names hold this hash, never the key
    reference = Path("refs", identity[0], f"{identity}.json")  # the layout is documented
    old_reference = (args.root / reference).read_bytes()

    # Quiesce every run that could use this identity before invalidating it.
    epoch = store.invalidate(context, reason="the price feed republished 2026-08-11")
    print(f"invalidated: epoch {epoch}")
    show(store, context, "after invalidation")
    try:
        store.load(context, stale)
    except FileMaterializationError as error:
        print(f"loading the revoked record: {type(error).__name__}: {error}")

    rebuilt = run_once(flow, "explicit rebuild")
    show(store, context, "after the rebuild")
    reused = run_once(flow, "next run")
    print(f"new generation: {rebuilt != first}; reused by the next run: {reused == rebuilt}")
    generation = Path("objects", identity[0])  # one file per generation: <identity>.<materialization id>
    kept = (args.root / generation / f"{identity}.{first}").is_file()
    print(f"the revoked generation is still on disk: {kept}")  # nothing is deleted

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "copy"
        shutil.copytree(args.root, copy)  # the whole root, invalidations/ included
        # Size and SHA-256 are checked before anything is decoded.
        damaged = copy / generation / f"{identity}.{rebuilt}"  # the manifest line, then the payload
        damaged.write_bytes(damaged.read_bytes().replace(b"[101.5", b"[999.9"))
        show(FileMaterialization(copy), context, "a damaged copy")
        # Putting the pre-invalidation reference back does not revive it: the ledger's epoch wins.
        (copy / reference).write_bytes(old_reference)
        show(FileMaterialization(copy), context, "the old reference restored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
