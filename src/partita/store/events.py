"""`StoreEventLog`: emission into the store, durable before the receipt returns."""

from __future__ import annotations

from collections.abc import Callable

from partita.events.model import AssetEvent, EmissionReceipt, EventDraft, SourceKind
from partita.store.protocol import Store

__all__ = ["StoreEventLog"]


class StoreEventLog:
    def __init__(self, store: Store) -> None:
        self._store = store
        # Emission calls this for every event: the store's own method, without a frame of ours.
        self.append: Callable[[EventDraft], EmissionReceipt] = store.record_event

    def record_discovery(self, domain: str, run_id: str, drafts: list[EventDraft]) -> None:
        """Discovery events and the partition registry update, in one transaction."""
        self._store.record_discovery(domain, run_id, drafts)

    def events_of_run(self, run_id: str) -> tuple[AssetEvent, ...]:
        """Events the run published itself (not its outlet events)."""
        kinds = (SourceKind.ATTEMPT, SourceKind.FLOW)
        return tuple(self._store.list_events(run_id=run_id, kinds=kinds))
