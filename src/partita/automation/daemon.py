"""`TriggerDaemon`: processes triggers continuously (``partita serve``) or once (``partita trigger --once``).

Each pass evaluates every flow's trigger, then claims due requests and runs
them on a bounded pool of worker threads. SIGTERM/SIGINT stop claiming new
work; runs in flight finish. Several daemons may serve the same store: the
store decides who runs what.

Between passes the daemon sleeps until the poll interval has passed, a run
finishes (its slot is refilled), it is told to stop, or, on PostgreSQL, the
store announces new events of an asset a trigger listens to
(`partita.store.notifications`): then it evaluates at once. The poll
interval stays the safety net for cron ticks, resumed flows and
announcements missed while the listening connection was down.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import select
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.automation.triggers import OnAssetEvents
from partita.errors import PartitaError
from partita.flow import Flow
from partita.store.notifications import EventListener, listen_for_events
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

__all__ = ["TriggerDaemon", "json_log_handler"]

log = logging.getLogger("partita.daemon")

HEARTBEAT_SECONDS = 5.0


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("flow", "request", "run_id", "partition_key", "daemon", "wakeup"):
            if hasattr(record, key):
                document[key] = getattr(record, key)
        return json.dumps(document)


def json_log_handler() -> logging.Handler:
    """Structured logs: one JSON object per line on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter())
    return handler


class _Wakeup:
    """A self-pipe: `set` from any thread, or from a signal handler, ends a `select` on `fileno`.

    Unlike a `threading.Event`, setting it takes no lock, so a signal handler
    running on the thread that waits cannot deadlock.
    """

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def fileno(self) -> int:
        return self._reader.fileno()

    def set(self) -> None:
        # A full buffer already wakes the reader; a closed one means nobody waits.
        with contextlib.suppress(OSError):
            self._writer.send(b"\0")

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            while self._reader.recv(4096):
                pass

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


