"""Publishing events from outside partita (scripts, other systems, the CLI)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from partita.errors import ConfigurationError
from partita.events.emission import EventSink, catalog_of, prepare_event
from partita.events.extra import MAX_EXTRA_DEPTH, json_text_depth
from partita.events.model import EmissionReceipt, EventSource, SourceKind

__all__ = ["parse_extra_text", "parse_partition_date", "publish_event", "receipt_document"]


def parse_partition_date(text: str | None, field: str = "--partition-date") -> dt.datetime | None:
    """An event's ``partition_date`` given as text (``field`` names it): ISO 8601 with a UTC offset."""
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(f"{field} must be an ISO 8601 date-time with a UTC offset") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigurationError(f"{field} must carry a UTC offset (for example 2026-08-08T00:00:00+00:00)")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON


def parse_extra_text(text: str | None, field: str = "--extra") -> Any:
    """JSON text (``field`` names it), refused when too deep before it is parsed: ``json.loads`` recurses per level."""
    if text is None:
        return None
    if json_text_depth(text) > MAX_EXTRA_DEPTH:
        raise ConfigurationError(f"{field} nests deeper than {MAX_EXTRA_DEPTH} levels of objects and arrays")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        raise ConfigurationError(f"{field} must be a JSON object, for example '{{\"rows\": 100}}'") from None


def receipt_document(receipt: EmissionReceipt) -> dict[str, Any]:
    """The ``receipt`` of the ``partita.emission`` document."""
    return {"id": receipt.id, "timestamp": receipt.timestamp.isoformat(), "duplicate": receipt.duplicate}


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
