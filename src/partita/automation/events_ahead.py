"""`EventsAhead`: the events of the requests a daemon read ahead, read with one query.

A consumer run hands its body the events that triggered it
(`AssetContext.triggering_events`). Read by each run, they cost one query
per run: a tenth of a one-key run when runs follow each other. A daemon
reads `READ_AHEAD` pending one-key requests at once
(`TriggerEvaluator.due_runs`); their events are read then too, in one query,
and each run takes its own from here.

Events never change once committed, so an event read earlier is the event.
Each run still gets objects of its own (``extra`` is a dict a body may
change), its ``extra`` decoded again from JSON text kept beside the event.
An id not held here (dropped for room, an ``extra`` too large to keep,
joined its request after the read, a request this daemon did not read
ahead) is read from the store, as before.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Protocol

from partita.errors import PartitaError
from partita.events.model import AssetEvent
from partita.store.triggers import TriggerRequest

__all__ = ["EVENTS_AHEAD_LIMIT", "EXTRA_AHEAD_LIMIT", "EventsAhead"]

log = logging.getLogger("partita.triggers")

#: Most events held at once; the oldest make room.
EVENTS_AHEAD_LIMIT = 4096
#: Longest ``extra`` (as JSON text) an event held here may carry: the cache stays within a few megabytes.
EXTRA_AHEAD_LIMIT = 2048


class EventReader(Protocol):
    def list_events_by_ids(self, ids: Sequence[int]) -> list[AssetEvent]: ...


class EventsAhead:
    """Events by id, read ahead of the runs that need them; filled by the daemon, read by consumer threads.

    Readers only look ids up (one atomic ``dict.get`` each), so they take
    no lock; the lock keeps two fillers apart.
    """

    def __init__(self, limit: int = EVENTS_AHEAD_LIMIT) -> None:
        self._limit = limit
        #: id -> (the event, its ``extra`` as JSON text), oldest first.
        self._held: dict[int, tuple[AssetEvent, str]] = {}
        self._filling = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def read_ahead(self, store: EventReader, requests: Iterable[TriggerRequest]) -> None:
        """Read the events of ``requests`` not held yet, in one query; if that fails, their runs read them."""
        with self._filling:
            held = self._held
            wanted = list(dict.fromkeys(i for request in requests for i in request.event_ids if i not in held))
            if not wanted or len(wanted) > self._limit:
                return  # more than fits: each run reads its own
            try:
                found = store.list_events_by_ids(wanted)
            except PartitaError as exc:
                log.debug("events read ahead of their runs could not be read (each run reads its own): %s", exc)
                return
            for event in found:
                extra = json.dumps(event.extra)
                if len(extra) <= EXTRA_AHEAD_LIMIT:
                    held[event.id] = (event, extra)
            excess = len(held) - self._limit
            if excess > 0:
                for event_id in list(itertools.islice(held, excess)):
                    del held[event_id]

    def events(self, store: EventReader, ids: Iterable[int]) -> list[AssetEvent]:
        """The events with ``ids`` in id order, unknown ids skipped (as `list_events_by_ids`), each a new object."""
        wanted = sorted(set(ids))
        found: dict[int, AssetEvent] = {}
        missing = []
        held = self._held
        for event_id in wanted:
            entry = held.get(event_id)
            if entry is None:
                missing.append(event_id)
            else:
                event, extra = entry
                found[event_id] = AssetEvent(
                    event.id, event.asset, event.partition_key, event.partition_date, json.loads(extra),
                    event.timestamp, event.source,
                )  # fmt: skip
        if missing:
            found.update((event.id, event) for event in store.list_events_by_ids(missing))
        return [found[event_id] for event_id in wanted if event_id in found]
