"""The ``partita.events`` document: events of the store's log in id order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partita.events.model import AssetEvent

__all__ = ["events_body"]


def events_body(store_url: str, events: Sequence[AssetEvent]) -> dict[str, Any]:
    return {"store": store_url, "events": [event.to_dict() for event in events]}
