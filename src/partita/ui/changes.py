"""What changed in the store, told to every connected page: one poller per server, however many clients.

A thread reads the store's change markers (`partita.store.change_markers`)
every `POLL_SECONDS` while anyone subscribes, compares them with the last
read, and hands each subscription the messages that concern it. The store
is the only channel, so a run in another process, ``partita events emit``
or another UI server are seen as soon as they commit, on SQLite and
PostgreSQL; on PostgreSQL a ``LISTEN`` for new events wakes the poller at
once (and announces an event committed out of id order, which the newest
id alone would not show).

A subscription keeps only the newest message of each kind until its client
reads it, so a slow client costs a few strings, never a growing queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from partita.errors import StoreError
from partita.store.change_markers import ChangeMarkers, MarkerReader, RunProgress, RunsMarker
from partita.store.notifications import EventListener, listen_for_events
from partita.store.sql import SqlStore

__all__ = ["POLL_SECONDS", "ChangeFeed", "MessageKind", "Subscription", "subscribed"]

log = logging.getLogger("partita.ui.changes")

#: How often the markers are read while someone listens: well within the one second pages promise.
POLL_SECONDS = 0.2
#: The longest wait between two reads of a watched run's attempt progress.
_SLOWEST_PROGRESS = 0.7
#: The shortest time between two ``attempts`` messages: a busy run redraws asset grids twice a second at most.
_ATTEMPTS_EVERY = 0.5


class MessageKind(enum.StrEnum):
    """The stream's message names (the SSE ``event`` field), in the order a batch sends them."""

    RUNS = "runs"
    RUN = "run"
    EVENTS = "events"
    LOGS = "logs"
    ATTEMPTS = "attempts"


@dataclass(eq=False)
class Subscription:
    """One client's interest: every run change, its run's changes and logs, every event or one asset's."""

    run_id: str | None
    asset: str | None
    loop: asyncio.AbstractEventLoop
    #: Messages sent with their current value on the first read, whether or not anything changed.
    initial: frozenset[MessageKind] = frozenset()
    #: The newest event id the client's page already shows: an initial ``events`` message equal to it is not sent.
    shown_events: int | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    #: Not read for yet (the poller's next read sends the ``initial`` messages).
    fresh: bool = True
    _pending: dict[MessageKind, str] = field(default_factory=dict)
    _sequence: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def offer(self, kind: MessageKind, data: str, sequence: int = 0) -> None:
        """Keep ``data`` as the newest message of its kind and wake the client (from any thread).

        ``sequence`` numbers the poller's reads: the client's ``Last-Event-ID``.
        """
        with self._lock:
            self._pending[kind] = data
            self._sequence = max(self._sequence, sequence)
        self._wake()

    def take(self) -> tuple[list[tuple[MessageKind, str]], int]:
        """The waiting messages, in `MessageKind` order, and the newest read's number; called after ``ready``."""
        with self._lock:
            pending, self._pending = self._pending, {}
            sequence = self._sequence
        return [(kind, pending[kind]) for kind in MessageKind if kind in pending], sequence

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the client's loop is gone: nothing to wake
            self.loop.call_soon_threadsafe(self.ready.set)


@dataclass
class _Seen:
    """The markers of the last read, to compare the next one with."""

    events: int = -1
    asset_events: dict[str, int] = field(default_factory=dict)
    runs: RunsMarker | None = None
    runs_generation: int = 0
    #: Counts the ``attempts`` messages: reads that found a running run's attempts (or a run's status) changed.
    attempts_generation: int = 0
    #: A change not told yet (within `_ATTEMPTS_EVERY` of the last message), and when that message went.
    attempts_due: bool = False
    attempts_told_at: float = float("-inf")
    progress: dict[str, RunProgress | None] = field(default_factory=dict)
    #: When each watched run's progress is next read (monotonic seconds).
    progress_due: dict[str, float] = field(default_factory=dict)
    run_logs: dict[str, int] = field(default_factory=dict)