class TriggerDaemon:
    """Starts the consumer runs that ``flows``' triggers make due in ``store``.

    ``max_in_flight`` bounds the runs at once; ``poll_interval`` is the longest
    time between two evaluations. On PostgreSQL the daemon also listens for
    new events and evaluates at once; ``listen=False`` makes it poll only
    (for a connection pooler that does not pass ``LISTEN`` on).
    """

    def __init__(
        self,
        flows: Sequence[Flow],
        store: SqlStore,
        *,
        max_in_flight: int = 4,
        poll_interval: float = 0.1,
        listen: bool = True,
    ) -> None:
        self.evaluators = [TriggerEvaluator(flow, store) for flow in flows]
        self.store = store
        self.max_in_flight = max_in_flight
        self.poll_interval = poll_interval
        self.daemon_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_in_flight, thread_name_prefix="partita-consumer")
        #: Consumer runs started, and claimed runs whose start the store refused (their requests stay pending).
        self.started_runs = 0
        self.unstarted_runs = 0
        self._counts = threading.Lock()
        # Set while serving when a run finishes (its slot is refilled at once) or on stop.
        self._wakeup: _Wakeup | None = None
        self._paused: dict[str, bool] = {}
        #: Upstream assets of the event triggers: announcements of other assets are ignored.
        self.watched_assets = frozenset(
            asset
            for evaluator in self.evaluators
            if isinstance(evaluator.flow.trigger, OnAssetEvents)
            for asset in evaluator.flow.trigger.assets
        )
        self._listen = listen
        self._listener: EventListener | None = None

    def stop(self) -> None:
        """Stop claiming work; runs in flight finish. Safe to call from a signal handler."""
        self._stop.set()
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.set()

    @property
    def listening(self) -> bool:
        """Whether the daemon is woken by event notifications now (PostgreSQL), rather than polling only."""
        listener = self._listener
        return listener is not None and listener.listening

    def _slot_freed(self, future: concurrent.futures.Future[Any]) -> None:
        started = not future.cancelled() and future.exception() is None and future.result() is not None
        with self._counts:
            if started:
                self.started_runs += 1
            else:
                self.unstarted_runs += 1
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.set()

    def run_once(self) -> int:
        """Process what is pending now: pass until a pass claims nothing, waiting for runs between passes.

        Returns the consumer runs its passes started; `unstarted_runs` counts
        the claims whose start the store refused (their requests wait for a
        later pass) or whose plan was refused.
        """
        concurrent.futures.wait(list(self._in_flight))  # runs claimed before this call are not its own
        before = self.started_runs
        while True:
            concurrent.futures.wait(list(self._in_flight))  # a pass facing full slots would start nothing
            if self._pass() == 0:
                break
        concurrent.futures.wait(list(self._in_flight))
        self._pool.shutdown(wait=True)
        return self.started_runs - before

    def serve(self) -> None:
        """Pass over the triggers until `stop`; runs in flight finish before this returns."""
        triggers = TriggerStore(self.store)
        triggers.daemon_started(self.daemon_id, socket.gethostname(), os.getpid(), time.time())
        wakeup = self._wakeup = _Wakeup()
        if self._stop.is_set():
            wakeup.set()
        last_heartbeat = time.monotonic()
        last_evaluation = float("-inf")
        announced = False
        try:
            # Listen before the first pass: every event committed after that pass is announced.
            if self._listen and self.watched_assets:
                self._listener = listen_for_events(self.store, assets=self.watched_assets)
            log.info(
                "daemon started",
                extra={"daemon": self.daemon_id, "wakeup": "notifications" if self.listening else "polling"},
            )
            while not self._stop.is_set():
                try:
                    # Triggers are evaluated when events were announced or the poll
                    # interval has passed; a freed slot only takes the next due request.
                    evaluate = announced or time.monotonic() - last_evaluation >= self.poll_interval
                    if evaluate:
                        last_evaluation = time.monotonic()
                    self._pass(evaluate)
                    if time.monotonic() - last_heartbeat >= HEARTBEAT_SECONDS:
                        triggers.daemon_heartbeat(self.daemon_id, time.time())
                        last_heartbeat = time.monotonic()
                except PartitaError as exc:
                    log.error("trigger pass failed: %s", exc, extra={"daemon": self.daemon_id})
                next_due = min(last_evaluation + self.poll_interval, last_heartbeat + HEARTBEAT_SECONDS)
                announced = self._sleep(max(0.0, next_due - time.monotonic()))
        finally:
            log.info("daemon stopping: waiting for runs in flight", extra={"daemon": self.daemon_id})
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            concurrent.futures.wait(list(self._in_flight))
            self._pool.shutdown(wait=True)
            self._wakeup = None
            wakeup.close()
            triggers.daemon_heartbeat(self.daemon_id, time.time(), stopped=True)
            log.info("daemon stopped", extra={"daemon": self.daemon_id})

    def _sleep(self, timeout: float) -> bool:
        """Wait for a freed slot, a stop, announced events or the timeout; True when events were announced."""
        assert self._wakeup is not None
        if self._listener is not None:
            announced = self._listener.wait(timeout, interrupt=self._wakeup.fileno())
        else:
            select.select([self._wakeup.fileno()], [], [], timeout)
            announced = False
        self._wakeup.clear()
        return announced

    def _pass(self, evaluate: bool = True) -> int:
        """Evaluate triggers (when due) and fill free slots with due requests; the number claimed.

        Every flow is evaluated even when the slots are full: its requests
        are then recorded and wait for a slot, instead of waiting unseen
        behind another flow's backlog.
        """
        claimed_runs = 0
        full = False
        for evaluator in self.evaluators:
            if evaluate:
                report = evaluator.evaluate()
                self._paused[evaluator.flow.name] = report.paused
                for event_id, reason in report.rejected:
                    log.warning("event ignored: %s", reason, extra={"flow": evaluator.flow.name, "request": event_id})
            if full or self._paused.get(evaluator.flow.name):
                continue
            for request in evaluator.due_requests(limit=4 * self.max_in_flight):
                if self._stop.is_set():
                    return claimed_runs
                self._in_flight = {future for future in self._in_flight if not future.done()}
                if len(self._in_flight) >= self.max_in_flight:
                    full = True
                    break
                claimed = evaluator.claim(request)
                if claimed is None:
                    continue
                claimed_runs += 1
                log.info(
                    "starting consumer run",
                    extra={"flow": evaluator.flow.name, "request": claimed.id, "run_id": claimed.run_id},
                )
                future = self._pool.submit(run_request, evaluator, claimed)
                future.add_done_callback(self._slot_freed)
                self._in_flight.add(future)
        return claimed_runs
