"""Publishing events from outside partita (scripts, other systems, the CLI)."""

from __future__ import annotations

import uuid
from typing import Any

from partita.events.emission import EventSink, catalog_of, prepare_event
from partita.events.model import EmissionReceipt, EventSource, SourceKind

__all__ = ["publish_event"]


def publish_event(
    log: EventSink | Any,
    definitions: Any,
    asset: Any,
    *,
    partition_key: Any = None,
    partition_date: Any = None,
    extra: Any = None,
    dedupe_key: str | None = None,
) -> EmissionReceipt:
    """Validate an event against ``definitions`` and publish it with source ``external``.

    ``log`` is a `Store` (durable) or any event log; ``definitions`` is an
    `AssetRegistry` or a `Flow` whose registry defines the asset. Without a
    ``dedupe_key`` every call publishes a new event; pass one to make
    retries of the same publication idempotent.
    """
    registry = getattr(definitions, "registry", definitions)
    catalog = catalog_of(registry.definitions())
    draft = prepare_event(
        catalog,
        asset,
        partition_key=partition_key,
        partition_date=partition_date,
        extra=extra,
        dedupe_key=dedupe_key,
        source=EventSource(SourceKind.EXTERNAL),
        automatic_dedupe=lambda: f"external:{uuid.uuid4().hex}",
    )
    if hasattr(log, "record_event"):
        return log.record_event(draft)  # type: ignore[no-any-return]
    return log.append(draft)  # type: ignore[no-any-return]
