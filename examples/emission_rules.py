"""Emission rules: what `emit` accepts, what it rejects, and when a second emit is a duplicate.

`price_feed` publishes events for two other assets from its body: a valid
event, then one bad input per rule (each rejected with `EmissionError` before
anything is stored). It times out on its first invocation and is retried, to
show which events the retry publishes again. Finally an outside producer
publishes with `publish_event` into a store. Run it as a script:

    python examples/emission_rules.py
"""

from __future__ import annotations

import datetime as dt
import tempfile

from partita import (
    AssetContext,
    AssetRegistry,
    DatePartitionDef,
    EmissionError,
    Flow,
    RetryPolicy,
    asset,
    emit,
    open_store,
    publish_event,
)

registry = AssetRegistry()
days = DatePartitionDef(start="2026-01-01")


@asset(partition_def=days, registry=registry)
def daily_prices() -> None:
    """Published by `price_feed` below and by an outside system; its body is not run here."""


@asset(registry=registry)
def price_alert() -> None:
    """Unpartitioned: its events carry no key."""


def attempt(label: str, publish) -> None:
    try:
        receipt = publish()
    except EmissionError as error:
        print(f"{label}: EmissionError: {error}")
    else:
        print(f"{label}: event {receipt.id}" + (" (duplicate)" if receipt.duplicate else ""))


def check_rules(context: AssetContext) -> None:
    publish = context.emit
    august_8 = dt.datetime(2026, 8, 8, tzinfo=dt.UTC)
    attempt("valid", lambda: publish("daily_prices", partition_key="2026-08-08", partition_date=august_8))
    attempt("unknown asset", lambda: publish("daily_price", partition_key="2026-08-08"))
    attempt("no key for a partitioned asset", lambda: publish("daily_prices"))
    attempt("key for an unpartitioned asset", lambda: publish("price_alert", partition_key="2026-08-08"))
    attempt("key the definition rejects", lambda: publish("daily_prices", partition_key="2026-8-8"))
    attempt("date without a key", lambda: publish("price_alert", partition_date=august_8))
    naive = dt.datetime(2026, 8, 8)
    attempt("naive date", lambda: publish("daily_prices", partition_key="2026-08-08", partition_date=naive))
    attempt("extra not an object", lambda: publish("price_alert", extra=["eur", 1.2]))
    attempt("extra not strict JSON", lambda: publish("price_alert", extra={"ratio": float("nan")}))
    attempt("extra too large", lambda: publish("price_alert", extra={"blob": "x" * 70_000}))
    attempt("empty dedupe_key", lambda: publish("price_alert", dedupe_key=""))


def publish_from_helper() -> None:
    """Code without the context in reach uses partita.emit: it finds the running body itself."""
    attempt("partita.emit, a date object as key", lambda: emit("daily_prices", partition_key=dt.date(2026, 8, 9)))


@asset(registry=registry, retry=RetryPolicy(max_attempts=2))
def price_feed(context: AssetContext) -> str:
    print(f"invocation {context.invocation_number}:")
    if context.invocation_number == 1:
        check_rules(context)
        publish_from_helper()
    attempt("default identity", lambda: context.emit("price_alert", extra={"level": "high"}))
    attempt(
        "dedupe_key",
        lambda: context.emit("price_alert", extra={"level": "high"}, dedupe_key="alert-2026-08-08"),
    )
    attempt(
        "same dedupe_key again",
        lambda: context.emit("price_alert", extra={"level": "high"}, dedupe_key="alert-2026-08-08"),
    )
    attempt(
        "same dedupe_key, other extra",
        lambda: context.emit("price_alert", extra={"level": "low"}, dedupe_key="alert-2026-08-08"),
    )
    if context.invocation_number == 1:
        raise TimeoutError("the price feed timed out")
    return "prices loaded"


def main() -> None:
    attempt("at import or definition time", lambda: emit("price_alert"))

    result = Flow(["price_feed"], registry=registry).run()  # no store: events stay in memory
    print(f"run status: {result.status.value}; receipts: {len(result.receipts)}; events: {len(result.events)}")
    for event in result.events:
        print(
            f"  event {event.id}: {event.asset} {event.partition_key} {event.extra} "
            f"(invocation {event.source.invocation})"
        )

    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{folder}/events.db")
        try:
            for label in ("vendor file", "vendor file again"):  # e.g. a retried delivery
                attempt(
                    f"publish_event, {label}",
                    lambda: publish_event(
                        store,
                        registry,
                        "daily_prices",
                        partition_key="2026-08-10",
                        extra={"rows": 96},
                        dedupe_key="vendor-2026-08-10",
                    ),
                )
            attempt("publish_event without dedupe_key", lambda: publish_event(store, registry, "price_alert"))
            attempt("publish_event without dedupe_key", lambda: publish_event(store, registry, "price_alert"))
            for event in store.list_events():
                print(f"  stored event {event.id}: {event.asset} {event.partition_key} source {event.source.to_dict()}")
        finally:
            store.close()


if __name__ == "__main__":
    main()
