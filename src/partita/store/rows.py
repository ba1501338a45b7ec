"""Conversions between stored rows and values that more than one store needs.

Events are written by the event log, by run progress (outlet events) and by
discovery (the partition registry); times are stored as POSIX seconds
everywhere. One copy of each conversion keeps the stores' rows alike.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from partita.events.model import AssetEvent, EventDraft, EventSource, SourceKind

__all__ = ["event_of", "event_row", "utc_datetime"]


def utc_datetime(timestamp: float | None) -> dt.datetime | None:
    """A stored POSIX timestamp as an aware UTC datetime (None stays None)."""
    return None if timestamp is None else dt.datetime.fromtimestamp(timestamp, dt.UTC)


def event_row(draft: EventDraft) -> tuple[Any, ...]:
    """An events row without its id, in table column order."""
    source = draft.source
    return (
        draft.asset,
        draft.partition_key,
        None if draft.partition_date is None else draft.partition_date.isoformat(),
        draft.extra_json or (json.dumps(draft.extra, separators=(",", ":")) if draft.extra else "{}"),
        draft.timestamp if isinstance(draft.timestamp, float) else draft.timestamp.timestamp(),
        source.kind.value,
        source.run_id,
        source.asset,
        source.partition_key_present,
        source.invocation,
        draft.dedupe_key,
        draft.payload_hash,
    )


def event_of(row: Any) -> AssetEvent:
    """The event an events row holds: every column, in table order (a SQLAlchemy row or a driver's tuple)."""
    (
        id_, asset, partition_key, partition_date, extra, timestamp,
        source_kind, source_run_id, source_asset, source_key_present, source_invocation, *_,
    ) = row  # fmt: skip
    return AssetEvent(
        id=int(id_),
        asset=asset,
        partition_key=partition_key,
        partition_date=None if partition_date is None else dt.datetime.fromisoformat(partition_date),
        extra=json.loads(extra),
        timestamp=utc_datetime(timestamp),  # type: ignore[arg-type]
        source=EventSource(
            kind=SourceKind(source_kind),
            run_id=source_run_id,
            asset=source_asset,
            partition_key_present=None if source_key_present is None else bool(source_key_present),
            invocation=source_invocation,
        ),
    )
