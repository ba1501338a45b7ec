"""Publishing events from outside partita (scripts, other systems, the CLI, the web UI).

The text parsers read a date and an ``extra`` typed by a person (a flag, a
form field) the same way wherever they were typed.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from partita.errors import ConfigurationError
from partita.events.emission import EventSink, catalog_of, prepare_event
from partita.events.extra import MAX_EXTRA_DEPTH, json_text_depth
from partita.events.model import EmissionReceipt, EventSource, SourceKind

__all__ = ["parse_extra_text", "parse_partition_date", "publish_event"]


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


def parse_partition_date(text: str | None, field: str = "partition_date") -> dt.datetime | None:
    """``text`` as an aware date-time (ISO 8601 with a UTC offset); ConfigurationError naming ``field`` otherwise."""
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(f"{field} must be an ISO 8601 date-time with a UTC offset") from None
    if value.tzinfo is None:
        raise ConfigurationError(f"{field} must carry a UTC offset (for example 2026-08-08T00:00:00+00:00)")
    return value


def parse_extra_text(text: str | None, field: str = "extra") -> Any:
    """``text`` as strict JSON, its depth checked before parsing (``json.loads`` recurses once per level)."""
    if text is None:
        return None
    if json_text_depth(text) > MAX_EXTRA_DEPTH:
        raise ConfigurationError(f"{field} nests deeper than {MAX_EXTRA_DEPTH} levels of objects and arrays")
    try:
        return json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    except ValueError:
        raise ConfigurationError(f"{field} must be a JSON object, for example '{{\"rows\": 100}}'") from None
