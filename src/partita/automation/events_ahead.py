"""`EventsAhead`: the events of the requests a daemon read ahead, read with one query.

A consumer run hands its body the events that triggered it
(`AssetContext.triggering_events`). Read by each run, they cost one query
per run: a tenth of a one-key run when runs follow each other. A daemon
reads `READ_AHEAD` pending one-key requests at once
(`TriggerEvaluator.due_runs`); their events are read then too, in one query,
and each run takes its own from here.

What is held is the events of the requests read last and of those read the
time before (runs handed out from that window may not have started yet):
each read replaces the older window, keeping what the new one still needs.
Events never change once committed, so an event read earlier is the event.
Each run still gets objects of its own: ``extra`` (a dict a body may change)
is decoded again from JSON text kept in its place. An id not held (too many
events in one window, an ``extra`` too large to keep, joined its request
after the read, a request this daemon did not read ahead, a read that
failed) is read from the store by its run, as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from partita.events.model import AssetEvent, EventSource
from partita.store.triggers import TriggerRequest

if TYPE_CHECKING:
    from partita.store.sql import SqlStore

__all__ = ["EVENTS_AHEAD_LIMIT", "EXTRA_AHEAD_LIMIT", "EventsAhead"]

log = logging.getLogger("partita.triggers")

#: Most events one read ahead holds; requests with more than that are left to their runs.
EVENTS_AHEAD_LIMIT = 1024
#: Longest ``extra`` (as JSON text) a held event may carry: two windows stay within a few megabytes.
EXTRA_AHEAD_LIMIT = 2048


class _Held(NamedTuple):
    """An event as held: its fields, with ``extra`` as JSON text (None: too large to hold).

    One too large is left to its run, and not read ahead again while its request waits.
    """

    id: int
    asset: str
    partition_key: str | None
    partition_date: Any
    timestamp: Any
    source: EventSource
    extra: str | None

    def event(self) -> AssetEvent:
        """A new `AssetEvent`, with an ``extra`` of its own."""
        assert self.extra is not None
        return AssetEvent(
            self.id, self.asset, self.partition_key, self.partition_date, json.loads(self.extra), self.timestamp,
            self.source,
        )  # fmt: skip


class EventsAhead:
    """Events by id, read ahead of the runs that need them; filled by the daemon, read by consumer threads.

    Each read builds a new window and swaps it in; readers only look ids
    up in the two windows they find (``dict.get``), so nobody takes a lock.
    """

    def __init__(self, store: SqlStore, limit: int = EVENTS_AHEAD_LIMIT) -> None:
        self._store = store
        self._limit = limit
        self._current: dict[int, _Held] = {}
        self._previous: dict[int, _Held] = {}

    def __len__(self) -> int:
        """How many events runs can take from here (both windows)."""
        windows = (self._current, self._previous)
        return len({event_id for window in windows for event_id, held in window.items() if held.extra is not None})

    def read_ahead(self, requests: Iterable[TriggerRequest]) -> None:
        """Hold the events of ``requests`` (read in one query what is not held yet); never raises.

        A read that fails (or an event that cannot be decoded) only leaves
        those events to their runs, which read them and fail there if they must.
        """
        wanted = list(dict.fromkeys(i for request in requests for i in request.event_ids))
        if len(wanted) > self._limit:
            wanted = []  # more than one window holds: each run reads its own
        current, previous = self._current, self._previous
        window: dict[int, _Held] = {}
        missing = []
        for event_id in wanted:
            held = current.get(event_id) or previous.get(event_id)
            if held is None:
                missing.append(event_id)
            else:
                window[event_id] = held
        if missing:
            try:
                for event in self._store.list_events_by_ids(missing):
                    extra = json.dumps(event.extra)
                    window[event.id] = _Held(
                        event.id, event.asset, event.partition_key, event.partition_date, event.timestamp,
                        event.source, extra if len(extra) <= EXTRA_AHEAD_LIMIT else None,
                    )  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - reading ahead only saves the runs a read each
                log.debug("events read ahead of their runs could not be read (each run reads its own): %s", exc)
        self._previous, self._current = current, window

    def events(self, ids: Iterable[int]) -> list[AssetEvent]:
        """The events with ``ids`` in id order, unknown ids skipped (as `list_events_by_ids`), each a new object."""
        wanted = sorted(set(ids))
        current, previous = self._current, self._previous
        found: dict[int, AssetEvent] = {}
        missing = []
        for event_id in wanted:
            held = current.get(event_id) or previous.get(event_id)
            if held is None or held.extra is None:
                missing.append(event_id)
            else:
                found[event_id] = held.event()
        if missing:
            found.update((event.id, event) for event in self._store.list_events_by_ids(missing))
        return [found[event_id] for event_id in wanted if event_id in found]
