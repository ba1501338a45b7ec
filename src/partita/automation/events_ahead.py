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
Each run still gets objects of its own: what is held is the stored rows,
undecoded, and each run decodes its own (`rows.event_of`), ``extra`` (a
dict a body may change) included. An id not held (too many
events in one window, an ``extra`` too large to keep, joined its request
after the read, a request this daemon did not read ahead, a read that
failed) is read from the store by its run, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from partita.events.model import AssetEvent
from partita.store.rows import event_of
from partita.store.schema import events as events_table
from partita.store.triggers import TriggerRequest

if TYPE_CHECKING:
    from partita.store.sql import SqlStore

__all__ = ["EVENTS_AHEAD_LIMIT", "EXTRA_AHEAD_LIMIT", "EventsAhead"]

log = logging.getLogger("partita.triggers")

#: Most events one read ahead holds; requests with more than that are left to their runs.
EVENTS_AHEAD_LIMIT = 1024
#: Longest ``extra`` (as JSON text) a held event may carry: two windows stay within a few megabytes.
EXTRA_AHEAD_LIMIT = 2048
#: Where an events row carries its ``extra`` JSON text.
_EXTRA = list(events_table.columns.keys()).index("extra")
#: Held in a row's place when its ``extra`` is too large to hold: left to its run, not read ahead again
#: while its request waits.
_TOO_LARGE: tuple[Any, ...] = ()


class EventsAhead:
    """Events by id, read ahead of the runs that need them; filled by the daemon, read by its consumer runs.

    Each read builds a new window and swaps it in; readers only look ids
    up in the two windows they find (``dict.get``), so nobody takes a lock.
    """

    def __init__(self, store: SqlStore, limit: int = EVENTS_AHEAD_LIMIT) -> None:
        self._store = store
        self._limit = limit
        self._current: dict[int, tuple[Any, ...]] = {}
        self._previous: dict[int, tuple[Any, ...]] = {}

    def __len__(self) -> int:
        """How many events runs can take from here (both windows)."""
        windows = (self._current, self._previous)
        return len({event_id for window in windows for event_id, held in window.items() if held is not _TOO_LARGE})

    def read_ahead(self, requests: Iterable[TriggerRequest]) -> None:
        """Hold the events of ``requests`` (read in one query what is not held yet); never raises.

        A read that fails only leaves those events to their runs, which read
        them and fail there if they must; so does a row a run cannot decode.
        """
        wanted = list(dict.fromkeys(i for request in requests for i in request.event_ids))
        if len(wanted) > self._limit:
            wanted = []  # more than one window holds: each run reads its own
        current, previous = self._current, self._previous
        window: dict[int, tuple[Any, ...]] = {}
        missing = []
        for event_id in wanted:
            held = current.get(event_id, previous.get(event_id))
            if held is None:
                missing.append(event_id)
            else:
                window[event_id] = held
        if missing:
            try:
                for row in self._store.event_rows_by_ids(missing):
                    window[int(row[0])] = row if len(row[_EXTRA]) <= EXTRA_AHEAD_LIMIT else _TOO_LARGE
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
            held = current.get(event_id, previous.get(event_id))
            if not held:  # not held, or too large to hold
                missing.append(event_id)
            else:
                found[event_id] = event_of(held)
        if missing:
            found.update((event.id, event) for event in self._store.list_events_by_ids(missing))
        return [found[event_id] for event_id in wanted if event_id in found]
