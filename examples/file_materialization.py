"""Reuse a committed partition output across processes with FileMaterialization.

Three invocations, each a separate process sharing one store root:

    python examples/file_materialization.py seed  --root ./materialized --partition-key 2026-08-11
    python examples/file_materialization.py fail  --root ./materialized --partition-key 2026-08-11
    python examples/file_materialization.py retry --root ./materialized --partition-key 2026-08-11

``seed`` runs the producer for the day and commits its output. ``fail`` runs
the producer and a summary whose body has a bug: the run fails after the
producer's output is committed. ``retry`` is the next process, with the bug
fixed: the producer's output is loaded from the store (its body is not
called) and only the summary executes. The exit code is 0 when the run
succeeded, 1 when an asset failed and 2 for a rejected selection, like
``partita run``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from partita import (
    AssetRegistry,
    ConfigurationError,
    DatePartitionDef,
    FileMaterialization,
    Flow,
    JsonCodec,
    RunResult,
    asset,
)

days = DatePartitionDef(start="2026-01-01")


def build_registry(root: Path, *, summary_fixed: bool) -> AssetRegistry:
    """The producer and its summary, both committed under ``root``."""
    registry = AssetRegistry()
    store = FileMaterialization(root, codec=JsonCodec())

    @asset(partition_def=days, registry=registry, materialization=store, version="1")
    def daily_orders(context) -> dict:
        day = context.partition_key
        print(f"daily_orders body running for {day.isoformat()}")  # absent when the output is reused
        orders = [{"order_id": f"{day:%Y%m%d}-{n}", "amount_cents": 1_000 + 250 * n} for n in range(day.day % 5 + 2)]
        return {"day": day.isoformat(), "orders": orders}

    @asset(partition_def=days, registry=registry, materialization=store, version="1")
    def order_summary(daily_orders: dict) -> dict:
        field = "amount_cents" if summary_fixed else "amount"  # the bug `retry` has fixed
        revenue = sum(order[field] for order in daily_orders["orders"])
        return {"day": daily_orders["day"], "orders": len(daily_orders["orders"]), "revenue_cents": revenue}

    return registry


def report(result: RunResult) -> None:
    print(f"run {result.run_id}: {result.status.value}")
    for attempt in result.attempts():
        key = attempt.partition_key.isoformat()
        resolution = attempt.resolution.value if attempt.resolution else "-"
        print(
            f"{attempt.asset_name} {key} {attempt.status.value} "
            f"resolution={resolution} materialization_id={attempt.materialization_id or '-'}"
        )
        if attempt.failure is not None:
            print(f"  failure: {attempt.failure.type}: {attempt.failure.message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Commit, fail and retry one partition with FileMaterialization.")
    parser.add_argument("command", choices=["seed", "fail", "retry"])
    parser.add_argument("--root", type=Path, required=True, help="store root (a local folder)")
    parser.add_argument("--partition-key", required=True, help="the day to run, YYYY-MM-DD")
    args = parser.parse_args(argv)

    registry = build_registry(args.root, summary_fixed=args.command == "retry")
    target = "daily_orders" if args.command == "seed" else "order_summary"
    try:
        result = Flow([target], registry=registry).run({"partition_keys": [args.partition_key]})
    except ConfigurationError as error:  # a bad key is rejected before any body runs
        print(f"error: {error}", file=sys.stderr)
        return 2
    report(result)
    return 0 if result.succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