class ChangeFeed:
    """The one poller of a server's store, and the subscriptions it serves."""

    def __init__(self, store: SqlStore, *, interval: float = POLL_SECONDS) -> None:
        self._markers = ChangeMarkers(store)
        self._store = store
        self._interval = interval
        self._subscriptions: set[Subscription] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._listener_thread: threading.Thread | None = None
        self._events_hint = threading.Event()
        # A pipe that interrupts the PostgreSQL listener's wait; made when a listener starts.
        self._interrupt: tuple[int, int] | None = None
        self._seen = _Seen()
        self._sequence = 0
        self._failing = False

    @property
    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subscriptions)

    def subscribe(
        self,
        *,
        run_id: str | None = None,
        asset: str | None = None,
        initial: frozenset[MessageKind] = frozenset(),
        shown_events: int | None = None,
    ) -> Subscription:
        """A new subscription, called on the client's event loop; closed at once when the feed is."""
        subscription = Subscription(run_id, asset, asyncio.get_running_loop(), initial, shown_events)
        with self._lock:
            if self._closed:
                subscription.close()
                return subscription
            self._subscriptions.add(subscription)
            if self._thread is None:
                self._start()
        self._wake.set()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions.discard(subscription)

    def close(self) -> None:
        """End every stream now and stop polling (idempotent): a shutting-down server waits for no client."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ending = list(self._subscriptions)
            self._subscriptions.clear()
        for subscription in ending:
            subscription.close()
        self._wake.set()
        if self._interrupt is not None:
            os.write(self._interrupt[1], b"x")
        for thread in (self._thread, self._listener_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=5)
        for descriptor in self._interrupt or ():
            with contextlib.suppress(OSError):
                os.close(descriptor)

    # -- the poller ------------------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._poll, name="partita-ui-changes", daemon=True)
        self._thread.start()

    def _start_listener(self) -> None:
        """On PostgreSQL, a thread that wakes the poller when events commit (connecting happens here, off the loop)."""
        try:
            listener = listen_for_events(self._store)
        except Exception as exc:  # noqa: BLE001 - notifications are a shortcut: polling alone still works
            log.warning("not listening for event notifications (%s); polling only", exc)
            return
        if listener is None:
            return
        self._interrupt = os.pipe()
        self._listener_thread = threading.Thread(
            target=self._listen, args=(listener,), name="partita-ui-listen", daemon=True
        )
        self._listener_thread.start()

    def _listen(self, listener: EventListener) -> None:
        assert self._interrupt is not None
        interrupt = self._interrupt[0]
        with listener:
            while not self._closed:
                if listener.wait(1.0, interrupt=interrupt):
                    self._events_hint.set()
                    self._wake.set()

    def _poll(self) -> None:
        self._start_listener()
        while not self._closed:
            self._wake.wait(self._interval if self.subscriber_count else None)
            self._wake.clear()
            with self._lock:
                subscriptions = list(self._subscriptions)
            if self._closed or not subscriptions:
                self._seen = _Seen()  # nobody watched meanwhile: the next read is a new baseline, not news
                continue
            try:
                self._read_and_tell(subscriptions)
            except Exception as exc:  # noqa: BLE001 - the poller outlives a store outage; pages keep what they show
                if not self._failing:  # once per outage, not five times a second
                    log.warning("live updates paused: %s", exc if isinstance(exc, StoreError) else repr(exc))
                self._failing = True
            else:
                if self._failing:
                    log.warning("live updates resumed")
                self._failing = False

    def _read_and_tell(self, subscriptions: list[Subscription]) -> None:
        hinted = self._events_hint.is_set()
        self._events_hint.clear()
        fresh = [subscription for subscription in subscriptions if subscription.fresh]
        assets = sorted({s.asset for s in subscriptions if s.asset is not None})
        run_ids = sorted({s.run_id for s in subscriptions if s.run_id is not None})
        with self._markers.reading() as reader:
            changed = _Changes()
            self._read_events(reader, assets, hinted, changed)
            self._read_runs(reader, changed)
            # An asset's grid shows keys running and failed: with asset pages open, every running run is watched.
            running = {run_id for run_id, _, _ in self._seen.runs.running} if assets and self._seen.runs else set()
            watched = sorted(set(run_ids) | running)
            self._read_run_progress(reader, watched, {s.run_id for s in fresh if s.run_id}, changed)
            self._read_logs(reader, run_ids, changed)
        self._note_attempts(changed, running)
        self._sequence += 1
        for subscription in subscriptions:
            self._tell(subscription, changed)
            subscription.fresh = False

    def _read_events(self, reader: MarkerReader, assets: list[str], hinted: bool, changed: _Changes) -> None:
        seen = self._seen
        newest = reader.newest_event_id()
        changed.events = seen.events >= 0 and (hinted or newest != seen.events)  # a first read is a baseline
        seen.events = newest
        unread = [asset for asset in assets if asset not in seen.asset_events]
        if changed.events or unread:
            # A notification names no asset here: it forces the message of all events, never an asset's.
            for asset, value in reader.newest_event_ids(assets if changed.events else unread).items():
                if asset in seen.asset_events and seen.asset_events[asset] != value:
                    changed.assets.add(asset)
                seen.asset_events[asset] = value
        for asset in [asset for asset in seen.asset_events if asset not in assets]:
            del seen.asset_events[asset]

    def _read_runs(self, reader: MarkerReader, changed: _Changes) -> None:
        seen = self._seen
        marker = reader.runs()
        if seen.runs is not None and marker != seen.runs:
            seen.runs_generation += 1
            changed.runs = True
        seen.runs = marker

    def _read_run_progress(self, reader: MarkerReader, run_ids: list[str], fresh: set[str], changed: _Changes) -> None:
        seen, due = self._seen.progress, self._seen.progress_due
        now = time.monotonic()
        for run_id in run_ids:
            before = seen.get(run_id)
            if run_id in seen and run_id not in fresh:
                if before is not None and before.terminal:
                    continue  # a finished run's attempts are final: they were written with its end
                if now < due.get(run_id, 0.0) and not changed.runs:
                    continue  # a large run's progress is costly to read: read less often, unless a run's status moved
            began = time.monotonic()
            progress = reader.run_progress(run_id)
            # Four times what the read cost, within the second pages are promised: a run of
            # 100,000 attempts is not counted five times a second for as long as it runs.
            due[run_id] = began + min(max(self._interval, 4 * (time.monotonic() - began)), _SLOWEST_PROGRESS)
            if run_id in seen and progress != before:
                changed.run_ids.add(run_id)
            seen[run_id] = progress
        for run_id in [run_id for run_id in seen if run_id not in run_ids]:
            del seen[run_id]
            due.pop(run_id, None)

    def _note_attempts(self, changed: _Changes, running: set[str]) -> None:
        seen = self._seen
        seen.attempts_due = seen.attempts_due or changed.runs or bool(changed.run_ids & running)
        now = time.monotonic()
        if seen.attempts_due and now - seen.attempts_told_at >= _ATTEMPTS_EVERY:
            seen.attempts_generation += 1
            seen.attempts_due, seen.attempts_told_at = False, now
            changed.attempts = True

    def _read_logs(self, reader: MarkerReader, run_ids: list[str], changed: _Changes) -> None:
        seen = self._seen
        for run_id in run_ids:
            known = seen.run_logs.get(run_id)
            progress = seen.progress.get(run_id)
            # A run whose end is stored wrote its last lines with it (or before): read once more, then never.
            if known is not None and progress is not None and progress.terminal and run_id not in changed.run_ids:
                continue
            value = reader.newest_run_log_id(run_id)
            if known is not None and value != known:
                changed.log_runs.add(run_id)
            seen.run_logs[run_id] = value
        for run_id in [run_id for run_id in seen.run_logs if run_id not in run_ids]:
            del seen.run_logs[run_id]

    def _tell(self, subscription: Subscription, changed: _Changes) -> None:
        seen, sequence = self._seen, self._sequence
        initial = subscription.initial if subscription.fresh else frozenset()

        def offer(kind: MessageKind, data: str) -> None:
            subscription.offer(kind, data, sequence)

        if MessageKind.RUNS in initial or changed.runs:
            offer(MessageKind.RUNS, str(seen.runs_generation))
        asset = subscription.asset
        newest = seen.events if asset is None else seen.asset_events.get(asset, 0)
        catch_up = MessageKind.EVENTS in initial and newest != subscription.shown_events
        if catch_up or (changed.events if asset is None else asset in changed.assets):
            offer(MessageKind.EVENTS, str(newest))
        if asset is not None and (MessageKind.ATTEMPTS in initial or changed.attempts):
            offer(MessageKind.ATTEMPTS, str(seen.attempts_generation))
        run_id = subscription.run_id
        if run_id is None:
            return
        progress = seen.progress.get(run_id)
        if progress is not None and (MessageKind.RUN in initial or run_id in changed.run_ids):
            offer(MessageKind.RUN, progress.status)
        if progress is not None and (MessageKind.LOGS in initial or run_id in changed.log_runs):
            offer(MessageKind.LOGS, str(seen.run_logs.get(run_id, 0)))


@dataclass
class _Changes:
    """What one read found changed since the previous one."""

    events: bool = False
    assets: set[str] = field(default_factory=set)
    runs: bool = False
    run_ids: set[str] = field(default_factory=set)
    log_runs: set[str] = field(default_factory=set)
    attempts: bool = False


@contextlib.contextmanager
def subscribed(
    feed: ChangeFeed,
    *,
    run_id: str | None,
    asset: str | None,
    initial: frozenset[MessageKind] = frozenset(),
    shown_events: int | None = None,
) -> Iterator[Subscription]:
    """A subscription for the length of a ``with`` block (a client's stream)."""
    subscription = feed.subscribe(run_id=run_id, asset=asset, initial=initial, shown_events=shown_events)
    try:
        yield subscription
    finally:
        feed.unsubscribe(subscription)
