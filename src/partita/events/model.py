"""Asset events and emission receipts (SPEC §8)."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["AssetEvent", "EmissionReceipt", "EventDraft", "EventSource", "SourceKind", "now"]


class SourceKind(enum.Enum):
    ATTEMPT = "attempt"  # emitted from an asset body or an asset callback
    OUTLET = "outlet"  # recorded automatically for a successful attempt
    FLOW = "flow"  # emitted from a flow callback: no attempt fields
    EXTERNAL = "external"  # published from outside partita (CLI or API)
    DISCOVERY = "discovery"  # a key declared by a discovering producer


class EventSource(NamedTuple):
    """Who published an event: a run's attempt, a flow callback, or an external producer.

    A named tuple: one is built for every outlet event, so it must be cheap.
    """

    kind: SourceKind
    run_id: str | None = None
    asset: str | None = None
    partition_key_present: bool | None = None
    invocation: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "run_id": self.run_id,
            "asset": self.asset,
            "partition_key_present": self.partition_key_present,
            "invocation": self.invocation,
        }


class EventDraft(NamedTuple):
    """A validated event before it has an id: what an event log stores."""

    asset: str
    partition_key: str | None
    partition_date: dt.datetime | None
    extra: dict[str, Any]
    source: EventSource
    #: None for outlet and discovery events, written exactly once with their attempt.
    dedupe_key: str | None
    payload_hash: str | None
    #: A datetime, or seconds since the epoch for events partita builds in bulk.
    timestamp: dt.datetime | float
    #: ``extra`` as the stored compact JSON, when validation already encoded it.
    extra_json: str | None = None


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class AssetEvent:
    """A published event: the key is canonical text (the routing pointer downstream work needs)."""

    id: int
    asset: str
    partition_key: str | None
    partition_date: dt.datetime | None
    extra: dict[str, Any]
    timestamp: dt.datetime
    source: EventSource

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "asset": self.asset,
            "partition_key": self.partition_key,
            "partition_date": None if self.partition_date is None else self.partition_date.isoformat(),
            "extra": self.extra,
            "timestamp": self.timestamp.isoformat(),
            "source": self.source.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class EmissionReceipt:
    """Proof that an event is stored; ``duplicate`` when its dedupe identity was already used."""

    id: int
    timestamp: dt.datetime
    duplicate: bool = False
